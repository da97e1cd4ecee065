#include "report/compare.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/json_read.hpp"
#include "metrics/metrics.hpp"
#include "report/table.hpp"

namespace chunkinv {

using nlohmann::json;

// ---------------------------------------------------------------- rules

CheckRules default_check_rules() {
  CheckRules r;
  auto add = [&r](const char* metric, const char* stat, CheckKind kind, double tol = 0.10) {
    r.rules.push_back({metric, stat, kind, tol, 0.0});
  };
  // Finiteness must not get worse: the shares of finite samples...
  add("l_finite", "mean", CheckKind::kShare);
  add("inv_finite", "mean", CheckKind::kShare);
  // ...the worst sample's non-finite decay counts...
  add("decay_zeros", "max", CheckKind::kCount);
  add("inv_decay_nonfinite", "max", CheckKind::kCount);
  // ...and the share of samples whose error is finite.
  // seq's: o (and the backward's gradients) finite, and where they stop being finite.
  add("o_finite", "mean", CheckKind::kShare);
  add("o_first_nonfinite", "min", CheckKind::kCount);
  add("grad_finite", "mean", CheckKind::kShare);
  add("grad_first_nonfinite", "min", CheckKind::kCount);
  for (const char* m : {"*_rel_rmse", "inverse_residual", "*_rel_rmse_*"}) {
    add(m, "finite_count", CheckKind::kShare);
    // Errors must not grow beyond a relative tolerance: the median tightly,
    // the tail (a few samples decide p99) loosely.
    add(m, "median", CheckKind::kTolerance, 0.10);
    add(m, "p99", CheckKind::kTolerance, 0.50);
  }
  return r;
}

namespace {

const std::vector<std::string>& statistic_names() {
  static const std::vector<std::string> n = [] {
    auto v = stat_names();
    v.push_back("wilson_low");
    v.push_back("wilson_high");
    return v;
  }();
  return n;
}

std::vector<std::string> metric_names() { return all_metric_names(); }

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  const std::string near = nearest_of(word, candidates);
  return near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near);
}

void reject_unknown_keys(const json& j, const std::vector<std::string>& known, const std::string& where) {
  for (const auto& [k, v] : j.items()) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      throw UsageError(fmt::format("{}: unknown key \"{}\"{}", where, k, did_you_mean(k, known)));
    }
  }
}

// '*' matches any run of characters.
bool glob_match(const std::string& pattern, const std::string& s) {
  size_t p = 0, i = 0, star = std::string::npos, mark = 0;
  while (i < s.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = i;
    } else if (p < pattern.size() && pattern[p] == s[i]) {
      ++p;
      ++i;
    } else if (star != std::string::npos) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

CheckKind parse_kind(const std::string& s, const std::string& where) {
  static const std::vector<std::string> names{"tolerance", "share", "count", "exact", "ignore"};
  if (s == "tolerance") return CheckKind::kTolerance;
  if (s == "share") return CheckKind::kShare;
  if (s == "count") return CheckKind::kCount;
  if (s == "exact") return CheckKind::kExact;
  if (s == "ignore") return CheckKind::kIgnore;
  throw UsageError(fmt::format("{}: unknown check \"{}\"{}; checks: tolerance, share, count, exact, ignore", where, s,
                               did_you_mean(s, names)));
}

// A value as the rules file has it, for a message ("\"yes\"", "[1]"); long ones cut.
std::string shown(const json& v) {
  const std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

double number_field(const json& j, const char* key, const std::string& where) {
  const json& v = j.at(key);
  if (!v.is_number()) throw UsageError(fmt::format("{}: \"{}\" must be a number, not {}", where, key, shown(v)));
  return v.get<double>();
}

bool bool_field(const json& j, const char* key, const std::string& where) {
  const json& v = j.at(key);
  if (!v.is_boolean()) throw UsageError(fmt::format("{}: \"{}\" must be true or false, not {}", where, key, shown(v)));
  return v.get<bool>();
}

std::string string_field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) throw UsageError(fmt::format("{}: \"{}\" is missing", where, key));
  if (!j.at(key).is_string())
    throw UsageError(fmt::format("{}: \"{}\" must be a string, not {}", where, key, shown(j.at(key))));
  return j.at(key).get<std::string>();
}

}  // namespace

