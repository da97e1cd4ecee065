// Experiment specs: configs and -a axes as a hostile user writes them.
// Every case is one UsageError naming the culprit and what is allowed
// (exit 2 through the binary), refused before anything large is made.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "driver/spec.hpp"
#include "support/shell.hpp"
#include "support/usage_error.hpp"

using namespace chunkinv;
namespace fs = std::filesystem;

namespace {

using chunkinv::testing::usage_error;

ExperimentSpec config(const std::string& text) { return parse_config(text, "c.json"); }

// The config's error, with a valid experiment unless `text` replaces it.
std::string config_error(const std::string& text) {
  return usage_error([&] { expand(config(text)); });
}

std::vector<Point> points_of(const std::vector<std::string>& axes) {
  ExperimentSpec spec;
  for (const auto& a : axes) apply_axis(spec, a);
  return expand(spec);
}

std::string axes_error(const std::vector<std::string>& axes) {
  return usage_error([&] { points_of(axes); });
}

std::string deep(int depth) { return std::string(depth, '[') + "16" + std::string(depth, ']'); }

const char* kGrid = R"("experiments": [{"family": "floor", "chunk": 16}])";

}  // namespace

TEST(Spec, ConfigNameSeedAndSamplesMustHaveTheirTypes) {
  for (const char* name : {"5", "null", "{}", "[\"x\"]"})
    EXPECT_HAS(config_error(fmt::format(R"({{"name": {}, {}}})", name, kGrid)),
               fmt::format("config c.json: \"name\" = {} must be a string", name));
  EXPECT_HAS(config_error(fmt::format(R"({{"description": 1, {}}})", kGrid)), "\"description\" = 1 must be a string");
  // Exact whole numbers: never a cast of a double that does not fit.
  for (const char* seed : {"-1", "1.5", "1e30", "18446744073709551616", "\"0\"", "null"})
    EXPECT_HAS(config_error(fmt::format(R"({{"seed": {}, {}}})", seed, kGrid)),
               "must be a whole number from 0 to 18446744073709551615");
  EXPECT_HAS(config_error(fmt::format(R"({{"seed": 1e30, {}}})", kGrid)),
             "config c.json: \"seed\" = 1e+30 must be a whole number from 0 to 18446744073709551615");
  EXPECT_EQ(config(fmt::format(R"({{"seed": 18446744073709551615, {}}})", kGrid)).seed, UINT64_MAX);
  EXPECT_EQ(config(fmt::format(R"({{"seed": 1e18, {}}})", kGrid)).seed, 1'000'000'000'000'000'000u);
  for (const char* samples : {"-1", "0", "2.7", "1e30", "18446744073709551616", "1e16"})
    EXPECT_HAS(config_error(fmt::format(R"({{"samples": {}, {}}})", samples, kGrid)),
               "must be a whole number from 1 to 1000000000000000");
  EXPECT_EQ(config(fmt::format(R"({{"samples": 1e12, {}}})", kGrid)).samples, 1'000'000'000'000u);
  EXPECT_HAS(config_error(fmt::format(R"({{"paths": "gold", {}}})", kGrid)),
             "\"paths\" = \"gold\" must be a non-empty list of path names");
  EXPECT_HAS(config_error(fmt::format(R"({{"paths": [], {}}})", kGrid)), "must be a non-empty list");
}

