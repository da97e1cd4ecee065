// Which groups the GPU pipeline takes, and --devices. The pipeline itself is
// device_pipeline.cu (a build without CUDA has none: its constructor says so).
#include "driver/device_pipeline.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/error.hpp"
#include "gpu/gpu.hpp"
#include "inputs/device_families.hpp"

namespace chunkinv {

bool device_pipeline_supports(const Group& g, const std::vector<PathChoice>& paths, std::string* why) {
  const auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (!gpu::built()) return no("built without CUDA");
  if (const std::string r = gpu::unavailable_reason(); !r.empty()) return no("no usable GPU (" + r + ")");
  if (!device_generates(g.config, why)) return false;
  size_t kernel_path = SIZE_MAX;
  for (const Task& t : g.tasks) {
    if (t.reference) continue;
    const PathChoice& p = paths.at(t.path);
    if (p.spec->name == std::string_view("kernel")) {
      if (kernel_path != SIZE_MAX && kernel_path != t.path)
        return no("two kernel paths in one run: the GPU pipeline launches one");
      kernel_path = t.path;
    }
    const std::string_view name = p.spec->name;
    if (name != "gold" && name != "kernel")
      return no(fmt::format("path {} does not run on the GPU pipeline (gold and kernel do)", p.label()));
    if (name == "gold" && !p.options.empty()) return no(fmt::format("path {} takes no options", p.label()));
    if (t.method.label() != "neumann")
      return no(fmt::format("method {} does not run on the GPU pipeline (neumann at its defaults does)",
                            t.method.label()));
  }
  // The gold path's Neumann inverse is the kernel's run on the gold L.
  if (g.config.dim % 16 != 0)
    return no(fmt::format("dim {} is not a multiple of 16, as the kernel's launch needs", g.config.dim));
  return true;
}

std::vector<int> parse_devices(const std::string& text) {
  const std::vector<gpu::DeviceInfo> all = gpu::devices();
  if (!gpu::built()) throw UsageError("--devices " + text + ": built without CUDA");
  if (const std::string r = gpu::unavailable_reason(); !r.empty())
    throw UsageError("--devices " + text + ": no usable GPU (" + r + ")");
  std::vector<int> out;
  if (text == "all") {
    for (const gpu::DeviceInfo& d : all) out.push_back(d.index);
    return out;
  }
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    int v = -1;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v < 0)
      throw UsageError(fmt::format("--devices {}: \"{}\" is not a device index (give all, or indices such as 0,2)", text,
                                   item));
    if (v >= int(all.size()))
      throw UsageError(fmt::format("--devices {}: device {} does not exist ({} device{}: 0 to {})", text, v, all.size(),
                                   all.size() == 1 ? "" : "s", all.size() - 1));
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw UsageError(fmt::format("--devices {}: device {} is named twice", text, v));
    out.push_back(v);
    at = end + 1;
  }
  return out;
}

#ifndef CHUNKINV_HAVE_CUDA
struct DevicePipeline::Worker {};
DevicePipeline::DevicePipeline(std::vector<PathChoice>, std::vector<int>) {
  throw UsageError("the GPU pipeline: built without CUDA");
}
DevicePipeline::~DevicePipeline() = default;
std::vector<std::vector<SketchState>> DevicePipeline::run(const Group&, uint64_t, SampleRange) { return {}; }
#endif

}  // namespace chunkinv
