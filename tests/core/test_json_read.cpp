// Bounded, strict JSON reading (core/json_read): what a config, report or
// rules file may not be, and exact integers from JSON numbers.
#include <gtest/gtest.h>

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/json_read.hpp"
#include "support/usage_error.hpp"

using namespace chunkinv;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

using chunkinv::testing::usage_error;

std::string nested(int depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

fs::path temp_file(const std::string& name) {
  return fs::temp_directory_path() / ("chunkinv_json_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace

TEST(JsonRead, StrictParseAcceptsWhatJsonParseAccepts) {
  const std::string text = R"( {"a": [1, -2, 3.5, "x", null, true, {"b": {}}], "c": 18446744073709551615} )" "\n";
  EXPECT_EQ(parse_json_strict(text, "t"), json::parse(text));
  EXPECT_EQ(parse_json_strict("7", "t"), json(7));
  EXPECT_EQ(parse_json_strict(nested(kMaxJsonDepth), "t"), json::parse(nested(kMaxJsonDepth)));
}

TEST(JsonRead, DepthIsRefusedBeforeAnythingRecurses) {
  EXPECT_HAS(usage_error([] { parse_json_strict(nested(kMaxJsonDepth + 1), "config c.json"); }),
             "config c.json: nested deeper than 64 levels at [0]");
  // A million levels: one line, no stack overflow (the tree is never built).
  EXPECT_HAS(usage_error([] { parse_json_strict(nested(1'000'000), "t"); }), "nested deeper than 64");
  std::string objects;  // unfinished as well: the depth is seen first
  for (int k = 0; k < 1'000'000; ++k) objects += "{\"a\": ";
  EXPECT_HAS(usage_error([&] { parse_json_strict(objects, "t"); }), "nested deeper than 64 levels at a.a.a.a");
  std::string path = R"({"experiments": [{"chunk": )" + nested(100) + "}]}";
  EXPECT_HAS(usage_error([&] { parse_json_strict(path, "t"); }), "at experiments[0].chunk[0][0]");
}

TEST(JsonRead, DuplicateKeysNulBytesAndTrailingBytesAreRefused) {
  EXPECT_HAS(usage_error([] { parse_json_strict(R"({"a": 1, "a": 2})", "r.json"); }),
             "r.json: key \"a\" appears twice in the top level");
  EXPECT_HAS(usage_error([] { parse_json_strict(R"({"x": [{}, {"k": 1, "k": 1}]})", "r"); }),
             "key \"k\" appears twice in x[1]");
  // The same key in two objects is fine.
  EXPECT_NO_THROW(parse_json_strict(R"([{"k": 1}, {"k": 2}])", "r"));
  EXPECT_HAS(usage_error([] { parse_json_strict(std::string("{}\0garbage", 10), "r"); }), "byte 2 is a NUL byte");
  EXPECT_HAS(usage_error([] { parse_json_strict(std::string("{\"a\": \"b\0\"}", 11), "r"); }), "byte 8 is a NUL byte");
  EXPECT_HAS(usage_error([] { parse_json_strict("{} {}", "r"); }), "r: not valid JSON");
  EXPECT_HAS(usage_error([] { parse_json_strict("{}x", "r"); }), "not valid JSON");
  EXPECT_HAS(usage_error([] { parse_json_strict("", "r"); }), "not valid JSON");
  EXPECT_NO_THROW(parse_json_strict("{} \n\t\r ", "r"));
}

TEST(JsonRead, IntegersAreExactOrRefused) {
  const auto i = [](const char* text, int64_t lo, int64_t hi) { return json_integer(json::parse(text), lo, hi); };
  const auto u = [](const char* text) { return json_unsigned(json::parse(text), 0, UINT64_MAX); };
  EXPECT_EQ(i("16", 2, 64), 16);
  EXPECT_EQ(i("16.0", 2, 64), 16);  // integral floats are the integer
  EXPECT_EQ(i("4294967312", 2, 64), std::nullopt);  // 2^32 + 16: never narrowed to 16
  EXPECT_EQ(i("1e300", INT64_MIN, INT64_MAX), std::nullopt);
  EXPECT_EQ(i("1e20", INT64_MIN, INT64_MAX), std::nullopt);
  EXPECT_EQ(i("9223372036854775808", INT64_MIN, INT64_MAX), std::nullopt);  // 2^63, unsigned in JSON
  EXPECT_EQ(i("9.2233720368547758e18", INT64_MIN, INT64_MAX), std::nullopt);  // 2^63 as a double
  EXPECT_EQ(i("-9.2233720368547758e18", INT64_MIN, INT64_MAX), INT64_MIN);
  EXPECT_EQ(i("2.5", INT64_MIN, INT64_MAX), std::nullopt);
  EXPECT_EQ(i("\"16\"", INT64_MIN, INT64_MAX), std::nullopt);
  EXPECT_EQ(i("null", INT64_MIN, INT64_MAX), std::nullopt);
  EXPECT_EQ(u("18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(u("18446744073709551632"), std::nullopt);  // 2^64 + 16: a double 2^64, which does not fit
  EXPECT_EQ(u("1.8446744073709552e19"), std::nullopt);
  EXPECT_EQ(u("1e30"), std::nullopt);
  EXPECT_EQ(u("-1"), std::nullopt);
  EXPECT_EQ(u("-0.0"), 0u);
  EXPECT_EQ(u("1.5"), std::nullopt);
  EXPECT_EQ(u("1e15"), 1'000'000'000'000'000u);
  EXPECT_EQ(json_unsigned(json(5), 1, 4), std::nullopt);
  EXPECT_HAS(usage_error([] { require_unsigned(json(2.7), 1, 10, "config c: \"samples\""); }),
             "config c: \"samples\" = 2.7 must be a whole number from 1 to 10");
  EXPECT_HAS(usage_error([] { require_integer(json(-1), 0, 5, "x"); }), "x = -1 must be a whole number from 0 to 5");
}

TEST(JsonRead, FilesAreBoundedBeforeTheyAreRead) {
  const fs::path f = temp_file("big.json");
  {
    std::ofstream out(f);
    out << "[1]";
  }
  fs::resize_file(f, 65 << 20);  // sparse: 65 MiB that are never read
  EXPECT_HAS(usage_error([&] { read_json_file(f.string(), config_source("config big.json")); }),
             "config big.json: 65 MiB, more than the 64 MiB limit (raise it with CHUNKINV_MAX_CONFIG_BYTES=SIZE");
  ::setenv("CHUNKINV_MAX_CONFIG_BYTES", "66M", 1);
  EXPECT_HAS(usage_error([&] { read_json_file(f.string(), config_source("c")); }), "byte 3 is a NUL byte");
  ::setenv("CHUNKINV_MAX_CONFIG_BYTES", "lots", 1);
  EXPECT_HAS(usage_error([&] { read_json_file(f.string(), config_source("c")); }),
             "CHUNKINV_MAX_CONFIG_BYTES lots: not a size");
  ::unsetenv("CHUNKINV_MAX_CONFIG_BYTES");
  fs::remove(f);
  // A device has no size. /dev/zero is refused at its first byte, before
  // the limit is reached: at the 2 GiB of a report's limit it was read
  // whole, in 20 s, into 2 GiB of memory.
  const JsonSource small{"report /dev/zero", 1 << 20, "CHUNKINV_MAX_REPORT_BYTES"};
  EXPECT_HAS(usage_error([&] { read_json_file("/dev/zero", report_source("report /dev/zero")); }),
             "report /dev/zero: byte 0 is a NUL byte; JSON text holds none");
  // A pipe of endless JSON whitespace is cut off at the limit while read.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::thread writer([fd = fds[1]] {
    sigset_t pipe_signal;  // the reader stops early: EPIPE here, not SIGPIPE
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    const std::string spaces(1 << 16, ' ');
    for (int i = 0; i < 64; ++i)
      if (::write(fd, spaces.data(), spaces.size()) < 0) break;
    ::close(fd);
  });
  EXPECT_HAS(usage_error([&] { read_json_file("/dev/fd/" + std::to_string(fds[0]), small); }),
             "report /dev/zero: more than the 1.0 MiB limit (raise it with CHUNKINV_MAX_REPORT_BYTES=SIZE");
  ::close(fds[0]);
  writer.join();
  EXPECT_HAS(usage_error([&] { read_json_file(fs::temp_directory_path().string(), small); }),
             "is a directory, not a JSON file");
  EXPECT_HAS(usage_error([&] { read_json_file("/nonexistent/r.json", small); }),
             "report /dev/zero: cannot be opened (No such file or directory)");
}