TEST(Spec, ConfigJsonIsStrict) {
  EXPECT_HAS(config_error(R"({"seed": 1, "seed": 2, "experiments": [{}]})"),
             "config c.json: key \"seed\" appears twice in the top level");
  EXPECT_HAS(config_error(R"({"experiments": [{"chunk": 8, "chunk": 16}]})"),
             "key \"chunk\" appears twice in experiments[0]");
  EXPECT_HAS(config_error(std::string(R"({"experiments": [{}]})") + '\0' + "garbage"), "is a NUL byte");
  EXPECT_HAS(config_error(R"({"experiments": [{}]} {})"), "not valid JSON");
  // Deep nesting anywhere (an axis value, a family axis, an unknown key).
  EXPECT_HAS(config_error(R"({"experiments": [{"chunk": )" + deep(100000) + "}]}"),
             "nested deeper than 64 levels at experiments[0].chunk");
  EXPECT_HAS(config_error(R"({"experiments": [{"decay_floor": )" + deep(5000) + "}]}"), "nested deeper than 64");
  EXPECT_HAS(config_error(R"({"tabel": )" + deep(5000) + R"(, "experiments": [{}]})"), "nested deeper than 64");
  // Shallow nesting in a value is still no value.
  EXPECT_HAS(config_error(R"({"experiments": [{"chunk": [[16]]}]})"),
             "axis chunk: [16] is not a value (a number, a string or null; lists do not nest)");
  EXPECT_HAS(config_error(R"({"experiments": [{"decay_floor": {"a": 1}}]})"), "axis decay_floor = {\"a\":1} is not a value");
  EXPECT_HAS(config_error(R"({"experiments": [{"family": []}]})"), "axis family = [] has no values");
  EXPECT_HAS(config_error(R"({"experiments": [{"chunk": []}]})"), "axis chunk = [] has no values");
  EXPECT_HAS(config_error(R"({"experiments": []})"), "\"experiments\" must be a non-empty list");
}

TEST(Spec, UnknownKeysAndAxesNoFamilyOfTheGridTakesAreErrors) {
  EXPECT_HAS(config_error(R"({"sample": 5, "experiments": [{}]})"), "unknown key \"sample\" (did you mean \"samples\"?)");
  EXPECT_HAS(config_error(R"({"experiments": [{"chunks": 8}]})"), "unknown axis \"chunks\" (did you mean \"chunk\"?)");
  // log_decay is an axis, but not model_like's: silently ignored before.
  EXPECT_HAS(config_error(R"({"experiments": [{"family": "model_like", "log_decay": -0.1}]})"),
             "config c.json: experiments[0]: axis log_decay is taken by no family of this grid (model_like takes "
             "decay_floor, gating); it is an axis of weak_decay_correlated");
  EXPECT_HAS(config_error(R"({"experiments": [{"family": "flor"}]})"),
             "experiments[0]: unknown family \"flor\" (did you mean \"floor\"?)");
  // Taken by one family of the grid: dropped for the others, as documented.
  const auto pts = expand(config(R"({"experiments": [{"family": ["floor", "weak_decay_correlated"],
                                                      "decay_floor": [-3, -4], "log_decay": -0.5}]})"));
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_EQ(pts[0].config.params["decay_floor"], -3);
  EXPECT_EQ(pts[2].config.family, "weak_decay_correlated");
  EXPECT_FALSE(pts[2].config.params.contains("decay_floor"));
  EXPECT_EQ(pts[2].config.params["log_decay"], -0.5);
}

TEST(Spec, ConfigSizeAndGridSizeAreBoundedBeforeExpanding) {
  // 2e5 decay floors in one list: refused by count, not run.
  const auto list_of = [](int n) {
    std::string l;
    for (int i = 1; i <= n; ++i) {
      if (i > 1) l += ',';
      l += std::to_string(-i);
    }
    return l;
  };
  EXPECT_HAS(config_error(R"({"experiments": [{"decay_floor": [)" + list_of(200000) + "]}]}"),
             "the experiment names 200000 configurations (the product of its axes' lengths), more than the 100000 a "
             "run may have; raise the limit with CHUNKINV_MAX_CONFIGURATIONS=N");
  // 2.6e9 configurations, and more than 2^64: counted, never expanded.
  const std::string list = list_of(1000), longer = list_of(100000);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_HAS(config_error(R"({"experiments": [{"family": ["floor", "model_like"], "chunk": [)" + list + "], \"dim\": [" +
                          list + "], \"decay_floor\": [" + list + "]}]}"),
             "names 2000000000 configurations");
  std::string many = R"({"experiments": [)";
  for (int g = 0; g < 2; ++g)  // 2 x 10^20
    many += std::string(g ? "," : "") + R"({"chunk": [)" + longer + "], \"dim\": [" + longer + "], \"decay_floor\": [" +
            longer + "], \"method\": [" + longer + "]}";
  EXPECT_HAS(config_error(many + "]}"), "names more than 10^19 configurations");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  // The limit can be raised.
  const std::string floors = R"({"experiments": [{"decay_floor": [)" + list_of(120000) + "]}]}";
  EXPECT_HAS(config_error(floors), "names 120000 configurations");
  ::setenv("CHUNKINV_MAX_CONFIGURATIONS", "120000", 1);
  EXPECT_EQ(expand(config(floors)).size(), 120000u);
  ::setenv("CHUNKINV_MAX_CONFIGURATIONS", "-5", 1);
  EXPECT_HAS(config_error(R"({"experiments": [{}]})"), "CHUNKINV_MAX_CONFIGURATIONS -5: must be a whole number");
  ::unsetenv("CHUNKINV_MAX_CONFIGURATIONS");
  // The file itself: refused by its size before it is read.
  const fs::path f = fs::temp_directory_path() / ("chunkinv_spec_" + std::to_string(::getpid()) + ".json");
  std::ofstream(f) << R"({"experiments": [{"chunk": [16)";
  fs::resize_file(f, 200 << 20);
  EXPECT_HAS(usage_error([&] { load_config(f.string()); }), "200 MiB, more than the 64 MiB limit");
  fs::remove(f);
  EXPECT_HAS(usage_error([&] { load_config(fs::temp_directory_path().string()); }), "is a directory");
}

