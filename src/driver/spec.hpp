// An experiment's specification: axes (from config files and/or the
// command line) expanded into configurations, each with its inverse method.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "inputs/family.hpp"
#include "methods/method.hpp"

namespace chunkinv {

struct ExperimentSpec {
  std::string name;                  // config name (file stem) or "cli"
  std::vector<nlohmann::json> grids; // each an object axis -> value or list of values
  uint64_t samples = 1000;
  uint64_t seed = 0;
  std::string paths = "gold,emulated";  // as parse_paths takes them
  std::vector<std::string> metrics;     // parse_metric_list's; empty: every metric
  // Axes set with -a (apply_axis): expand() requires each to be taken by
  // some family of some grid; a config's axes are checked per grid on load.
  std::set<std::string> cli_axes;
};

// One point of the axis grid: the inputs' configuration and the method.
struct Point {
  Configuration config;
  Method method;
};

// Reads a config file (docs/configs.md). Throws UsageError naming the file
// and the culprit (unknown keys get the nearest valid one suggested).
// At most 64 MiB ($CHUNKINV_MAX_CONFIG_BYTES raises it), JSON nested at most
// 64 deep, no duplicate key, nothing after the object; seed and samples
// whole numbers; every axis of a grid taken by some family of that grid.
ExperimentSpec load_config(const std::string& file);
// The same from the file's text (`file` names it in messages).
ExperimentSpec parse_config(std::string_view text, const std::string& file);
// "name=value" or "name=[v1,v2,...]" or "name=[start:stop:step]" (nvbench
// style); overrides that axis in every grid (or starts a grid if none).
// Unbalanced brackets, empty items, a range of other than 2 or 3 numbers,
// or one longer than the configuration limit are UsageErrors.
void apply_axis(ExperimentSpec& spec, const std::string& assignment);
// The value of an assignment (the text after '=') as apply_axis reads it:
// a value, a list or a range; for commands with axes of their own (seq).
nlohmann::json parse_axis_value(const std::string& name, const std::string& text);
// The points of the spec: per grid the Cartesian product (family outermost,
// method innermost), each configuration validated and completed by its
// family; parameters a family does not take are dropped; duplicates
// removed; order of first appearance. UsageError when there is nothing to
// run, or more configurations than $CHUNKINV_MAX_CONFIGURATIONS (default
// 100000; counted before anything is expanded).
std::vector<Point> expand(const ExperimentSpec& spec);

}  // namespace chunkinv
