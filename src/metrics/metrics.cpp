#include "metrics/metrics.hpp"

#include <algorithm>
#include <deque>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "core/error.hpp"
#include "metrics/fp64_order.hpp"
#include "metrics/metric_ids.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

struct Generic {
  metric_id::Generic id;
  MetricInfo info;
  double (*fn)(const GoldOutput& gold, const PathOutput& p);
};

// rel_rmse((I + gold L) * inv, I), the product's entries as
// fp64::residual_entry forms them (fused multiply-adds, k ascending): every
// k where L is not finite or inv is not zero above its diagonal, else only
// k = j .. i, the same bits (fp64_order.hpp) in a sixth of the work.
double residual(const Mat& gold_l, const Mat& inv) {
  if (!all_finite(inv)) return INFINITY;
  const int c = int(gold_l.rows());
  bool lower = all_finite(gold_l);
  for (int i = 0; i < c && lower; ++i)
    for (int j = i; j < c; ++j) lower &= (j == i || inv(i, j) == 0.0) && gold_l(i, j) == 0.0;
  auto l = [&](int i, int k) { return gold_l(i, k); };
  auto b = [&](int k, int j) { return inv(k, j); };
  Mat r(c, c);
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < c; ++j)
      r(i, j) = !lower ? fp64::residual_entry(i, j, 0, c, l, b) : j <= i ? fp64::residual_entry(i, j, j, i + 1, l, b) : 0.0;
  return chunk_rel_rmse(r, Mat::Identity(c, c));
}

using prec::max_abs;  // +inf once an entry is not finite

double count_if(const std::vector<double>& v, bool (*pred)(double)) {
  double n = 0;
  for (double x : v) n += pred(x);
  return n;
}

constexpr Generic kGeneric[] = {
    {metric_id::kDecayZeros, {"decay_zeros", MetricKind::kCount, "count of decays == 0 (per row, or per element for per-channel gates)"},
     [](const GoldOutput&, const PathOutput& p) { return count_if(p.l.decay, [](double v) { return v == 0.0; }); }},
    {metric_id::kInvDecayNonfinite, {"inv_decay_nonfinite", MetricKind::kCount, "count of non-finite inverse decays"},
     [](const GoldOutput&, const PathOutput& p) {
       return count_if(p.l.inv_decay, [](double v) { return !std::isfinite(v); });
     }},
    {metric_id::kLFinite, {"l_finite", MetricKind::kFlag, "1 if every entry of the path's L is finite"},
     [](const GoldOutput&, const PathOutput& p) { return all_finite(p.l.L) ? 1.0 : 0.0; }},
    {metric_id::kInvFinite, {"inv_finite", MetricKind::kFlag, "1 if every entry of the path's INV is finite"},
     [](const GoldOutput&, const PathOutput& p) { return all_finite(p.on_path_l.inv) ? 1.0 : 0.0; }},
    {metric_id::kLRelRmse, {"l_rel_rmse", MetricKind::kError, "path L vs gold L"},
     [](const GoldOutput& g, const PathOutput& p) { return chunk_rel_rmse(p.l.L, g.L); }},
    {metric_id::kInvTotalRelRmse, {"inv_total_rel_rmse", MetricKind::kError, "path INV vs gold inverse"},
     [](const GoldOutput& g, const PathOutput& p) { return chunk_rel_rmse(p.on_path_l.inv, g.inv); }},
    {metric_id::kInvMethodOnlyRelRmse, {"inv_method_only_rel_rmse", MetricKind::kError, "path INV vs the exact FP64 inverse of I + path L"},
     [](const GoldOutput&, const PathOutput& p) {
       return all_finite(p.l.L) ? chunk_rel_rmse(p.on_path_l.inv, unit_lower_inverse(p.l.L)) : INFINITY;
     }},
    {metric_id::kInvGoldLRelRmse, {"inv_gold_l_rel_rmse", MetricKind::kError, "the method on the gold L vs gold inverse"},
     [](const GoldOutput& g, const PathOutput& p) { return chunk_rel_rmse(p.on_gold_l.inv, g.inv); }},
    {metric_id::kInverseResidual, {"inverse_residual", MetricKind::kError, "rel_rmse((I + gold L) * path INV, I) in FP64"},
     [](const GoldOutput& g, const PathOutput& p) { return residual(g.L, p.on_path_l.inv); }},
};