TEST(Spec, IntegerAxesAreExact) {
  for (const char* v : {"4294967312", "1e300", "1e20", "18446744073709551632", "16.5", "-16", "1", "65", "\"16\""})
    EXPECT_HAS(axes_error({std::string("chunk=") + v}), "must be a whole number from 2 to 64");
  EXPECT_HAS(axes_error({"chunk=4294967312"}), "axis chunk = 4294967312 must be a whole number from 2 to 64");
  EXPECT_HAS(axes_error({"dim=4294967312"}), "axis dim = 4294967312 must be a whole number from 1 to 4096");
  EXPECT_HAS(config_error(R"({"experiments": [{"chunk": 1e300}]})"), "axis chunk = 1e+300 must be a whole number");
  EXPECT_EQ(points_of({"chunk=16.0"})[0].config.chunk, 16);
  EXPECT_EQ(points_of({"dim=4096"})[0].config.dim, 4096);
}

TEST(Spec, AxisGrammarIsStrict) {
  EXPECT_HAS(axes_error({"chunk=[32"}), "axis chunk: \"[32\" has no closing ']'");
  EXPECT_HAS(axes_error({"chunk=[16,"}), "has no closing ']'");
  EXPECT_HAS(axes_error({"chunk=[16,]"}), "axis chunk: \"[16,]\" has an empty item");
  EXPECT_HAS(axes_error({"chunk=[,16]"}), "has an empty item");
  EXPECT_HAS(axes_error({"chunk=[]"}), "axis chunk = [] has no values");
  EXPECT_HAS(axes_error({"family=[]"}), "axis family = [] has no values");
  EXPECT_HAS(axes_error({"family=[ ]"}), "has no values");
  EXPECT_HAS(axes_error({"chunk="}), "axis chunk has no value");
  EXPECT_HAS(axes_error({"chunk=[[16]]"}), "lists do not nest");
  EXPECT_HAS(axes_error({"chunk=[16]]"}), "lists do not nest, and brackets must balance");
  EXPECT_HAS(axes_error({"chunk={\"a\": 1}"}), "is not a value");
  EXPECT_HAS(axes_error({"chunk=[8:16:8:5]"}),
             "axis chunk: range \"[8:16:8:5]\" has 4 fields; a range is [start:stop] or [start:stop:step]");
  EXPECT_HAS(axes_error({"chunk=[8abc:16xyz:8q]"}), "range \"[8abc:16xyz:8q]\": \"8abc\" is not a finite number");
  EXPECT_HAS(axes_error({"chunk=[8:16:8q]"}), "\"8q\" is not a finite number");
  EXPECT_HAS(axes_error({"chunk=[8:]"}), "\"\" is not a finite number");
  EXPECT_HAS(axes_error({"decay_floor=[-inf:-1]"}), "\"-inf\" is not a finite number");
  EXPECT_HAS(axes_error({"chunk=[16:8:1]"}), "range \"[16:8:1]\" is empty");
  EXPECT_HAS(axes_error({"chunk=[8:16:0]"}), "is empty");
  EXPECT_HAS(axes_error({"chunk=\"16"}), "is not a complete JSON string");
  EXPECT_HAS(axes_error({"family=[floor,\"model_like]"}), "is not a complete JSON string");
  EXPECT_HAS(axes_error({"model=\xff\xfe"}), "is not UTF-8 text");
  // What is allowed still reads as before.
  EXPECT_EQ(points_of({"chunk=[8:16:8]"}).size(), 2u);
  EXPECT_EQ(points_of({"chunk=[+8:16]"}).size(), 9u);
  EXPECT_EQ(points_of({"decay_floor=[-8:-1:1]"}).size(), 8u);
  EXPECT_EQ(points_of({"decay_floor=[-1:-0.1:0.1]"}).size(), 10u);
  EXPECT_EQ(points_of({"chunk=[ 8 , 16 ]", "family=[floor,model_like]"}).size(), 4u);
  EXPECT_EQ(points_of({"family=[\"floor\", \"model_like\"]"}).size(), 2u);
  EXPECT_EQ(points_of({"method=[neumann,fwdsub_fp32]"}).size(), 2u);
  EXPECT_EQ(points_of({"family=model_like", "chunk=32"})[0].config.chunk, 32);
}

