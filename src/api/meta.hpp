// The report's meta block, written here for every command that writes a
// report (run, seq, score, search; merge stamps its own line): what the
// build, the machine and the invocation were, and whatever the command adds.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "driver/runner.hpp"
#include "paths/path.hpp"

namespace chunkinv::api {

std::string utc_now();  // ISO 8601, seconds, "Z"
// "chunkinv 0.1.0 (3f2a9c01d2e4)": what --version and info print.
std::string version_line();
// {"version", "git_commit"}: the build, as a checkpoint's identity holds it.
nlohmann::json build_identity();

// What varies from one report's meta to another's. Every field left at its
// default (empty, null, none) stays out of the meta.
struct MetaFields {
  std::vector<PathChoice> paths;  // their arithmetic, options and fidelity; devices when a GPU path ran
  int threads = 0;                // 0: every hardware thread
  std::vector<std::string> argv;  // the command line (a resumed run's first one)
  std::string started;            // utc_now() when the run began
  std::string resumed;            // when a resumed run took over
  std::string experiment;
  std::optional<uint64_t> seed, samples;
  std::vector<std::string> skipped;  // why a path skipped a method, each once
  std::vector<std::string> metrics;  // the metrics chosen (none: every one)
  std::optional<Quantiles> quantiles;
  nlohmann::json shard, pipeline, until, inputs, candidate, downstream;
  std::optional<double> wall_s;
};

// tool, version, git commit, argv, compiler, host, threads, paths and
// methods in words, the paths' fidelity, devices (when a GPU path ran),
// started and finished (now), then the fields given.
nlohmann::json make_meta(const MetaFields& f);
// A merged report's own line: meta.merged.argv and .at (now).
void stamp_merge(nlohmann::json& meta, const std::vector<std::string>& argv);

}  // namespace chunkinv::api
