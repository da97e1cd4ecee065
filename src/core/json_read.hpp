// Reading JSON that a user hands us (configs, reports, rules) without
// trusting it: the file's size is checked before it is read, nesting depth
// before anything recurses over the tree, and the text must be exactly one
// JSON value (no duplicate keys, no NUL byte, nothing after the value).
// Integers are taken from JSON numbers exactly or not at all. Every refusal
// is a UsageError naming the source, the place and what is allowed.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace chunkinv {

// Deeper than any config or report (a report is 5 levels deep); deep enough
// that nothing which recurses over a JSON tree (copy, dump, compare) can
// exhaust the stack.
inline constexpr int kMaxJsonDepth = 64;

// What is read, for messages and limits: "config configs/ci.json", at most
// `max_bytes` (raised with $`limit_variable`).
struct JsonSource {
  std::string what;
  uint64_t max_bytes = 0;
  std::string limit_variable;
};

// $variable (bytes, or with K, M, G, T: "512M", "4G"), else `fallback`.
// A malformed value is a UsageError naming the variable.
uint64_t byte_limit(const char* variable, uint64_t fallback);

// Configs and rules files: a few kilobytes; at most 64 MiB, or
// $CHUNKINV_MAX_CONFIG_BYTES.
JsonSource config_source(const std::string& what);
// Reports: with --per-sample they grow with samples x metrics; at most
// 2 GiB, or $CHUNKINV_MAX_REPORT_BYTES.
JsonSource report_source(const std::string& what);

// The whole file: a UsageError ("<what>: ...") when it cannot be opened, is
// a directory, or holds more than src.max_bytes (checked from its size before
// reading where it has one, else while reading), or a NUL byte (the reading
// stops at the first: /dev/zero is refused at once).
std::string read_text_file(const std::string& path, const JsonSource& src);

// One JSON value, strictly: refuses NUL bytes, nesting deeper than
// `max_depth`, a key twice in one object, and anything but whitespace after
// the value. Messages: "<what>: key \"chunk\" appears twice in experiments[0]".
nlohmann::json parse_json_strict(std::string_view text, const std::string& what, int max_depth = kMaxJsonDepth);

// read_text_file, then parse_json_strict.
nlohmann::json read_json_file(const std::string& path, const JsonSource& src);

// Empties `v` (children first) without allocating. nlohmann-json 3.11
// frees a container through a heap stack as large as the container: when
// memory has run out (a huge report under ulimit -v), that throws in a
// destructor and aborts. Call it on a large tree before it goes away; for
// trees at most kMaxJsonDepth deep (what parse_json_strict returns).
void release_json(nlohmann::json& v) noexcept;

// Releases a tree when it goes out of scope (declare it after the tree).
class JsonReleaser {
 public:
  explicit JsonReleaser(nlohmann::json& v) : v_(v) {}
  ~JsonReleaser() { release_json(v_); }
  JsonReleaser(const JsonReleaser&) = delete;
  JsonReleaser& operator=(const JsonReleaser&) = delete;

 private:
  nlohmann::json& v_;
};

// The integer a JSON number holds, exactly, when it lies in [lo, hi]: JSON
// integers as they are, a float only when it is integral and in range (a
// double that does not fit is never cast). nullopt for anything else
// (strings, fractions, 1e300, -1 for an unsigned).
std::optional<int64_t> json_integer(const nlohmann::json& v, int64_t lo, int64_t hi);
std::optional<uint64_t> json_unsigned(const nlohmann::json& v, uint64_t lo, uint64_t hi);
// The same, or a UsageError "<what> = <value> must be a whole number from LO to HI".
int64_t require_integer(const nlohmann::json& v, int64_t lo, int64_t hi, const std::string& what);
uint64_t require_unsigned(const nlohmann::json& v, uint64_t lo, uint64_t hi, const std::string& what);

// A JSON value for a message: its dump, cut to `max_chars` with "..." (a
// hostile value can be megabytes long).
std::string json_excerpt(const nlohmann::json& v, size_t max_chars = 60);

}  // namespace chunkinv
