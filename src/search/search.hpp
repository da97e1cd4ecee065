// The search of `chunkinv search` (docs/search.md): several lanes of
// sep-CMA-ES with IPOP restarts, run side by side, each generation of every
// lane measured in one batch on the chosen path. A lane's run depends only
// on (seed, lane) and on the values of its own candidates, and a value only
// on the candidate: the result is the same for every thread count, batch
// and machine.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "inputs/sample.hpp"
#include "methods/method.hpp"
#include "paths/path.hpp"
#include "search/cmaes.hpp"
#include "search/objective.hpp"
#include "search/space.hpp"

namespace chunkinv {

struct SearchOptions {
  SearchSpace space;
  uint64_t budget = 100000;  // evaluations in all, over every lane
  int lanes = 4;             // restart sequences run side by side; the budget is split evenly
  uint64_t seed = 0;
  double sigma0 = 1.0;
  int lambda0 = 0;           // first population of each lane; 0: 4 + floor(3 ln n)
  bool stop_at_nonfinite = true;  // stop once a candidate's objective is +inf (nothing is worse)
};

// One restart of one lane.
struct RestartRecord {
  int lane = 0, restart = 0, lambda = 0;
  uint64_t generations = 0, evaluations = 0;  // this restart's
  double best = 0;                            // best value it reached
  std::string stop;                           // cmaes_stop_name, "budget" or "nonfinite"
};

// Best-so-far as a step function: a point wherever it rose, and the last.
struct Trace {
  std::vector<uint64_t> evaluations;  // evaluations done when the value was reached (1-based count)
  std::vector<uint64_t> iteration;    // the round (one generation of every lane) it was reached in
  std::vector<double> best;
};

struct Witness {
  Sample sample;
  double value = 0;
  int lane = 0, restart = 0;
  uint64_t generation = 0, evaluation = 0;  // the lane's generation in its restart; the run's evaluation count
  std::vector<double> metrics;              // every metric of the method (metric_set() order)
};

struct SearchResult {
  std::vector<Witness> witnesses;  // the best candidate of each lane, best first
  uint64_t evaluations = 0, rounds = 0;
  uint64_t nonfinite_at = 0;       // evaluation count at the first +inf value (0: none)
  Trace trace;                     // over the whole run
  std::vector<Trace> lane_traces;  // per lane (evaluations counted per lane)
  std::vector<RestartRecord> restarts;
};

// Refuses a budget that cannot pay for one generation of every lane
// (UsageError naming --budget and the least that can).
void check_budget(const SearchOptions& o);

// `progress`, when given, is called after every round with (evaluations, best).
SearchResult run_search(const SearchOptions& options, Evaluator& evaluator,
                        const std::function<void(uint64_t, double)>& progress = {});

// The initial mean of restart `restart` of lane `lane`: every coordinate
// N(0, 1) from Philox but the shared direction's weights (0), i.e. a sample
// distributed as model_like's (normal keys normalised, gate and beta logits
// N(0, 1)).
std::vector<double> initial_point(const SearchSpace& space, uint64_t seed, int lane, int restart);

}  // namespace chunkinv
