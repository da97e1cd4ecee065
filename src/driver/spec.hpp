// An experiment's specification: axes (from config files and/or the
// command line) expanded into configurations, each with its inverse method.
#pragma once
#include <cstdint>
#include <string>
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
};

// One point of the axis grid: the inputs' configuration and the method.
struct Point {
  Configuration config;
  Method method;
};

// Reads a config file (docs/configs.md). Throws UsageError naming the file
// and the culprit (unknown keys get the nearest valid one suggested).
ExperimentSpec load_config(const std::string& file);
// "name=value" or "name=[v1,v2,...]" or "name=[start:stop:step]" (nvbench
// style); overrides that axis in every grid (or starts a grid if none).
void apply_axis(ExperimentSpec& spec, const std::string& assignment);
// The points of the spec: per grid the Cartesian product (family outermost,
// method innermost), each configuration validated and completed by its
// family; parameters a family does not take are dropped; duplicates
// removed; order of first appearance.
std::vector<Point> expand(const ExperimentSpec& spec);

}  // namespace chunkinv