struct ReferenceMetric {
  metric_id::Reference id;
  MetricInfo info;
};
constexpr ReferenceMetric kReference[] = {
    {metric_id::kRefLFinite, {"l_finite", MetricKind::kFlag, "1 if every entry of the gold L is finite"}},
    {metric_id::kRefInvFinite, {"inv_finite", MetricKind::kFlag, "1 if every entry of the gold inverse is finite"}},
    {metric_id::kRefInverseResidual,
     {"inverse_residual", MetricKind::kError, "rel_rmse((I + gold L) * gold INV, I) in FP64"}},
    {metric_id::kRefInvMaxAbs, {"inv_max_abs", MetricKind::kValue, "max |entry| of the gold inverse"}},
};

// Each metric at the position its id names (the device programs write by id).
template <class T, size_t N>
constexpr bool in_id_order(const T (&table)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (static_cast<size_t>(table[i].id) != i) return false;
  return true;
}
static_assert(in_id_order(kGeneric) && std::size(kGeneric) == metric_id::kGenericCount);
static_assert(in_id_order(kReference) && std::size(kReference) == metric_id::kReferenceCount);

// A seq entry's metrics (docs/downstream.md, "Metrics"), each with the way it
// improves, so that check and table grade them as they grade the chunk's
// (whose direction follows from their kind: a flag higher, the rest lower).
struct SequenceMetric {
  MetricInfo info;
  Better better;
};
const SequenceMetric kSequence[] = {
    {{"o_rel_rmse", MetricKind::kError,
      "o of the chunked forward with the path's inverse and the preset's storage vs the FP64 recurrence's"},
     Better::kLower},
    {{"o_rel_rmse_inverse_only", MetricKind::kError, "o with the path's inverse, everything else FP64, vs the recurrence's"},
     Better::kLower},
    {{"o_rel_rmse_storage", MetricKind::kError, "o with the exact inverse and the preset's storage vs the recurrence's"},
     Better::kLower},
    {{"ht_rel_rmse", MetricKind::kError, "the final state (path's inverse, preset's storage) vs the recurrence's"},
     Better::kLower},
    {{"ht_rel_rmse_inverse_only", MetricKind::kError, "the final state with the path's inverse, everything else FP64"},
     Better::kLower},
    {{"ht_rel_rmse_storage", MetricKind::kError, "the final state with the exact inverse and the preset's storage"},
     Better::kLower},
    {{"state_rel_rmse_max", MetricKind::kError,
      "max over chunk boundaries of the carried state's rel_rmse (path's inverse, preset's storage)"},
     Better::kLower},
    {{"state_growth_per_chunk", MetricKind::kValue,
      "exp of the least-squares slope of ln(state error) against the chunk index, over the boundaries where the "
      "error is finite and > 0: the state error's growth factor per chunk (1: none; 1 when fewer than 2 such)"},
     Better::kLower},
    {{"o_finite", MetricKind::kFlag, "1 if every entry of o (path's inverse, preset's storage) is finite"}, Better::kHigher},
    // Later is better: seq_len when o is finite throughout.
    {{"o_first_nonfinite", MetricKind::kValue, "the first position whose o has a non-finite entry; seq_len when none"},
     Better::kHigher},
    // Lower is better: less of o's error is the inverse's.
    {{"o_inverse_share", MetricKind::kValue,
      "o_rel_rmse_inverse_only / o_rel_rmse: how much of o's error the inverse alone makes (errors need not add, "
      "so it can exceed 1); where o_rel_rmse is not finite, 1 if the inverse-only o is not finite either, else 0; "
      "0 where o_rel_rmse is 0"},
     Better::kLower},
};

