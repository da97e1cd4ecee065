#include "cli/meta.hpp"

#include <algorithm>
#include <ctime>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "paths/emulated/decay.hpp"
#include "paths/gpu.hpp"
#include "paths/path.hpp"

namespace chunkinv::cli {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json make_meta(const std::vector<std::string>& paths, int threads, const std::string& started) {
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  nlohmann::json arith = nlohmann::json::object();
  for (const auto& p : paths) arith[p] = (p == "gold") ? gold_arithmetic() : make_path(p)->arithmetic();
  nlohmann::json m = {
      {"tool", "chunkinv"},
      {"version", CHUNKINV_VERSION},
      {"git_commit", CHUNKINV_GIT_COMMIT_STR},
      {"argv", invocation().argv},
      {"compiler", CHUNKINV_COMPILER},
      {"host", host},
      {"threads", threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))},
      {"started", started},
      {"finished", utc_now()},
      {"paths", arith},
  };
  if (std::find(paths.begin(), paths.end(), "emulated") != paths.end()) {
    const int n = decay_exception_count();
    m["fidelity"]["emulated"] =
        n > 0 ? fmt::format("decays: correctly rounded FP32 exp2 (FTZ) with a table of {} exceptions measured "
                            "on the H200; tensor-core model: nominal-exponent alignment, 25 bits, measured "
                            "bit-exact on the H200 (2026-11-29: 2,560,000 BF16->FP32 and 2,560,000 FP16->FP16 "
                            "mma elements; the kernel path identical on every sample compared); "
                            "docs/paths-compared.md",
                            n)
              : "decays: correctly rounded FP32 exp2 (FTZ) WITHOUT the table of measured ex2.approx "
                "exceptions: bf16 decays may differ from the kernel's for a few inputs; "
                "docs/paths-compared.md";
  }
  const bool gpu_used = std::find(paths.begin(), paths.end(), "kernel") != paths.end() ||
                        std::find(paths.begin(), paths.end(), "cublas") != paths.end();
  if (gpu_used) {
    nlohmann::json devs = nlohmann::json::array();
    for (const auto& d : gpu::devices())
      devs.push_back({{"index", d.index}, {"name", d.name}, {"cc", fmt::format("{}.{}", d.cc_major, d.cc_minor)}});
    m["devices"] = devs;
    m["cuda_runtime"] = gpu::runtime_version();
    m["cuda_driver"] = gpu::driver_version();
  }
  return m;
}

}  // namespace chunkinv::cli