TEST(Spec, RangesAndGridsAreCountedBeforeTheyAreMade) {
  EXPECT_HAS(axes_error({"chunk=[1:1e9]"}),
             "axis chunk: range \"[1:1e9]\" holds 1000000000 values, more than the 100000 configurations a run may have; "
             "raise the limit with CHUNKINV_MAX_CONFIGURATIONS=N");
  EXPECT_HAS(axes_error({"decay_floor=[-1e308:1e308:1e-300]"}), "holds too many values");
  // 10^5 values crossed with others.
  EXPECT_HAS(axes_error({"decay_floor=[-100000:-1]", "chunk=[8,16,32]", "family=[floor,model_like]"}),
             "the experiment names 600000 configurations");
}

// A value twice in a list would run its configurations twice and make a
// report its own table refuses: -5 and -5.0 are one value, in -a and in a config.
TEST(Spec, AValueTwiceInAListIsRefused) {
  EXPECT_HAS(axes_error({"decay_floor=[-5,-5.0]"}),
             "axis decay_floor: -5.0 appears twice in the list (items 0 and 1); give each value once");
  EXPECT_HAS(axes_error({"chunk=[8,16,8]"}), "axis chunk: 8 appears twice in the list (items 0 and 2)");
  EXPECT_HAS(axes_error({"family=[floor,floor]"}), "\"floor\" appears twice");
  EXPECT_HAS(config_error(R"({"experiments": [{"decay_floor": [-5, -5.0]}]})"), "appears twice in the list");
  EXPECT_HAS(config_error(R"({"experiments": [{"family": ["floor", "model_like", "floor"]}]})"), "appears twice");
  EXPECT_EQ(points_of({"decay_floor=[-5,-4.5,-4]"}).size(), 3u);
}

// A range holds the values from start that do not pass stop; the division's
// rounding is allowed for, a stop short of the next step is not.
TEST(Spec, ARangeNeverPassesItsStop) {
  const auto floors = [](const std::string& axis) {
    std::vector<double> v;
    for (const Point& p : points_of({axis})) v.push_back(p.config.params.at("decay_floor").get<double>());
    return v;
  };
  EXPECT_EQ(floors("decay_floor=[-2:-1.0000000000001:0.5]"), (std::vector<double>{-2, -1.5}));
  EXPECT_EQ(floors("decay_floor=[-2:-1:0.5]"), (std::vector<double>{-2, -1.5, -1}));
  EXPECT_EQ(floors("decay_floor=[-1:-0.1:0.1]").size(), 10u);
  EXPECT_EQ(floors("decay_floor=[-0.7:-0.4:0.1]").size(), 4u);
  EXPECT_EQ(floors("decay_floor=[-1000.3:-1000:0.1]").size(), 4u);
  EXPECT_EQ(points_of({"chunk=[8:16:8]"}).size(), 2u);
}

