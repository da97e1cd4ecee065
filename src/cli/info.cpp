// chunkinv info: what this build offers and what this machine can run.
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "api/meta.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "arith/decay.hpp"
#include "gpu/gpu.hpp"
#include "methods/method.hpp"
#include "paths/path.hpp"

namespace chunkinv::cli {
namespace {

struct InfoArgs {
  std::string format = "text";
};

nlohmann::json info_json() {
  nlohmann::json devs = nlohmann::json::array();
  for (const auto& d : gpu::devices())
    devs.push_back({{"index", d.index},
                    {"name", d.name},
                    {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
                    {"multiprocessors", d.multiprocessors},
                    {"memory_bytes", d.memory_bytes}});
  return {{"tool", "chunkinv"},
          {"version", CHUNKINV_VERSION},
          {"git_commit", api::build_identity()["git_commit"]},
          {"compiler", CHUNKINV_COMPILER},
          {"cuda_built", gpu::built()},
          {"paths", path_names()},
          {"methods", method_names()},
          {"paths_usable", path_names_usable()},
          {"gpu_unavailable_reason", gpu::unavailable_reason()},
          {"cuda_runtime", gpu::runtime_version()},
          {"cuda_driver", gpu::driver_version()},
          {"devices", devs},
          {"decay_exceptions", decay_exception_count()}};
}

void info(const InfoArgs& a) {
  if (a.format != "text" && a.format != "json")
    throw UsageError("info: --format must be text or json, not \"" + a.format + "\"");
  const nlohmann::json j = info_json();
  if (a.format == "json") {
    fmt::print("{}\n", j.dump(1));
    return;
  }
  fmt::print("{}, {}\n", api::version_line(), CHUNKINV_COMPILER);
  fmt::print("paths:        {}\n", fmt::join(path_names(), ", "));
  fmt::print("paths usable: {}\n", fmt::join(path_names_usable(), ", "));
  fmt::print("methods:      {}\n", fmt::join(method_names(), ", "));
  if (!gpu::built()) {
    fmt::print("CUDA: not built ({})\n", gpu::unavailable_reason());
  } else {
    const std::string driver = gpu::driver_version();
    fmt::print("CUDA runtime {}, driver {}\n", gpu::runtime_version(), driver.empty() ? "none" : driver);
    if (!gpu::unavailable_reason().empty()) fmt::print("GPU paths unavailable: {}\n", gpu::unavailable_reason());
  }
  for (const auto& d : gpu::devices())
    fmt::print("GPU {}: {}, compute capability {}.{}, {} multiprocessors, {:.1f} GiB\n", d.index, d.name, d.cc_major,
               d.cc_minor, d.multiprocessors, double(d.memory_bytes) / (1024.0 * 1024.0 * 1024.0));
  fmt::print("decay exception table: {} entries\n", decay_exception_count());
}

}  // namespace

void set_info_command(CLI::App& app) {
  auto args = std::make_shared<InfoArgs>();
  auto* cmd = app.add_subcommand("info", "Version, paths and methods, which paths run here, CUDA runtime/driver and GPUs");
  cmd->add_option("--format", args->format, "text or json");
  cmd->callback([args] { info(*args); });
}

}  // namespace chunkinv::cli