CheckRules check_rules_from_json(const json& j) {
  if (!j.is_object()) throw UsageError("rules must be a JSON object");
  reject_unknown_keys(j, {"mode", "defaults", "confidence", "missing_in_new", "rules", "description"}, "rules");
  if (j.contains("description") && !j.at("description").is_string())
    throw UsageError(fmt::format("rules: \"description\" must be a string, not {}", shown(j.at("description"))));
  CheckRules r;
  const bool defaults = j.contains("defaults") ? bool_field(j, "defaults", "rules") : true;
  if (defaults) r = default_check_rules();
  if (j.contains("mode")) {
    const std::string mode = string_field(j, "mode", "rules");
    if (mode == "bit-exact") {
      r.bit_exact = true;
    } else if (mode != "tolerance") {
      throw UsageError(fmt::format("rules: unknown mode \"{}\"{}; modes: tolerance, bit-exact", mode,
                                   did_you_mean(mode, {"tolerance", "bit-exact"})));
    }
  }
  if (j.contains("confidence")) {
    r.confidence = number_field(j, "confidence", "rules");
    if (!(r.confidence > 0.5 && r.confidence < 1.0)) throw UsageError("rules: \"confidence\" must lie in (0.5, 1)");
  }
  if (j.contains("missing_in_new")) {
    const std::string m = string_field(j, "missing_in_new", "rules");
    if (m != "worse" && m != "ignore") {
      throw UsageError(fmt::format("rules: \"missing_in_new\" must be \"worse\" or \"ignore\", not \"{}\"", m));
    }
    r.missing_in_new_is_worse = m == "worse";
  }
  if (j.contains("rules")) {
    if (!j.at("rules").is_array()) throw UsageError("rules: \"rules\" must be an array");
    const auto metrics = metric_names();
    size_t i = 0;
    for (const auto& rj : j.at("rules")) {
      const std::string where = fmt::format("rules[{}]", i++);
      if (!rj.is_object()) throw UsageError(where + ": must be an object");
      reject_unknown_keys(rj, {"metric", "statistic", "check", "tolerance", "absolute"}, where);
      CheckRule rule;
      rule.metric = canonical_metric_name(string_field(rj, "metric", where));
      rule.statistic = rj.contains("statistic") ? string_field(rj, "statistic", where) : "*";
      if (rule.metric.find('*') == std::string::npos && !find_metric(rule.metric)) {
        throw UsageError(fmt::format("{}: unknown metric \"{}\"{}", where, rule.metric, did_you_mean(rule.metric, metrics)));
      }
      const auto& stats = statistic_names();
      if (rule.statistic != "*" && std::find(stats.begin(), stats.end(), rule.statistic) == stats.end()) {
        throw UsageError(fmt::format("{}: unknown statistic \"{}\"{}", where, rule.statistic,
                                     did_you_mean(rule.statistic, stats)));
      }
      rule.kind = rj.contains("check") ? parse_kind(string_field(rj, "check", where), where) : CheckKind::kTolerance;
      if (rj.contains("tolerance")) rule.tolerance = number_field(rj, "tolerance", where);
      if (rj.contains("absolute")) rule.absolute = number_field(rj, "absolute", where);
      if (rule.tolerance < 0 || rule.absolute < 0) throw UsageError(where + ": tolerances must be >= 0");
      if (rule.kind == CheckKind::kShare && rule.statistic != "mean" && rule.statistic != "finite_count") {
        throw UsageError(where + ": a share check applies to \"mean\" (of a 0/1 metric) or \"finite_count\"");
      }
      r.rules.push_back(rule);
    }
  }
  return r;
}

CheckRules read_check_rules(const std::string& path) {
  const json j = read_json_file(path, config_source("rules " + path));
  try {
    return check_rules_from_json(j);
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("rules {}: {}", path, e.what()));
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("rules {}: {}", path, e.what()));
  }
}

// ---------------------------------------------------------------- comparison

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kSame: return "SAME";
    case Verdict::kBetter: return "BETTER";
    case Verdict::kWorse: return "WORSE";
    case Verdict::kChanged: return "CHANGED";
    case Verdict::kMissing: return "MISSING";
  }
  return "?";
}

double normal_quantile(double confidence) {
  // Bisection on the upper tail 0.5 * erfc(z / sqrt 2) = 1 - confidence.
  const double target = 1.0 - confidence;
  double lo = 0.0, hi = 40.0;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (0.5 * std::erfc(mid / std::sqrt(2.0)) > target) lo = mid; else hi = mid;
  }
  return 0.5 * (lo + hi);
}