TEST(Spec, ARunNeedsAConfigurationAndItsAxesMustBeTaken) {
  EXPECT_HAS(usage_error([] { expand(ExperimentSpec{}); }),
             "nothing to run: give a config file, axes (-a name=value) or --inputs");
  EXPECT_HAS(axes_error({"log_decay=-0.1"}),
             "axis log_decay (-a) is taken by no family of this run (floor takes decay_floor, gating); it is an axis of "
             "weak_decay_correlated");
  EXPECT_HAS(axes_error({"family=model_like", "beta=0.5"}), "axis beta (-a) is taken by no family of this run");
  // -a replaces the axis in every grid; some grid's family takes it: fine.
  ExperimentSpec spec = config(R"({"experiments": [{"family": "floor"}, {"family": "weak_decay_correlated"}]})");
  apply_axis(spec, "log_decay=-0.25");
  apply_axis(spec, "decay_floor=-3");
  const auto pts = expand(spec);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].config.params["decay_floor"], -3);
  EXPECT_EQ(pts[1].config.params["log_decay"], -0.25);
  // A config's axis is judged by the config's own grid: replacing the family
  // on the command line drops it, as before.
  ExperimentSpec ml = config(R"({"experiments": [{"family": "model_like", "decay_floor": -2}]})");
  apply_axis(ml, "family=weak_decay_correlated");
  EXPECT_EQ(expand(ml).size(), 1u);
}

// Through the binary: exit 2, one line on stderr naming the culprit, no
// report and no temporary file.
TEST(Spec, HostileInputIsOneLineAndExitTwoThroughTheBinary) {
  const fs::path dir = fs::temp_directory_path() / ("chunkinv_spec_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string deep_cfg = (dir / "deep.json").string();
  std::ofstream(deep_cfg) << R"({"experiments": [{"chunk": )" << deep(200000) << "}]}";
  const std::string samples_cfg = (dir / "samples.json").string();
  std::ofstream(samples_cfg) << R"({"samples": -1, "experiments": [{}]})";
  const std::string ml_cfg = (dir / "ml.json").string();
  std::ofstream(ml_cfg) << R"({"experiments": [{"family": "model_like", "log_decay": -0.5}]})";
  const std::string out = (dir / "r.json").string();
  const struct {
    std::string args, message;
  } cases[] = {
      {"run " + deep_cfg, "nested deeper than 64 levels"},
      {"run " + samples_cfg, "\"samples\" = -1 must be a whole number from 1 to"},
      {"run " + ml_cfg, "axis log_decay is taken by no family of this grid"},
      {"run -a chunk=4294967312", "axis chunk = 4294967312 must be a whole number from 2 to 64"},
      {"run -a dim=4294967312", "axis dim = 4294967312 must be a whole number from 1 to 4096"},
      {"run -a 'chunk=[32'", "has no closing ']'"},
      {"run -a 'chunk=[16,'", "has no closing ']'"},
      {"run -a 'chunk=[8:16:8:5]'", "has 4 fields"},
      {"run -a 'chunk=[8abc:16xyz:8q]'", "is not a finite number"},
      {"run -a 'family=[]'", "axis family = [] has no values"},
      {"run -a 'chunk=[2:64]' -a 'dim=[1:4096]' -a 'decay_floor=[-20:-1]'", "names 5160960 configurations"},
      {"run", "nothing to run"},
  };
  for (const auto& c : cases) {
    const auto r = chunkinv::testing::run_shell(chunkinv::testing::binary() + " " + c.args + " --samples 1 -q -o '" +
                                                out + "' 2>&1 >/dev/null");
    EXPECT_EQ(r.status, 2) << c.args << ": " << r.out;
    EXPECT_HAS(r.out, c.message);
    EXPECT_EQ(r.out.rfind("chunkinv: ", 0), 0u) << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  }
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
  fs::remove_all(dir);
}
