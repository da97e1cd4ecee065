#include "search/objective.hpp"

#include <cmath>
#include <limits>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "paths/gold/gold.hpp"

namespace chunkinv {
namespace {

constexpr const char* kOverflowMargin = "overflow_margin";

// A method's diagnostic that is the largest magnitude it held, with the
// largest finite value of the format it held it in.
struct Magnitude {
  const char* metric;
  double format_max;
  const char* format;
};
constexpr Magnitude kMagnitudes[] = {
    {"power_max", 65504.0, "FP16"},
    {"inv_max", 3.4028234663852886e38, "FP32"},
};

const Magnitude* magnitude_of(const MethodSpec& method) {
  for (const Magnitude& m : kMagnitudes)
    for (const MetricInfo& d : method.diagnostics)
      if (std::string_view(d.name) == m.metric) return &m;
  return nullptr;
}

}  // namespace

std::vector<std::string> objective_names(const MethodSpec& method) {
  std::vector<std::string> names;
  for (const MetricInfo& m : method_metrics(method).infos) names.push_back(m.name);
  if (magnitude_of(method)) names.push_back(kOverflowMargin);
  return names;
}

Objective parse_objective(const std::string& name, const MethodSpec& method) {
  const MetricSet& set = method_metrics(method);
  Objective o;
  o.name = name;
  if (name == kOverflowMargin) {
    const Magnitude* m = magnitude_of(method);
    if (!m)
      throw UsageError(fmt::format("--objective {}: method {} has no magnitude diagnostic; choose one of {}", name,
                                   method.name, fmt::join(objective_names(method), ", ")));
    o.metric = set.index(m->metric);
    o.scale = m->format_max;
    o.finite_flag = set.index("inv_finite");
    o.help = fmt::format("{} / {} (the largest finite {}); +inf when the inverse is not finite", m->metric,
                         m->format_max, m->format);
    return o;
  }
  const std::string canonical = canonical_metric_name(name);
  o.metric = set.index(canonical);
  if (o.metric == MetricSet::npos) {
    const std::string near = nearest_of(name, objective_names(method));
    throw UsageError(fmt::format("--objective {}: not a metric of method {}{}; choose one of {}", name, method.name,
                                 near.empty() ? "" : fmt::format(" (did you mean {}?)", near),
                                 fmt::join(objective_names(method), ", ")));
  }
  o.name = canonical;
  o.help = set.infos[o.metric].help;
  return o;
}

double objective_value(const Objective& o, const double* v) {
  if (o.finite_flag != MetricSet::npos && v[o.finite_flag] == 0) return std::numeric_limits<double>::infinity();
  const double x = v[o.metric] / o.scale;
  return std::isnan(x) ? std::numeric_limits<double>::infinity() : x;
}

Evaluator::Evaluator(const Configuration& config, const PathChoice& path, const Method& method,
                     const Objective& objective, int threads)
    : path_(path), method_(method), objective_(objective), set_(&method_metrics(*method.spec)),
      instance_(make_path(path)), pool_(threads) {
  std::string why;
  if (!path.spec->supports(config, method, &why)) throw UsageError(fmt::format("search: {}", why));
}

void Evaluator::evaluate(std::span<const Sample> samples, std::vector<double>& values, std::vector<double>* metrics) {
  const size_t n = samples.size();
  gold_.resize(n);
  outs_.resize(n);
  pool_.parallel_for(n, [&](size_t i) { gold_[i] = compute_gold(samples[i]); });
  Batch batch;
  batch.samples = samples;
  batch.gold = std::span<const GoldOutput>(gold_.data(), n);
  const Method* methods[] = {&method_};
  instance_->run_batch(batch, methods, std::span<PathOutput>(outs_.data(), n), pool_, false);
  const size_t nm = set_->size();
  std::vector<double> local;
  std::vector<double>& v = metrics ? *metrics : local;
  v.resize(n * nm);
  values.resize(n);
  pool_.parallel_for(n, [&](size_t i) {
    chunkinv::evaluate(*method_.spec, gold_[i], outs_[i], v.data() + i * nm);
    values[i] = objective_value(objective_, v.data() + i * nm);
  });
}

}  // namespace chunkinv
