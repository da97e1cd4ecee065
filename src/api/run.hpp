// The library's one way to run an experiment (docs/design.md, "A thin CLI
// and one API"): a request, prepare() that checks every option and plans
// before anything is computed or written, execute() that computes the
// report with its meta, write() that writes it where the request says.
// `chunkinv run` and the Python package's chunkinv.run() are each a few
// lines over these three; they take the same request and give the same
// report.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/limits.hpp"
#include "core/output_file.hpp"
#include "driver/checkpoint.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "driver/until.hpp"
#include "report/merge.hpp"
#include "report/report.hpp"

namespace chunkinv {
class DevicePipeline;
class ProgressBar;
}  // namespace chunkinv

namespace chunkinv::api {

inline constexpr uint64_t kDefaultBatch = 4096;

// Everything `chunkinv run` takes. Numbers and lists are typed; the rules
// and lists that have a syntax of their own (paths, shard, stop rules,
// quantiles, pipeline, devices) are their text, read by prepare(), whose
// messages name the command line's options (--shard 3/2: ...).
struct RunRequest {
  std::vector<std::string> configs;  // experiment config files (docs/configs.md); their grids run one after another
  std::vector<std::string> axes;     // "name=value", "name=[v1,v2]", "name=[start:stop:step]"
  std::string inputs;                // a tensor set: its samples as family `file`
  uint64_t samples = 0;              // per configuration, 1 to kMaxSamples; 0: the config's (all the inputs hold)
  std::optional<uint64_t> seed;      // none: the config's
  uint64_t batch = 0;                // samples per batch; 0: kDefaultBatch, less where memory is short
  int threads = 0;                   // 0: every core
  uint64_t max_memory = 0;           // bytes this run may use; 0: what the limits leave
  double checkpoint_every = 10;      // seconds between saves of a long configuration
  std::string paths;                 // "gold,emulated" (parse_paths); empty: the config's
  std::vector<std::string> metrics;  // canonical names (parse_metric_list); empty: the config's, else every one
  size_t worst = 0;                  // the worst samples of every entry (parse_worst); 0: none
  std::string worst_by;              // their metric, canonical
  std::string shard;                 // "i/n"
  std::string until, until_ci;       // a stop rule (driver/until.hpp), at most one
  std::string quantiles;             // auto (empty), exact or sketch
  bool exact_quantiles = false;      // the same as quantiles "exact"
  std::string pipeline;              // auto (empty), host or device
  std::string devices;               // the GPU pipeline's: all, or indices "0,2"
  bool per_sample = false;
  std::string output;                // the report's file ("-": stdout); empty: none. A file is saved as it goes in FILE.ckpt
  bool resume = false;               // finish the run FILE.ckpt holds
  bool dry_run = false;              // prepare only: plan_text() says what would run
  std::vector<std::string> argv;     // the invocation, for the report's meta and the checkpoint
};

// A request checked and planned: what execute() runs, what plan_text()
// describes. Only prepare() makes one.
struct Prepared {
  RunRequest request;
  ExperimentSpec spec;
  std::vector<PathChoice> paths;
  uint64_t samples = 0;                       // per configuration (a stop rule's cap)
  uint64_t first_sample = 0, run_samples = 0;  // this process's samples of each: all, or the shard's
  std::optional<Shard> shard;
  std::optional<StopRule> until;
  Quantiles quantiles = Quantiles::kExact;
  std::unique_ptr<Runner> runner;
  Plan plan;
  size_t entries = 0;  // report entries of the plan
  MemoryBudget budget;
  nlohmann::json identity, run_identity;  // what a resume must match; what every shard of the run shares
  std::unique_ptr<DevicePipeline> device;  // the GPU pipeline, where some group runs on it
  std::unique_ptr<OutputFile> out;
  std::string checkpoint_path;             // empty: the run is not saved as it goes
  std::unique_ptr<Checkpoint> checkpoint;  // opened by a resume, else made by execute()

  Prepared();
  Prepared(Prepared&&) noexcept;
  ~Prepared();
  bool checkpointed() const { return !checkpoint_path.empty(); }
};

// Checks every option and every combination of them (UsageError, one line
// naming the culprit), reads the configs, plans the configurations and the
// memory, picks the pipeline, checks the destination, and with --resume
// opens the checkpoint. Nothing is computed and nothing is written.
Prepared prepare(RunRequest request);

// What a dry run prints: the configurations, entries, memory and report.
std::string plan_text(const Prepared& p);

// What execute() does besides computing, each optional. `stop` is polled
// after each batch where a checkpoint saves the run (returns a signal
// number to stop at: what is done is saved, then signals::Stopped is thrown).
struct RunHooks {
  ProgressBar* progress = nullptr;
  std::function<int()> stop;
};

// Computes the report of a prepared run: its results and its meta. With an
// output file it saves as it goes (or goes on from the checkpoint).
Report execute(Prepared& p, const RunHooks& hooks = {});

// Writes the report to the request's output, if any, then removes the
// checkpoint (kept when the report could not be written: a resume then
// writes it without computing).
void write(Prepared& p, const Report& report);

// "model_like C=16 d=128 decay_floor=-5"
std::string describe(const Configuration& c);

}  // namespace chunkinv::api
