// Arithmetic paths (SPEC §2): how L is formed from a sample. A path runs
// the inverse methods it supports on the L it formed and on the gold L.
//
// The registry (paths/registry.cpp) has one line per path. Nothing outside
// the registries compares a path's name as a string: code asks a PathSpec.
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inputs/family.hpp"
#include "inputs/sample.hpp"
#include "methods/method.hpp"
#include "model/outputs.hpp"

namespace chunkinv {

class ThreadPool;

// Where one run_batch's time went. CPU paths fill host_ms only; GPU paths
// time the device with events (upload, launches, download) apart from the
// host's packing and unpacking.
struct BatchTiming {
  double host_ms = 0, upload_ms = 0, compute_ms = 0, download_ms = 0;
  BatchTiming& operator+=(const BatchTiming& o) {
    host_ms += o.host_ms, upload_ms += o.upload_ms, compute_ms += o.compute_ms, download_ms += o.download_ms;
    return *this;
  }
};

// A batch of samples of one configuration (one chunk and dim) with their gold.
struct Batch {
  std::span<const Sample> samples;
  std::span<const GoldOutput> gold;
  uint64_t first = 0;  // sample index of samples[0] (the candidate path reads its matrices by index)
};

class Path {
 public:
  virtual ~Path() = default;
  // out[m * n + i] receives methods[m] on sample i (n = in.samples.size()).
  // Every method is one the path's spec supports for this configuration.
  virtual BatchTiming run_batch(const Batch& in, std::span<const Method* const> methods, std::span<PathOutput> out,
                                ThreadPool& pool, bool keep_intermediates) = 0;
};

// Options of a path, from "name:key=value:key=value" (e.g. kernel:version=1).
using PathOptions = std::map<std::string, std::string>;

enum class Device { kCpu, kGpu };

// A path's form on the GPU pipeline (driver/device_pipeline), where it has
// one: the gold's FP64 L and inverse computed on the device, or the kernel
// path's launch on the device's own samples.
enum class PipelineForm { kNone, kGold, kKernel };

struct PathSpec {
  std::string_view name;
  Device device;
  // The gold: its L is the reference, and with method `exact` its entry is
  // the reference entry (the gold's own metrics).
  bool reference = false;
  std::string (*arithmetic)();            // in words, for the report's meta
  std::string (*fidelity)();              // how it relates to what it models, measured; null: nothing to say
  std::string (*unavailable)();           // why it cannot run on this machine; "" when it can
  // Whether the path can run `method` on `config`; else why not (a skip, never an error).
  bool (*supports)(const Configuration& config, const Method& method, std::string* why);
  void (*check_options)(const PathOptions& options);          // UsageError naming an unknown or bad option
  std::unique_ptr<Path> (*make)(const PathOptions& options);  // options already checked
  // Equal bit for bit to the CPU model (cpu_model_path()) on every output: checked, never assumed.
  bool equals_cpu_model = false;
  PipelineForm pipeline_form = PipelineForm::kNone;
};

// A path as named on the command line: its spec and options.
struct PathChoice {
  const PathSpec* spec = nullptr;
  PathOptions options;
  std::string label() const;  // "kernel" or "kernel:version=1"
};

std::span<const PathSpec* const> paths();             // every path this build has, in registry order
std::vector<std::string> path_names();                // the same, by name
std::vector<std::string> path_names_usable();         // built and runnable on this machine
const PathSpec& find_path(std::string_view name);     // UsageError with a suggestion
const PathSpec* find_path_or_null(std::string_view name);
const PathSpec& reference_path();                     // gold
const PathSpec& cpu_model_path();                     // emulated: what the GPU paths are validated against
// "gold,emulated", "all", "kernel:version=1,gold": UsageError for an
// unknown name or option, or a path this machine cannot run.
std::vector<PathChoice> parse_paths(const std::string& list);
// An instance; UsageError when this machine cannot run it.
std::unique_ptr<Path> make_path(const PathChoice& choice);

// A CPU path: forms L per sample and runs the methods' CPU references.
class CpuPath : public Path {
 public:
  BatchTiming run_batch(const Batch& in, std::span<const Method* const> methods, std::span<PathOutput> out,
                        ThreadPool& pool, bool keep_intermediates) override;

 protected:
  // L as the path forms it for methods that take `storage` (paths that form
  // one L whatever the method ignore it).
  virtual LForm form_l(const Sample& s, const GoldOutput& gold, LStorage storage) const = 0;
  // The path's L is the gold L: the run on it is the run on the gold L.
  virtual bool forms_gold_l() const { return false; }
};

// supports() of a path that runs every method's CPU reference.
bool supports_every_method(const Configuration&, const Method&, std::string*);
// check_options() of a path that takes none.
void takes_no_options(const PathOptions& options);

}  // namespace chunkinv
