// Which groups the GPU pipeline takes, and --devices. The pipeline itself is
// device_pipeline.cu (a build without CUDA has none: its constructor says so).
#include "driver/device_pipeline.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "core/error.hpp"
#include "gpu/gpu.hpp"
#include "inputs/device_families.hpp"
#include "methods/method.hpp"
#include "paths/path.hpp"

namespace chunkinv {

namespace {

// The paths and the methods that declare a form on the GPU pipeline, for its reasons: "gold and kernel".
std::string in_words(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}
std::string pipeline_paths() {
  std::vector<std::string> names;
  for (const PathSpec* p : chunkinv::paths())
    if (p->pipeline_form != PipelineForm::kNone) names.emplace_back(p->name);
  return in_words(names);
}
std::string pipeline_methods() {
  std::vector<std::string> names;
  for (const MethodSpec* m : methods())
    if (m->on_device_pipeline) names.emplace_back(m->name);
  return in_words(names);
}

}  // namespace

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
    switch (p.spec->pipeline_form) {
      case PipelineForm::kNone:
        return no(fmt::format("path {} does not run on the GPU pipeline ({} do)", p.label(), pipeline_paths()));
      case PipelineForm::kGold:
        if (!p.options.empty()) return no(fmt::format("path {} takes no options", p.label()));
        break;
      case PipelineForm::kKernel:
        if (kernel_path != SIZE_MAX && kernel_path != t.path)
          return no("two kernel paths in one run: the GPU pipeline launches one");
        kernel_path = t.path;
        break;
    }
    // A method runs there at its defaults: its label is then its name.
    if (!t.method.spec->on_device_pipeline || t.method.label() != t.method.spec->name)
      return no(fmt::format("method {} does not run on the GPU pipeline ({} at its defaults does)", t.method.label(),
                            pipeline_methods()));
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

bool DevicePipeline::takes(const Group& g, const StatsOptions& o, std::string* why) const {
  if (o.quantiles != Quantiles::kSketch || o.per_sample) {
    *why = "exact quantiles keep every value, which the GPU pipeline does not bring back (--quantiles sketch does)";
    return false;
  }
  if (o.until) {
    *why = "a stop rule is checked sample by sample on the host";
    return false;
  }
  if (o.worst) {
    *why = "the worst samples (--worst) are picked sample by sample on the host";
    return false;
  }
  return device_pipeline_supports(g, paths_, why);
}

void DevicePipeline::run(const Group& g, uint64_t seed, SampleRange range, Sink& sink) {
  sink.begin(g, range.count);
  for (uint64_t r = 0; r < range.count;) {
    const uint64_t k = std::min(kRound, range.count - r);
    sink.absorb(g, fold(g, seed, {range.first + r, k}), k);
    r += k;
  }
  sink.end(g);
}

void DevicePipeline::time_stages(bool on) {
  time_stages_ = on;
  stage_times_.clear();
}

#ifndef CHUNKINV_HAVE_CUDA
struct DevicePipeline::Worker {};
DevicePipeline::DevicePipeline(std::vector<PathChoice>, std::vector<int>) {
  throw UsageError("the GPU pipeline: built without CUDA");
}
DevicePipeline::~DevicePipeline() = default;
std::vector<std::vector<SketchState>> DevicePipeline::fold(const Group&, uint64_t, SampleRange) { return {}; }
PipelineWorkShape DevicePipeline::work_shape(const Group&) const { return {}; }
#endif

}  // namespace chunkinv
