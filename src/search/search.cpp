#include "search/search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace chunkinv {
namespace {

constexpr uint64_t kRestartsPerLane = 1 << 16;  // stream = lane * this + restart

// Lane state: its current CMA-ES run and what it has found.
struct Lane {
  int index = 0, restart = 0, lambda0 = 0;
  uint64_t budget = 0, used = 0;
  std::unique_ptr<SepCmaes> es;
  RestartRecord record;
  bool done = false;
  Witness best;
  bool has_best = false;
  Trace trace;
};

void push(Trace& t, uint64_t evals, uint64_t iteration, double best) {
  t.evaluations.push_back(evals);
  t.iteration.push_back(iteration);
  t.best.push_back(best);
}

}  // namespace

std::vector<double> initial_point(const SearchSpace& space, uint64_t seed, int lane, int restart) {
  const Rng rng(seed, static_cast<uint64_t>(lane) * kRestartsPerLane + static_cast<uint64_t>(restart),
                static_cast<Stream>(static_cast<uint32_t>(Stream::kUser) + 2));
  std::vector<double> x(space.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = rng.normal(i);
  if (space.shared_direction)  // weights 0: the mean itself is a model_like sample
    for (int r = 0; r < space.chunk; ++r) x[space.weight_offset() + static_cast<size_t>(r)] = 0.0;
  return x;
}

int first_population(const SearchOptions& o) {
  return o.lambda0 > 0 ? o.lambda0 : SepCmaes(std::vector<double>(o.space.size(), 0.0), {}).lambda();
}

void check_budget(const SearchOptions& o) {
  if (o.lanes < 1) throw UsageError("--restarts must be at least 1");
  // The smallest lane's share must pay for its first generation, or the
  // search would end with no evaluation and no witness.
  const uint64_t need = uint64_t(o.lanes) * uint64_t(first_population(o));
  if (o.budget < need)
    throw UsageError(fmt::format("--budget {}: too small for one generation of each of the {} restarts (population {} "
                                 "each); give --budget {} or more, or fewer --restarts",
                                 o.budget, o.lanes, first_population(o), need));
}

SearchResult run_search(const SearchOptions& o, Evaluator& evaluator,
                        const std::function<void(uint64_t, double)>& progress) {
  o.space.validate();
  check_budget(o);
  const double inf = std::numeric_limits<double>::infinity();
  const size_t n = o.space.size();

  std::vector<Lane> lanes(static_cast<size_t>(o.lanes));
  auto start = [&](Lane& l) {  // a new restart: IPOP doubles the population
    CmaesOptions co;
    co.sigma0 = o.sigma0;
    co.seed = o.seed;
    co.stream = static_cast<uint64_t>(l.index) * kRestartsPerLane + static_cast<uint64_t>(l.restart);
    co.lambda = l.lambda0 << l.restart;
    l.es = std::make_unique<SepCmaes>(initial_point(o.space, o.seed, l.index, l.restart), co);
    l.record = {l.index, l.restart, l.es->lambda(), 0, 0, -inf, ""};
  };
  for (size_t k = 0; k < lanes.size(); ++k) {
    Lane& l = lanes[k];
    l.index = static_cast<int>(k);
    l.budget = o.budget / lanes.size() + (k < o.budget % lanes.size() ? 1 : 0);
    l.lambda0 = first_population(o);
    start(l);
  }

  SearchResult res;
  res.lane_traces.resize(lanes.size());
  double global = -inf;
  std::vector<Sample> samples;
  std::vector<double> values, metrics;
  std::vector<std::pair<size_t, size_t>> slots;  // per lane in this round: first sample, count
  bool stop_all = false;
  while (!stop_all) {
    samples.clear();
    slots.assign(lanes.size(), {0, 0});
    for (size_t k = 0; k < lanes.size(); ++k) {
      Lane& l = lanes[k];
      if (l.done) continue;
      if (l.budget - l.used < static_cast<uint64_t>(l.es->lambda())) {  // not a whole generation left
        l.record.stop = "budget";
        res.restarts.push_back(l.record);
        l.done = true;
        continue;
      }
      const std::vector<double>& pop = l.es->ask();
      slots[k] = {samples.size(), static_cast<size_t>(l.es->lambda())};
      for (int c = 0; c < l.es->lambda(); ++c)
        samples.push_back(o.space.decode(std::span<const double>(pop.data() + static_cast<size_t>(c) * n, n)));
    }
    if (samples.empty()) break;
    // Decoding is cheap next to a path's run; measuring is the batch.
    evaluator.evaluate(samples, values, &metrics);
    ++res.rounds;
    const size_t nm = evaluator.metric_count();
    for (size_t k = 0; k < lanes.size(); ++k) {
      Lane& l = lanes[k];
      const auto [first, count] = slots[k];
      if (count == 0) continue;
      const std::span<const double> v(values.data() + first, count);
      for (size_t c = 0; c < count; ++c) {
        ++l.used;
        ++res.evaluations;
        const double x = v[c];
        if (x == inf && res.nonfinite_at == 0) res.nonfinite_at = res.evaluations;
        if (x > l.record.best) l.record.best = x;
        if (!l.has_best || x > l.best.value) {
          l.has_best = true;
          l.best.sample = samples[first + c];
          l.best.value = x;
          l.best.lane = l.index;
          l.best.restart = l.restart;
          l.best.generation = l.es->generation();
          l.best.evaluation = res.evaluations;
          l.best.metrics.assign(metrics.begin() + static_cast<long>((first + c) * nm),
                                metrics.begin() + static_cast<long>((first + c + 1) * nm));
          push(res.lane_traces[k], l.used, res.rounds, x);
        }
        if (x > global) {
          global = x;
          push(res.trace, res.evaluations, res.rounds, x);
        }
      }
      l.record.evaluations += count;
      l.es->tell(v);
      l.record.generations = l.es->generation();
      if (l.es->stopped() != CmaesStop::kNone) {
        l.record.stop = cmaes_stop_name(l.es->stopped());
        res.restarts.push_back(l.record);
        ++l.restart;
        start(l);
      }
    }
    if (progress) progress(res.evaluations, global);
    if (o.stop_at_nonfinite && global == inf) stop_all = true;
  }
  for (Lane& l : lanes) {
    if (!l.done) {
      l.record.stop = global == inf && o.stop_at_nonfinite ? "nonfinite" : "budget";
      res.restarts.push_back(l.record);
    }
    if (l.has_best) res.witnesses.push_back(l.best);
    Trace& t = res.lane_traces[static_cast<size_t>(l.index)];
    if (!t.best.empty() && t.evaluations.back() != l.used) push(t, l.used, res.rounds, t.best.back());
  }
  if (!res.trace.best.empty() && res.trace.evaluations.back() != res.evaluations)
    push(res.trace, res.evaluations, res.rounds, res.trace.best.back());
  std::stable_sort(res.witnesses.begin(), res.witnesses.end(),
                   [](const Witness& a, const Witness& b) { return a.value > b.value; });
  return res;
}

}  // namespace chunkinv
