// An experiment: axes (from a config file and/or the command line) expanded
// into configurations, each run through the gold and the chosen paths.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inputs/family.hpp"
#include "report/report.hpp"

namespace chunkinv {

struct ExperimentSpec {
  std::string name;                  // config name (file stem) or "cli"
  std::vector<nlohmann::json> grids; // each an object axis -> value or list of values
  uint64_t samples = 1000;
  uint64_t seed = 0;
  std::vector<std::string> paths{"gold", "emulated"};
};

// Reads a config file (docs/configs.md). Throws UsageError naming the file
// and the culprit (unknown keys get the nearest valid one suggested).
ExperimentSpec load_config(const std::string& file);
// "name=value" or "name=[v1,v2,...]" or "name=[start:stop:step]" (nvbench
// style); overrides that axis in every grid (or starts a grid if none).
void apply_axis(ExperimentSpec& spec, const std::string& assignment);
// The configurations of the spec: per grid the Cartesian product, each
// validated and completed by its family; parameters a family does not take
// are dropped; duplicates removed; order of first appearance.
std::vector<Configuration> expand(const ExperimentSpec& spec);
// Paths named in a list such as "gold,emulated" or "all".
std::vector<std::string> parse_paths(const std::string& list);

struct RunOptions {
  int threads = 0;              // 0: all hardware threads
  bool per_sample = false;      // keep every sample's metric values in the report
  bool progress = false;        // a progress line on stderr
  uint64_t batch = 4096;        // samples per batch (bounds memory; never changes results)
  uint64_t first_sample = 0;    // shard: samples [first_sample, first_sample + samples)
};

// Runs every configuration through the gold and `paths`; results in the
// order (configuration, path).
std::vector<ReportEntry> run_experiment(const std::vector<Configuration>& configs,
                                        const std::vector<std::string>& paths, uint64_t samples,
                                        uint64_t seed, const RunOptions& opt);

}  // namespace chunkinv
