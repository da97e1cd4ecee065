// scripts/plot.py's presets for seq reports: `position` draws o's error per
// window against the position, `seq_len` o's error (total and inverse only)
// against T per path and method with the share of finite outputs; a preset
// on a report without windows is one line, exit 2. Run through the script's
// shebang (/usr/bin/python3); skipped where that Python lacks matplotlib,
// except in CI, as the other PlotScript tests.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "support/shell.hpp"

namespace chunkinv {
namespace {

bool plot_python_ready() {
  if (std::system("/usr/bin/python3 -c 'import matplotlib, numpy' >/dev/null 2>&1") == 0) return true;
  const char* ci = std::getenv("CI");
  if (ci && std::string(ci) == "true")
    ADD_FAILURE() << "CI: /usr/bin/python3 has no matplotlib/numpy (scripts/test.sh installs python3-matplotlib)";
  return false;
}

std::string plot(const std::string& args) {
  return "'" + std::string(CHUNKINV_SOURCE_DIR) + "/scripts/plot.py' " + args + " 2>&1";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(PlotScriptSeq, PresetsDrawErrorAgainstPositionAndLength) {
  if (!plot_python_ready()) GTEST_SKIP() << "/usr/bin/python3 has no matplotlib and numpy";
  const std::string dir = testing::test_dir("seq-plot");
  // Two lengths, two methods, two paths; windows of 64 positions.
  const auto r = testing::run_chunkinv_in(
      dir, "seq -a 'seq_len=[256,512]' -a chunk=16 -a dim=8 -a value_dim=8 -a window=64 "
           "-a 'method=[neumann,fwdsub_fp32]' --paths gold,emulated --samples 2 -q -o seq.json");
  ASSERT_EQ(r.status, 0) << r.out;

  const auto pos = testing::run_shell(plot(dir + "/seq.json -o " + dir + "/position.svg --preset position"));
  ASSERT_EQ(pos.status, 0) << pos.out;
  const std::string a = read_file(dir + "/position.svg");
  // Text stays text: the axis, the row, a facet per length, the series and the last window's position.
  for (const char* want : {"position", "per window", "T = 256", "T = 512", "emulated / neumann", "gold / fwdsub_fp32",
                           ">448<"})
    EXPECT_NE(a.find(want), std::string::npos) << want;
  EXPECT_EQ(a.find("outputs (%)"), std::string::npos) << "no share row: a window has no finite flag of its own";

  const auto len = testing::run_shell(plot(dir + "/seq.json -o " + dir + "/length.svg --preset seq_len"));
  ASSERT_EQ(len.status, 0) << len.out;
  const std::string b = read_file(dir + "/length.svg");
  for (const char* want : {"sequence length", "inverse only", "outputs (%)", "emulated / fwdsub_fp32",
                           "95% Wilson interval", ">512<"})
    EXPECT_NE(b.find(want), std::string::npos) << want;

  // A chunk report has no windows; the position preset takes no --metric.
  const auto chunks = testing::run_chunkinv_in(dir, "run -a chunk=16 -a dim=8 --samples 20 -q -o run.json");
  ASSERT_EQ(chunks.status, 0) << chunks.out;
  const auto bad = testing::run_shell(plot(dir + "/run.json -o " + dir + "/bad.svg --preset position"));
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("not chunkinv seq's"), std::string::npos) << bad.out;
  const auto metric =
      testing::run_shell(plot(dir + "/seq.json -o " + dir + "/bad.svg --preset position --metric o_rel_rmse"));
  EXPECT_EQ(metric.status, 2) << metric.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad.svg"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chunkinv