const std::vector<MetricInfo>& sequence_infos() {
  static const std::vector<MetricInfo> v = [] {
    std::vector<MetricInfo> out;
    for (const SequenceMetric& m : kSequence) out.push_back(m.info);
    return out;
  }();
  return v;
}

// The backward's (seq -a backward=...): grad_first_nonfinite is better higher,
// as o_first_nonfinite; the rest by kind.
const std::vector<std::string>& gradient_list() {
  static const std::vector<std::string> g{"dq", "dk", "dv", "dg", "dbeta"};
  return g;
}

const std::vector<MetricInfo>& gradient_infos() {
  static const std::vector<MetricInfo> v = [] {
    std::vector<MetricInfo> m;
    // MetricInfo keeps C strings: the names live as long as the program (a deque never moves them).
    static std::deque<std::string> text;
    const auto keep = [&](std::string s) { return text.emplace_back(std::move(s)).c_str(); };
    for (const std::string& g : gradient_list()) {
      m.push_back({keep(fmt::format("{}_rel_rmse", g)), MetricKind::kError,
                   keep(fmt::format("{} of the chunked backward (path's inverse, preset's storage) vs the FP64 "
                                    "recurrence's gradient", g))});
      m.push_back({keep(fmt::format("{}_rel_rmse_inverse_only", g)), MetricKind::kError,
                   keep(fmt::format("{} with the path's inverse, everything else FP64", g))});
      m.push_back({keep(fmt::format("{}_rel_rmse_storage", g)), MetricKind::kError,
                   keep(fmt::format("{} with the exact inverse and the preset's storage", g))});
      m.push_back({keep(fmt::format("{}_inverse_share", g)), MetricKind::kValue,
                   keep(fmt::format("{0}_rel_rmse_inverse_only / {0}_rel_rmse (as o_inverse_share)", g))});
    }
    m.push_back({"dh0_rel_rmse", MetricKind::kError, "the initial state's gradient (path's inverse, preset's storage)"});
    m.push_back({"dh0_rel_rmse_inverse_only", MetricKind::kError, "the initial state's gradient, inverse only"});
    m.push_back({"grad_finite", MetricKind::kFlag, "1 if every gradient (path's inverse, preset's storage) is finite"});
    m.push_back({"grad_first_nonfinite", MetricKind::kValue,
                 "the first position with a non-finite dq, dk, dv, dg or dbeta entry; seq_len when none"});
    return m;
  }();
  return v;
}

const MetricInfo kGradientWindow{"<g>_rel_rmse_from_", MetricKind::kError,
                                 "a gradient's error (path's inverse, preset's storage) over the window of positions "
                                 "from <p>"};

// "<digits>" without leading zeros.
bool is_position(const std::string& p) {
  return !p.empty() && p.size() <= 9 && p.find_first_not_of("0123456789") == std::string::npos &&
         (p == "0" || p[0] != '0');
}

constexpr const char* kWindowPrefix = "o_rel_rmse_from_";
const MetricInfo kWindow{kWindowPrefix, MetricKind::kError,
                         "o's error (path's inverse, preset's storage) over the window of positions from <p>"};

// "o_rel_rmse_from_<p>", p a whole number written without leading zeros.
bool is_window_metric(const std::string& name) {
  return name.starts_with(kWindowPrefix) && is_position(name.substr(std::string_view(kWindowPrefix).size()));
}

// "<g>_rel_rmse_from_<p>", g a gradient's name.
bool is_gradient_window_metric(const std::string& name) {
  for (const std::string& g : gradient_list()) {
    const std::string prefix = g + "_rel_rmse_from_";
    if (name.starts_with(prefix) && is_position(name.substr(prefix.size()))) return true;
  }
  return false;
}

