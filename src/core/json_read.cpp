#include "core/json_read.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/limits.hpp"

namespace chunkinv {

using nlohmann::json;

uint64_t byte_limit(const char* variable, uint64_t fallback) {
  const char* env = std::getenv(variable);
  if (!env || !*env) return fallback;
  return parse_size(variable, env);
}

JsonSource config_source(const std::string& what) {
  constexpr const char* variable = "CHUNKINV_MAX_CONFIG_BYTES";
  return {what, byte_limit(variable, uint64_t{64} << 20), variable};
}

JsonSource report_source(const std::string& what) {
  constexpr const char* variable = "CHUNKINV_MAX_REPORT_BYTES";
  return {what, byte_limit(variable, uint64_t{2} << 30), variable};
}

namespace {

// "config c.json: 200 MiB, more than the 64 MiB limit (raise it with ...)";
// without the size where it is not known (a pipe, a device).
std::string limit_text(std::optional<uint64_t> size, const JsonSource& src) {
  return fmt::format("{}: {}more than the {} limit (raise it with {}=SIZE, e.g. {}=4G)", src.what,
                     size ? format_bytes(double(*size)) + ", " : "", format_bytes(double(src.max_bytes)),
                     src.limit_variable, src.limit_variable);
}

// Builds the tree as nlohmann's own DOM parser does (iteratively, no
// recursion), refusing what parse_json_strict refuses. nlohmann's
// callback parser could check the same, but rescans the parent container at
// every object's end: quadratic on an array of a million objects.
class StrictBuilder {
 public:
  StrictBuilder(json& root, const std::string& what, int max_depth) : root_(root), what_(what), max_depth_(max_depth) {}

