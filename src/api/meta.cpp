#include "api/meta.hpp"

#include <algorithm>
#include <ctime>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

#include "git_commit.hpp"  // generated at every build: CHUNKINV_GIT_COMMIT_STR
#include "gpu/gpu.hpp"
#include "methods/method.hpp"
#include "metrics/sketch.hpp"
#include "paths/path.hpp"

namespace chunkinv::api {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string version_line() {
  const std::string commit = CHUNKINV_GIT_COMMIT_STR;
  return fmt::format("chunkinv {} ({})", CHUNKINV_VERSION, commit.empty() ? "commit unknown" : commit);
}

nlohmann::json build_identity() { return {{"version", CHUNKINV_VERSION}, {"git_commit", CHUNKINV_GIT_COMMIT_STR}}; }

nlohmann::json make_meta(const MetaFields& f) {
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  nlohmann::json arith = nlohmann::json::object(), fidelity = nlohmann::json::object(),
                 options = nlohmann::json::object(), methods_json = nlohmann::json::object();
  bool gpu_used = false;
  for (const PathChoice& p : f.paths) {
    const std::string name(p.spec->name);
    arith[name] = p.spec->arithmetic();
    if (p.spec->fidelity) fidelity[name] = p.spec->fidelity();
    if (!p.options.empty()) options[name] = p.options;
    gpu_used = gpu_used || p.spec->device == Device::kGpu;
  }
  for (const MethodSpec* m : methods()) methods_json[std::string(m->name)] = std::string(m->arithmetic);
  nlohmann::json m = {
      {"tool", "chunkinv"},
      {"version", CHUNKINV_VERSION},
      {"git_commit", CHUNKINV_GIT_COMMIT_STR},
      {"argv", f.argv},
      {"compiler", CHUNKINV_COMPILER},
      {"host", host},
      {"threads", f.threads > 0 ? f.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))},
      {"started", f.started},
      {"finished", utc_now()},
      {"paths", arith},
      {"methods", methods_json},
  };
  if (!options.empty()) m["path_options"] = options;
  if (!fidelity.empty()) m["fidelity"] = fidelity;
  if (gpu_used) {
    nlohmann::json devs = nlohmann::json::array();
    for (const auto& d : gpu::devices())
      devs.push_back({{"index", d.index}, {"name", d.name}, {"cc", fmt::format("{}.{}", d.cc_major, d.cc_minor)}});
    m["devices"] = devs;
    m["cuda_runtime"] = gpu::runtime_version();
    m["cuda_driver"] = gpu::driver_version();
  }
  // What the command adds.
  if (!f.resumed.empty()) m["resumed"] = f.resumed;
  if (!f.experiment.empty()) m["experiment"] = f.experiment;
  if (f.seed) m["seed"] = *f.seed;
  if (f.samples) m["samples"] = *f.samples;
  if (!f.skipped.empty()) m["skipped"] = f.skipped;
  if (!f.metrics.empty()) m["metrics"] = f.metrics;
  if (f.quantiles)
    m["quantiles"] = *f.quantiles == Quantiles::kExact
                         ? nlohmann::json{{"mode", "exact"}}
                         : nlohmann::json{{"mode", "sketch"}, {"relative_error", kSketchRelativeError}};
  for (const auto& [key, value] : {std::pair<const char*, const nlohmann::json*>{"shard", &f.shard},
                                   {"pipeline", &f.pipeline},
                                   {"until", &f.until},
                                   {"inputs", &f.inputs},
                                   {"candidate", &f.candidate},
                                   {"downstream", &f.downstream}})
    if (!value->is_null()) m[key] = *value;
  if (f.wall_s) m["wall_s"] = *f.wall_s;
  return m;
}

void stamp_merge(nlohmann::json& meta, const std::vector<std::string>& argv) {
  meta["merged"]["argv"] = argv;
  meta["merged"]["at"] = utc_now();
}

}  // namespace chunkinv::api
