// A downstream experiment (docs/downstream.md): for every configuration,
// sequences from a source, their chunks' inverses from every path x
// method, three chunked forwards per path x method (total, inverse only,
// storage) scored against the FP64 recurrence, aggregated into report
// entries that `table`, `check` and `merge` read as any other.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "downstream/scores.hpp"
#include "downstream/sources.hpp"
#include "downstream/tensors.hpp"
#include "driver/checkpoint.hpp"
#include "driver/runner.hpp"
#include "methods/method.hpp"
#include "paths/path.hpp"
#include "report/merge.hpp"
#include "report/report.hpp"

namespace chunkinv {

// One configuration and the methods its entries run; its sequences drawn
// from the family, or those of a tensor set (`inputs`, family "inputs").
struct SeqGroup {
  SeqConfig config;
  std::vector<Method> methods;
  std::shared_ptr<const SequenceSet> inputs;
};

// The grid of `axes` (axis -> value or list of values, as -a and a config
// give them): every combination, completed and validated, one group per
// configuration, the methods innermost. UsageError naming the culprit: an
// axis no family of the grid takes, seq_len not a whole number of chunks, a
// storage preset the gating cannot have, ...
std::vector<SeqGroup> expand_sequences(const nlohmann::json& axes);
// Checks one configuration (after complete()).
void validate_sequence_config(const SeqConfig& c);
// The groups of a tensor set's sequences: the axes chunk, storage, window
// and method only (the rest is the file's); UsageError for a sequence that
// is not a whole number of chunks, or another axis.
std::vector<SeqGroup> expand_inputs(std::shared_ptr<const SequenceSet> set, const nlohmann::json& axes);

struct SeqRunOptions {
  uint64_t samples = 4;
  uint64_t seed = 0;
  int threads = 0;
  bool per_sample = false;
  // This process's part of each configuration's sequences (seq --shard i/n):
  // sequences [first, first + n) of shard_span(shard, the configuration's
  // count); the entries then carry their statistics' state for merge.
  std::optional<Shard> shard;
  // Saved as it goes (seq -o FILE: FILE.ckpt), and resumed from: a group
  // finished there is taken as it is, a group's saved sequences are not
  // run again. `stop` (a signal) ends the run after a sequence, saved.
  Checkpoint* checkpoint = nullptr;
  std::function<int()> stop;
  // The FP64 recurrence every variant is scored against and the chunked
  // forwards on the GPU (gpu/recurrence.hpp, gpu/chunked_forward.hpp): the
  // CPU's bits, so the same report. The backward runs on the host.
  bool device = false;
};

struct SeqRunResult {
  std::vector<ReportEntry> entries;
  std::vector<std::string> skipped;  // each distinct reason once
};

// A kernel's own outputs of sequence s (o: T x V; ht: K x V, or null)
// scored as a variant against the FP64 recurrence: its o_rel_rmse, windows,
// first non-finite position and ht_rel_rmse (no boundary states: a kernel
// returns none).
VariantScore score_candidate(const Sequence& s, int window, const Mat& o, const Mat* ht, bool device_reference = false);

// A kernel's outputs on every sequence of each group's inputs, scored: one
// entry per group, path "candidate", method `method` (the arithmetic the
// kernel implements, for the axes only).
std::vector<ReportEntry> score_candidates(const std::vector<SeqGroup>& groups, const CandidateOutputs& outputs,
                                          const std::string& method, bool device_reference = false);
// UsageError in one line where the GPU recurrence cannot be every group's
// reference (a K or V it does not run, no GPU).
void require_device_reference(const std::vector<SeqGroup>& groups);

// The plan of a seq run: per configuration that some path runs, one group
// whose sample is a whole sequence, its tasks (path x method pairs the path
// runs; each other pair's reason once in `skipped`), its entries' metrics
// (downstream, windows, backward), its range of sequences (this shard's part
// of the inputs' or of options.samples) and the seed its entries carry.
Plan plan_sequences(const std::vector<SeqGroup>& groups, const std::vector<PathChoice>& paths,
                    const SeqRunOptions& options);

// The host back-end of a sample that is a whole sequence (docs/design.md):
// per sequence of a group's range, its chunks' inverses from every path x
// method (Path::run_batch, as a chunk run's), the chunked forwards and the
// backward against the FP64 recurrence, their values handed to the sink one
// sequence a batch. `device`: the recurrence and the forwards on the GPU
// (the same bits as the host's).
class SequenceBackend final : public Backend {
 public:
  SequenceBackend(const std::vector<PathChoice>& paths, int threads, bool device);
  ~SequenceBackend() override;
  bool takes(const Group& g, const StatsOptions&, std::string*) const override { return g.sequence != nullptr; }
  void run(const Group& group, uint64_t seed, SampleRange range, Sink& sink) override;

 private:
  std::vector<std::unique_ptr<Path>> instances_;
  ThreadPool pool_;
  bool device_;
};

SeqRunResult run_sequences(const std::vector<SeqGroup>& groups, const std::vector<PathChoice>& paths,
                           const SeqRunOptions& options);

// What a checkpoint of run_sequences holds, per group that runs (a group no
// path runs is left out, as in the report): its entries' axes and metric
// counts, and the sequences of each (this shard's).
Checkpoint::Layout sequence_layout(const std::vector<SeqGroup>& groups, const std::vector<PathChoice>& paths,
                                   const SeqRunOptions& options);
// The sequences a configuration has: the inputs', or options.samples.
uint64_t group_samples(const SeqGroup& g, const SeqRunOptions& options);

}  // namespace chunkinv