  bool null() { return put(json(nullptr)); }
  bool boolean(bool v) { return put(json(v)); }
  bool number_integer(json::number_integer_t v) { return put(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return put(json(v)); }
  bool number_float(json::number_float_t v, const json::string_t&) { return put(json(v)); }
  bool string(json::string_t& v) { return put(json(std::move(v))); }
  bool binary(json::binary_t& v) { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(json::string_t& k) {
    Frame& f = stack_.back();
    if (f.node->contains(k))
      throw UsageError(fmt::format("{}: key \"{}\" appears twice in {} (JSON keys must be unique)", what_, cut(k),
                                   place(false)));
    f.key = std::move(k);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const json::exception& e) {
    std::string msg = e.what();
    if (msg.rfind("[json.exception.", 0) == 0 && msg.find("] ") != std::string::npos) msg.erase(0, msg.find("] ") + 2);
    throw UsageError(fmt::format("{}: not valid JSON ({})", what_, msg));
  }

 private:
  struct Frame {
    json* node;
    std::string key;   // objects: the key of the value being read
    size_t count = 0;  // arrays: values read so far
  };

  static std::string cut(const std::string& s) { return s.size() > 40 ? s.substr(0, 37) + "..." : s; }

  // Where the value being read sits, "experiments[0].chunk" ("the top
  // level" outside every container); without the innermost object's key
  // when `inner_key` is false (the object itself).
  std::string place(bool inner_key = true) const {
    std::string p;
    for (size_t i = 0; i < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      if (f.node->is_array()) {
        p += fmt::format("[{}]", f.count ? f.count - 1 : 0);
      } else if (inner_key || i + 1 < stack_.size()) {
        p += (p.empty() ? "" : ".") + cut(f.key);
      }
    }
    if (p.size() > 100) p = p.substr(0, 97) + "...";
    return p.empty() ? "the top level" : p;
  }

  // Adds a value where the parser stands; returns where it was stored.
  json* add(json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.node->is_array()) {
      f.node->get_ref<json::array_t&>().push_back(std::move(v));
      ++f.count;
      return &f.node->get_ref<json::array_t&>().back();
    }
    json& slot = (*f.node)[f.key];
    slot = std::move(v);
    return &slot;
  }

  bool put(json&& v) {
    add(std::move(v));
    return true;
  }

  bool open(json&& container) {
    if (static_cast<int>(stack_.size()) >= max_depth_)
      throw UsageError(fmt::format("{}: nested deeper than {} levels at {} (a config or report needs a few)", what_,
                                   max_depth_, place()));
    json* node = add(std::move(container));
    stack_.push_back({node, {}, 0});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  json& root_;
  const std::string& what_;
  const int max_depth_;
  std::vector<Frame> stack_;
};

}  // namespace

void release_json(json& v) noexcept {
  if (v.is_array()) {
    auto& a = v.get_ref<json::array_t&>();
    for (auto& x : a) release_json(x);
    a.clear();  // each element is a scalar or an empty container now
  } else if (v.is_object()) {
    auto& o = v.get_ref<json::object_t&>();
    for (auto& [k, x] : o) release_json(x);
    o.clear();
  }
}

json parse_json_strict(std::string_view text, const std::string& what, int max_depth) {
  // nlohmann's lexer takes a NUL byte for the end of the input and would
  // accept "{}\0garbage"; JSON text never holds one (not even in strings).
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos)
    throw UsageError(fmt::format("{}: byte {} is a NUL byte; JSON text holds none", what, nul));
  json root;
  StrictBuilder builder(root, what, max_depth);
  // What was built so far is released on every error (see release_json).
  try {
    json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, /*strict=*/true);
  } catch (const UsageError&) {
    release_json(root);
    throw;
  } catch (const json::exception& e) {  // e.g. an excessive size; parse errors are UsageErrors already
    release_json(root);
    throw UsageError(fmt::format("{}: not valid JSON ({})", what, e.what()));
  } catch (const std::bad_alloc&) {
    release_json(root);
    throw UsageError(fmt::format("{}: out of memory while reading its {} of JSON", what, format_bytes(double(text.size()))));
  }
  return root;
}

std::string read_text_file(const std::string& path, const JsonSource& src) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError(fmt::format("{}: cannot be opened ({})", src.what, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw UsageError(fmt::format("{}: cannot be read ({})", src.what, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw UsageError(fmt::format("{}: is a directory, not a JSON file", src.what));
  const bool regular = S_ISREG(st.st_mode);
  if (regular && static_cast<uint64_t>(st.st_size) > src.max_bytes)
    throw UsageError(limit_text(static_cast<uint64_t>(st.st_size), src));
  std::string text;
  try {
    if (regular) text.reserve(static_cast<size_t>(st.st_size));
    std::vector<char> buf(1 << 20);
    while (true) {
      const ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        throw UsageError(fmt::format("{}: cannot be read ({})", src.what, std::strerror(errno)));
      }
      if (n == 0) break;
      // JSON text holds no NUL byte (parse_json_strict refuses one): the
      // first one ends the reading, so /dev/zero is refused at once instead
      // of after the whole limit (2 GiB for a report) has been read.
      if (const void* nul = std::memchr(buf.data(), 0, static_cast<size_t>(n)))
        throw UsageError(fmt::format("{}: byte {} is a NUL byte; JSON text holds none", src.what,
                                     text.size() + static_cast<size_t>(static_cast<const char*>(nul) - buf.data())));
      // A file that grows while read, or a pipe or device, is cut off here.
      if (static_cast<uint64_t>(n) > src.max_bytes - text.size()) throw UsageError(limit_text(std::nullopt, src));
      text.append(buf.data(), static_cast<size_t>(n));
    }
  } catch (const std::bad_alloc&) {
    throw UsageError(fmt::format("{}: out of memory while reading it ({} so far)", src.what, format_bytes(double(text.size()))));
  }
  return text;
}

json read_json_file(const std::string& path, const JsonSource& src) {
  std::string text = read_text_file(path, src);
  return parse_json_strict(text, src.what);
}

std::optional<int64_t> json_integer(const json& v, int64_t lo, int64_t hi) {
  int64_t x = 0;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // [-2^63, 2^63) holds every integral double that fits in int64_t.
    if (!std::isfinite(d) || d != std::trunc(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0)
      return std::nullopt;
    x = static_cast<int64_t>(d);
  } else {
    return std::nullopt;
  }
  if (x < lo || x > hi) return std::nullopt;
  return x;
}

std::optional<uint64_t> json_unsigned(const json& v, uint64_t lo, uint64_t hi) {
  uint64_t x = 0;
  if (v.is_number_unsigned()) {
    x = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < 0) return std::nullopt;
    x = static_cast<uint64_t>(i);
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d) || d < 0.0 || d >= 18446744073709551616.0) return std::nullopt;
    x = static_cast<uint64_t>(d);
  } else {
    return std::nullopt;
  }
  if (x < lo || x > hi) return std::nullopt;
  return x;
}

int64_t require_integer(const json& v, int64_t lo, int64_t hi, const std::string& what) {
  if (const auto x = json_integer(v, lo, hi)) return *x;
  throw UsageError(fmt::format("{} = {} must be a whole number from {} to {}", what, json_excerpt(v), lo, hi));
}

uint64_t require_unsigned(const json& v, uint64_t lo, uint64_t hi, const std::string& what) {
  if (const auto x = json_unsigned(v, lo, hi)) return *x;
  throw UsageError(fmt::format("{} = {} must be a whole number from {} to {}", what, json_excerpt(v), lo, hi));
}

std::string json_excerpt(const json& v, size_t max_chars) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars > 3 ? max_chars - 3 : 0) + "...";
  return s;
}

}  // namespace chunkinv