namespace {

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

double ratio_of(double base, double fresh) {
  if (same_value(base, fresh)) return 1.0;
  if (std::isnan(base) || std::isnan(fresh)) return NAN;
  if (base == 0) return fresh > 0 ? INFINITY : -INFINITY;
  if (std::isinf(base)) return std::isinf(fresh) ? NAN : 0.0;
  return fresh / base;
}

// Lower is better. NaN (a mean over no finite sample) is the worst value.
Verdict judge_tolerance(double base, double fresh, double tol, double abs) {
  if (same_value(base, fresh)) return Verdict::kSame;
  if (std::isnan(fresh)) return Verdict::kWorse;
  if (std::isnan(base)) return Verdict::kBetter;
  if (fresh > base * (1.0 + tol) + abs) return Verdict::kWorse;
  if (fresh * (1.0 + tol) + abs < base) return Verdict::kBetter;
  return Verdict::kSame;
}

struct ShareVerdict {
  Verdict verdict;
  std::string how;
};

// Higher is better. Equal sample counts and seed: the same samples were drawn,
// so the shares are deterministic and compared exactly; otherwise a one-sided
// two-proportion z-test (pooled) at the rules' confidence.
ShareVerdict judge_share(double s_base, double n_base, double s_new, double n_new, bool same_samples, double confidence) {
  if (same_samples) {
    if (s_new == s_base) return {Verdict::kSame, "share, exact (same seed and samples)"};
    return {s_new < s_base ? Verdict::kWorse : Verdict::kBetter, "share, exact (same seed and samples)"};
  }
  if (n_base == 0 || n_new == 0) return {Verdict::kSame, "share, no samples"};
  const double p1 = s_base / n_base, p2 = s_new / n_new;
  const double p = (s_base + s_new) / (n_base + n_new);
  const double se = std::sqrt(p * (1.0 - p) * (1.0 / n_base + 1.0 / n_new));
  const double zc = normal_quantile(confidence);
  if (se == 0) return {Verdict::kSame, fmt::format("share, two-proportion test at {}%", format_percent(confidence))};
  const double z = (p2 - p1) / se;
  const std::string how = fmt::format("share, z = {:.2f} vs {:.2f} ({}% one-sided)", z, zc, format_percent(confidence));
  if (z < -zc) return {Verdict::kWorse, how};
  if (z > zc) return {Verdict::kBetter, how};
  return {Verdict::kSame, how};
}

// Most figures are better lower (errors, non-finite counts, magnitudes); a
// finite count, every statistic of a 0/1 "finite" metric and of a metric
// declared better higher (seq's o_first_nonfinite) are better higher.
bool higher_is_better(const std::string& metric, const std::string& stat) {
  if (stat == "finite_count") return true;
  const MetricInfo* info = find_metric(metric);
  return info && chunkinv::higher_is_better(*info);
}

const CheckRule* rule_for(const CheckRules& rules, const std::string& metric, const std::string& stat) {
  const CheckRule* found = nullptr;
  for (const auto& r : rules.rules) {
    if (glob_match(r.metric, metric) && (r.statistic == "*" || r.statistic == stat)) found = &r;
  }
  return found && found->kind != CheckKind::kIgnore ? found : nullptr;
}

// Successes behind a share statistic: the mean of a 0/1 metric times the
// samples, or the finite count.
double successes(const Stats& s, const std::string& stat, uint64_t samples) {
  if (stat == "finite_count") return static_cast<double>(s.finite_count);
  return std::round(s.mean * static_cast<double>(samples));
}

std::map<std::string, const ReportEntry*> index_of(const Report& r, const char* which) {
  std::map<std::string, const ReportEntry*> idx;
  for (const auto& e : r.results) {
    if (!idx.emplace(axes_key(e.axes), &e).second) {
      throw UsageError(fmt::format("{} report: configuration {} (path {}) appears twice", which, axes_label(e.axes),
                                   axis_value_text(e.axes["path"])));
    }
  }
  return idx;
}

Comparison figure_of(const ReportEntry& e, std::string metric, std::string stat) {
  Comparison c;
  c.axes = e.axes;
  c.configuration = axes_label(e.axes);
  c.path = axis_value_text(e.axes["path"]);
  c.metric = std::move(metric);
  c.statistic = std::move(stat);
  return c;
}

void tally(CheckResult& r, Comparison c) {
  switch (c.verdict) {
    case Verdict::kSame: ++r.same; break;
    case Verdict::kBetter: ++r.better; break;
    case Verdict::kWorse: ++r.worse; break;
    case Verdict::kChanged: ++r.changed; break;
    case Verdict::kMissing: ++r.missing; break;
  }
  if (c.verdict == Verdict::kWorse || c.verdict == Verdict::kChanged) c.worse = true;
  r.failing += c.worse;
  r.figures.push_back(std::move(c));
}

void compare_entries(const ReportEntry& b, const ReportEntry& n, const CheckRules& rules, CheckResult& out) {
  const bool same_samples = b.samples == n.samples && b.seed == n.seed;
  out.sampling_differs += !same_samples;
  if (rules.bit_exact) {
    for (const auto& [what, bv, nv] : {std::tuple<const char*, double, double>{"samples", double(b.samples), double(n.samples)},
                                       {"seed", double(b.seed), double(n.seed)}}) {
      if (bv == nv) continue;
      Comparison c = figure_of(n, std::string("(") + what + ")", "value");
      c.has_baseline = c.has_new = c.integral = true;
      c.baseline = bv;
      c.fresh = nv;
      c.ratio = ratio_of(bv, nv);
      c.verdict = Verdict::kChanged;
      c.rule = "bit-exact";
      tally(out, std::move(c));
    }
  }
  // Metrics of either entry, in the baseline's order, then the new ones.
  std::vector<std::string> metrics;
  for (const auto& [m, s] : b.metrics) metrics.push_back(m);
  for (const auto& [m, s] : n.metrics) {
    if (!b.metrics.count(m)) metrics.push_back(m);
  }
  for (const auto& metric : metrics) {
    const auto bi = b.metrics.find(metric), ni = n.metrics.find(metric);
    for (const auto& stat : statistic_names()) {
      const CheckRule* rule = nullptr;
      if (!rules.bit_exact) {
        rule = rule_for(rules, metric, stat);
        if (!rule) continue;
      }
      const bool hb = bi != b.metrics.end() && has_stat(bi->second, stat);
      const bool hn = ni != n.metrics.end() && has_stat(ni->second, stat);
      if (!hb && !hn) continue;
      Comparison c = figure_of(n, metric, stat);
      c.integral = stat == "finite_count";
      c.has_baseline = hb;
      c.has_new = hn;
      if (hb) c.baseline = stat_value(bi->second, stat);
      if (hn) c.fresh = stat_value(ni->second, stat);
      if (!hb || !hn) {
        c.verdict = Verdict::kMissing;
        c.worse = !hn && rules.missing_in_new_is_worse;
        c.rule = hn ? "metric only in new" : "metric only in baseline";
        tally(out, std::move(c));
        continue;
      }
      c.ratio = ratio_of(c.baseline, c.fresh);
      if (rules.bit_exact) {
        c.verdict = same_value(c.baseline, c.fresh) ? Verdict::kSame : Verdict::kChanged;
        c.rule = "bit-exact";
      } else {
        switch (rule->kind) {
          case CheckKind::kTolerance: {
            // Judging with the roles swapped turns "must not grow" into "must not fall".
            const bool up = higher_is_better(metric, stat);
            c.verdict = up ? judge_tolerance(c.fresh, c.baseline, rule->tolerance, rule->absolute)
                           : judge_tolerance(c.baseline, c.fresh, rule->tolerance, rule->absolute);
            c.rule = fmt::format("{} {}{}%", up ? ">=" : "<=", up ? "-" : "+", format_percent(rule->tolerance));
            if (rule->absolute > 0) c.rule += fmt::format(" {} {}", up ? "-" : "+", format_sig3(rule->absolute));
            break;
          }
          case CheckKind::kShare: {
            const auto sv = judge_share(successes(bi->second, stat, b.samples), static_cast<double>(b.samples),
                                        successes(ni->second, stat, n.samples), static_cast<double>(n.samples),
                                        same_samples, rules.confidence);
            c.verdict = sv.verdict;
            c.rule = sv.how;
            c.share = stat == "mean";
            break;
          }
          case CheckKind::kCount: {
            const bool up = higher_is_better(metric, stat);
            c.integral = true;
            c.verdict = same_value(c.baseline, c.fresh)         ? Verdict::kSame
                        : (c.fresh > c.baseline) != up           ? Verdict::kWorse
                                                                 : Verdict::kBetter;
            c.rule = up ? "must not fall" : "must not grow";
            // The worst of more samples is worse by itself (with one seed the
            // baseline's samples are a prefix of the new ones): not a regression.
            if (!up && c.verdict == Verdict::kWorse && n.samples > b.samples) {
              c.verdict = Verdict::kSame;
              c.rule = fmt::format("must not grow; not judged: {} samples vs {}", n.samples, b.samples);
            }
            break;
          }
          case CheckKind::kExact:
            c.verdict = same_value(c.baseline, c.fresh) ? Verdict::kSame : Verdict::kChanged;
            c.rule = "exact";
            break;
          case CheckKind::kIgnore: break;
        }
      }
      tally(out, std::move(c));
    }
  }
}

}  // namespace

