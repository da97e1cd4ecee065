// A run saved as it goes, so that a killed run loses at most a few seconds
// of work (docs/reliability.md). One file beside the report holds records
// appended in order: the run's identity, each finished group's report
// entries, and, for a group that takes long, blocks of its samples' metric
// values (or, with streaming statistics, their state so far, in a file of
// its own beside it). Each record carries its length and a SHA-256: a record cut
// short by a kill is recognised and dropped. A resume refuses a checkpoint
// whose identity (everything the results depend on: version, entries,
// paths, seed, samples) differs from the run's, naming the difference, and
// one whose records do not fit the run's own configuration (groups, their
// entries' axes, counts of samples and metrics). A run holds an exclusive
// lock (flock) on its checkpoint for its whole life: a second run on the
// same report is refused, never appending to the first one's records.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/sketch.hpp"
#include "report/report.hpp"

namespace chunkinv {

struct Plan;
struct PathChoice;

class Checkpoint {
 public:
  // What the run's own configuration lets its records hold: per group, the
  // axes of its entries in task order and each task's number of metrics;
  // the samples of each group (at most, where a stop rule may end it early).
  struct Layout {
    std::vector<std::vector<nlohmann::json>> axes;
    std::vector<std::vector<size_t>> metrics;
    uint64_t samples = 0;
    bool stops_early = false;
  };
  static Layout layout_of(const Plan& plan, const std::vector<PathChoice>& paths, uint64_t samples, bool stops_early);

  // A new checkpoint at `path` holding `identity` (compared on resume) and
  // `run` (kept as it is: the command line, the start time), locked; UsageError
  // when another run holds it or it holds a run's records already.
  static std::unique_ptr<Checkpoint> create(const std::string& path, const nlohmann::json& identity,
                                            const nlohmann::json& run);
  // The checkpoint at `path`, locked; UsageError when it is missing, not a
  // regular file, held by another run, not a checkpoint, of another run (the
  // first difference named) or holding records that do not fit `layout`.
  static std::unique_ptr<Checkpoint> open(const std::string& path, const nlohmann::json& identity,
                                          const Layout& layout);
  ~Checkpoint();
  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  const std::string& path() const { return path_; }
  std::string state_path() const;
  const nlohmann::json& run() const { return run_; }
  size_t groups_finished() const { return finished_.size(); }
  // The entries of group `g` if it finished, else nullptr.
  const std::vector<ReportEntry>* finished(size_t g) const;
  // Samples [0, n) of unfinished group `g` found in blocks, n returned:
  // per task, values[i * metrics + m] as in BatchResult (moved out).
  uint64_t take_partial(size_t g, std::vector<std::vector<double>>& values);
  // Samples of unfinished group `g` saved (found, and written since).
  uint64_t partial_samples(size_t g) const;
  // Streaming statistics, per task and metric: the state of unfinished
  // group `g` after its first n samples (n returned; 0 when none is saved).
  using States = std::vector<std::vector<SketchState>>;
  uint64_t take_state(size_t g, States& states);

  // Samples [first, first + count) of group `g` (from its first sample):
  // kept, and written at most every `interval_s` seconds and by flush().
  void add_block(size_t g, uint64_t first, uint64_t count, const std::vector<std::vector<double>>& values);
  void flush();
  // Streaming statistics save a state instead of blocks: the statistics of
  // group `g`'s first `done` samples (`state(t, m)`: task t's metric m, for
  // m below metrics[t]), written at once to state_path() (the checkpoint's
  // path + ".state"), replacing the state saved before. due() says when
  // interval_s has passed since the last write.
  void save_state(size_t g, uint64_t done, const std::vector<size_t>& metrics,
                  const std::function<SketchState(size_t, size_t)>& state);
  bool due() const;
  // Group `g` is done: its entries are saved, its blocks dropped.
  void finish_group(size_t g, const std::vector<ReportEntry>& entries);
  // The report is written: the checkpoint goes.
  void remove();

  double interval_s = 10;

 private:
  Checkpoint() = default;
  void append(uint32_t kind, const std::string& payload);
  void append_framed(const std::string& records);
  void compact();

  std::string path_;
  int fd_ = -1;       // open for reading and appending
  int lock_fd_ = -1;  // holding the lock (fd_ itself, until a rewrite locks the new file before it is in place)
  Layout layout_;
  nlohmann::json run_;
  std::map<size_t, std::vector<ReportEntry>> finished_;
  struct Partial {
    uint64_t count = 0;
    std::vector<std::vector<double>> values;
  };
  std::map<size_t, Partial> partial_;  // blocks: from the file (values, for a resume) and written since (count)
  struct State {
    uint64_t done = 0;
    std::string payload;  // as saved, for a resume (empty once written by this process)
  };
  std::map<size_t, State> states_;
  size_t last_state_bytes_ = 0;
  std::string pending_;                // block records not yet written
  size_t pending_group_ = 0;
  uint64_t pending_samples_ = 0;
  bool blocks_on_disk_ = false;
  double last_write_ = 0;
};

}  // namespace chunkinv