// Twin names live as long as the program: MetricInfo holds const char*.
const char* twin_name(const char* name) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<std::string>> names;
  std::lock_guard<std::mutex> lock(mu);
  auto& s = names[name];
  if (!s) s = std::make_unique<std::string>(std::string("gold_l_") + name);
  return s->c_str();
}

const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> a{
      {"inv_neumann_only_rel_rmse", "inv_method_only_rel_rmse"},
      {"inv_stable_l_rel_rmse", "inv_gold_l_rel_rmse"},
      {"stable_l_highest_power", "gold_l_highest_power"},
      {"stable_l_power_max", "gold_l_power_max"},
  };
  return a;
}

}  // namespace

size_t MetricSet::index(std::string_view name) const {
  for (size_t i = 0; i < infos.size(); ++i)
    if (name == infos[i].name) return i;
  return npos;
}

const MetricSet& method_metrics(const MethodSpec& method) {
  static std::mutex mu;
  static std::map<const MethodSpec*, std::unique_ptr<MetricSet>> sets;
  std::lock_guard<std::mutex> lock(mu);
  auto& s = sets[&method];
  if (!s) {
    s = std::make_unique<MetricSet>();
    for (const Generic& g : kGeneric) s->infos.push_back(g.info);
    for (const MetricInfo& d : method.diagnostics) s->infos.push_back(d);
    for (const MetricInfo& d : method.diagnostics) s->infos.push_back({twin_name(d.name), d.kind, d.help});
  }
  return *s;
}

const MetricSet& reference_metrics() {
  static const MetricSet s = [] {
    MetricSet r;
    for (const ReferenceMetric& m : kReference) r.infos.push_back(m.info);
    return r;
  }();
  return s;
}

std::vector<std::string> all_metric_names() {
  std::vector<std::string> v;
  auto add = [&](const MetricSet& s) {
    for (const MetricInfo& m : s.infos)
      if (std::find(v.begin(), v.end(), m.name) == v.end()) v.emplace_back(m.name);
  };
  for (const MethodSpec* m : methods()) add(method_metrics(*m));
  add(reference_metrics());
  return v;
}

std::string canonical_metric_name(const std::string& name) {
  const auto it = aliases().find(name);
  return it == aliases().end() ? name : it->second;
}

const MetricInfo* find_chunk_metric(const std::string& raw) {
  const std::string name = canonical_metric_name(raw);
  for (const MethodSpec* m : methods()) {
    const MetricSet& s = method_metrics(*m);
    if (const size_t i = s.index(name); i != MetricSet::npos) return &s.infos[i];
  }
  const MetricSet& r = reference_metrics();
  if (const size_t i = r.index(name); i != MetricSet::npos) return &r.infos[i];
  return nullptr;
}

const MetricInfo* find_metric(const std::string& raw) {
  if (const MetricInfo* m = find_chunk_metric(raw)) return m;
  for (const MetricInfo& m : sequence_infos())
    if (raw == m.name) return &m;
  for (const MetricInfo& m : gradient_infos())
    if (raw == m.name) return &m;
  if (is_gradient_window_metric(raw)) return &kGradientWindow;
  return is_window_metric(raw) ? &kWindow : nullptr;
}

const std::vector<std::string>& gradient_names() { return gradient_list(); }
std::span<const MetricInfo> gradient_metrics() { return gradient_infos(); }
const MetricInfo& gradient_window_metric_info() { return kGradientWindow; }

Better better_direction(const MetricInfo& m) {
  for (const SequenceMetric& d : kSequence)
    if (std::string_view(m.name) == d.info.name) return d.better;
  if (std::string_view(m.name) == "grad_first_nonfinite") return Better::kHigher;  // later is better
  return m.kind == MetricKind::kFlag ? Better::kHigher : Better::kLower;  // the windows: errors
}