CheckResult compare_reports(const Report& baseline, const Report& fresh, const CheckRules& rules) {
  const auto bidx = index_of(baseline, "baseline");
  const auto nidx = index_of(fresh, "new");
  CheckResult out;
  // Baseline order, so that a table reads like the baseline's; new-only configurations last.
  for (const auto& b : baseline.results) {
    const auto it = nidx.find(axes_key(b.axes));
    if (it == nidx.end()) {
      ++out.only_in_baseline;
      Comparison c = figure_of(b, "-", "-");
      c.verdict = Verdict::kMissing;
      c.worse = rules.missing_in_new_is_worse;
      c.rule = "configuration missing in new";
      tally(out, std::move(c));
      continue;
    }
    ++out.configurations;
    compare_entries(b, *it->second, rules, out);
  }
  for (const auto& n : fresh.results) {
    if (bidx.count(axes_key(n.axes))) continue;
    ++out.only_in_new;
    Comparison c = figure_of(n, "-", "-");
    c.verdict = Verdict::kMissing;
    c.rule = "configuration only in new";
    tally(out, std::move(c));
  }
  if (out.configurations == 0) {
    throw UsageError(fmt::format("nothing to compare: no configuration is in both reports ({} in baseline, {} in new)",
                                 baseline.results.size(), fresh.results.size()));
  }
  return out;
}

// ---------------------------------------------------------------- output

std::string check_summary(const CheckResult& r) {
  return fmt::format(
      "check: {} configurations compared ({} only in baseline, {} only in new); {} figures: {} worse, {} changed, "
      "{} better, {} same, {} missing; {}",
      r.configurations, r.only_in_baseline, r.only_in_new, r.figures.size(), r.worse, r.changed, r.better, r.same,
      r.missing, r.failed() ? fmt::format("FAIL ({} counted as worse)", r.failing) : std::string("PASS"));
}

std::string check_markdown(const CheckResult& r, bool changes_only) {
  Table t;
  t.columns = {{"configuration", Align::kLeft, ""}, {"path", Align::kLeft, ""},   {"metric", Align::kLeft, ""},
               {"statistic", Align::kLeft, ""},     {"baseline", Align::kRight, ""}, {"new", Align::kRight, ""},
               {"ratio", Align::kRight, ""},        {"verdict", Align::kLeft, ""}, {"rule", Align::kLeft, ""}};
  for (const auto& c : r.figures) {
    if (changes_only && c.verdict == Verdict::kSame) continue;
    auto value = [&c](bool has, double v) {
      if (!has) return Cell::empty();
      return c.share ? Cell::share(v) : c.integral ? Cell::count(v) : Cell::number(v);
    };
    const bool both = c.has_baseline && c.has_new;
    t.rows.push_back({Cell::of_text(c.configuration), Cell::of_text(c.path), Cell::of_text(c.metric),
                      Cell::of_text(c.statistic), value(c.has_baseline, c.baseline), value(c.has_new, c.fresh),
                      both ? Cell::number(c.ratio) : Cell::empty(),
                      Cell::of_text(std::string(verdict_name(c.verdict)) + (c.worse && c.verdict == Verdict::kMissing ? " (worse)" : "")),
                      Cell::of_text(c.rule)});
  }
  std::string note;
  if (r.sampling_differs > 0) {
    note = fmt::format(
        "note: {} of {} configurations differ in seed or sample count: shares are judged by the two-proportion "
        "test, medians and tails by the tolerances alone (which do not model sampling noise), and a worst-sample "
        "count is not judged where NEW has more samples.\n",
        r.sampling_differs, r.configurations);
  }
  return (t.rows.empty() ? std::string() : to_markdown(t) + "\n") + note + check_summary(r) + "\n";
}