std::span<const MetricInfo> sequence_metrics() { return sequence_infos(); }
std::string window_metric_name(int first) { return fmt::format("{}{}", kWindowPrefix, first); }
const MetricInfo& window_metric_info() { return kWindow; }

std::vector<std::string> parse_metric_list(const std::string& list, const std::string& where) {
  std::vector<std::string> names;
  size_t at = 0;
  while (at <= list.size() && !list.empty()) {
    const size_t end = std::min(list.find(',', at), list.size());
    const std::string raw = list.substr(at, end - at);
    if (raw.empty()) throw UsageError(fmt::format("{} {}: an empty metric name", where, list));
    if (!find_chunk_metric(raw))
      throw UsageError(fmt::format("{} {}: unknown metric \"{}\" (run --list-metrics lists them)", where, list, raw));
    const std::string name = canonical_metric_name(raw);
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    at = end + 1;
  }
  return names;
}

const MetricSet& select_metrics(const MetricSet& base, const std::vector<std::string>& names, std::vector<size_t>* pick) {
  static std::mutex mu;
  static std::map<std::pair<const MetricSet*, std::vector<std::string>>, std::unique_ptr<MetricSet>> sets;
  pick->clear();
  for (size_t i = 0; i < base.size(); ++i)
    if (std::find(names.begin(), names.end(), base.infos[i].name) != names.end()) pick->push_back(i);
  std::lock_guard<std::mutex> lock(mu);
  auto& s = sets[{&base, names}];
  if (!s) {
    s = std::make_unique<MetricSet>();
    for (size_t i : *pick) s->infos.push_back(base.infos[i]);
  }
  return *s;
}

bool all_finite(const Mat& m) {
  for (Eigen::Index i = 0; i < m.size(); ++i)
    if (!std::isfinite(m.data()[i])) return false;
  return true;
}

double rel_rmse(const Mat& a, const Mat& e) {
  if (!all_finite(a)) return INFINITY;
  double err = 0.0, ref = 0.0;
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    const double d = a.data()[i] - e.data()[i];
    err += d * d;
    ref += e.data()[i] * e.data()[i];
  }
  const double n = static_cast<double>(a.size());
  return std::sqrt(err / n) / (std::sqrt(ref / n) + 1e-30);
}

double chunk_rel_rmse(const Mat& a, const Mat& e) {
  if (!all_finite(a)) return INFINITY;
  const int c = int(a.rows());
  fp64::ChunkSums r;  // in classes (fp64_order.hpp), the entries in data order
  for (int i = 0; i < c; ++i)
    for (int j = 0; j < c; ++j) r.add(c, i, j, a(i, j), e(i, j));
  return r.value(c);
}

void evaluate(const MethodSpec& method, const GoldOutput& gold, const PathOutput& p, double* out) {
  size_t k = 0;
  for (const Generic& g : kGeneric) out[g.id] = g.fn(gold, p);
  k = metric_id::kGenericCount;
  const size_t nd = method.diagnostics.size();
  for (size_t d = 0; d < nd; ++d) out[k++] = d < p.on_path_l.diagnostics.size() ? p.on_path_l.diagnostics[d] : NAN;
  for (size_t d = 0; d < nd; ++d) out[k++] = d < p.on_gold_l.diagnostics.size() ? p.on_gold_l.diagnostics[d] : NAN;
}

void evaluate_reference(const GoldOutput& gold, double* out) {
  out[metric_id::kRefLFinite] = all_finite(gold.L) ? 1.0 : 0.0;
  out[metric_id::kRefInvFinite] = all_finite(gold.inv) ? 1.0 : 0.0;
  out[metric_id::kRefInverseResidual] = residual(gold.L, gold.inv);
  out[metric_id::kRefInvMaxAbs] = max_abs(gold.inv);
}

}  // namespace chunkinv