namespace {

// A figure in words: "<configuration, the method included> <path>: <metric>.<statistic>".
std::string figure_name(const Comparison& c) {
  return fmt::format("{} {}: {}.{}", c.configuration, c.path, c.metric, c.statistic);
}

// A figure's values as the Markdown table shows them.
std::string figure_value(const Comparison& c, bool has, double v) {
  if (!has) return "absent";
  return c.share ? format_percent(v) + "%" : format_sig3(v);
}

std::string why_worse(const Comparison& c) {
  return fmt::format("{}: baseline {}, new {} ({})", verdict_name(c.verdict), figure_value(c, c.has_baseline, c.baseline),
                     figure_value(c, c.has_new, c.fresh), c.rule);
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 has no other control characters than tab, LF and CR.
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') out += ' ';
        else out += ch;
    }
  }
  return out;
}

// A workflow command's data: %, CR and LF are escaped (GitHub's rules).
std::string github_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '%') out += "%25";
    else if (ch == '\r') out += "%0D";
    else if (ch == '\n') out += "%0A";
    else out += ch;
  }
  return out;
}

}  // namespace

std::string check_junit(const CheckResult& r, const std::string& baseline, const std::string& fresh) {
  std::string cases;
  for (const auto& c : r.figures) {
    cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\"", xml_escape(c.configuration + " " + c.path),
                         xml_escape(figure_name(c)));
    if (!c.worse) {
      cases += "/>\n";
      continue;
    }
    cases += fmt::format(">\n      <failure type=\"{}\" message=\"{}\"/>\n    </testcase>\n", verdict_name(c.verdict),
                         xml_escape(why_worse(c)));
  }
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<testsuites tests=\"{0}\" failures=\"{1}\">\n"
                     "  <testsuite name=\"chunkinv check {2} against {3}\" tests=\"{0}\" failures=\"{1}\" errors=\"0\">\n"
                     "{4}  </testsuite>\n</testsuites>\n",
                     r.figures.size(), r.failing, xml_escape(fresh), xml_escape(baseline), cases);
}

std::string check_github(const CheckResult& r, const std::string& baseline, const std::string& fresh) {
  std::string out;
  for (const auto& c : r.figures)
    if (c.worse)
      out += fmt::format("::error title=chunkinv check::{}\n",
                         github_escape(fmt::format("{} {} ({} against {})", figure_name(c), why_worse(c), fresh, baseline)));
  out += fmt::format("::notice title=chunkinv check::{}\n", github_escape(fmt::format("{} ({} against {})", check_summary(r), fresh, baseline)));
  return out;
}

json check_json(const CheckResult& r, const CheckRules& rules) {
  json figures = json::array();
  for (const auto& c : r.figures) {
    json f = {{"axes", c.axes},           {"configuration", c.configuration}, {"path", c.path},
              {"metric", c.metric},       {"statistic", c.statistic},         {"verdict", verdict_name(c.verdict)},
              {"counts_as_worse", c.worse}, {"rule", c.rule}};
    f["baseline"] = c.has_baseline ? json_number(c.baseline) : json(nullptr);
    f["new"] = c.has_new ? json_number(c.fresh) : json(nullptr);
    f["ratio"] = c.has_baseline && c.has_new ? json_number(c.ratio) : json(nullptr);
    figures.push_back(f);
  }
  return {{"schema", "chunkinv.check/1"},
          {"mode", rules.bit_exact ? "bit-exact" : "tolerance"},
          {"passed", !r.failed()},
          {"summary",
           {{"configurations", r.configurations}, {"only_in_baseline", r.only_in_baseline}, {"only_in_new", r.only_in_new},
            {"sampling_differs", r.sampling_differs}, {"figures", r.figures.size()}, {"worse", r.worse}, {"changed", r.changed}, {"better", r.better},
            {"same", r.same}, {"missing", r.missing}, {"failing", r.failing}}},
          {"figures", figures}};
}

}  // namespace chunkinv
