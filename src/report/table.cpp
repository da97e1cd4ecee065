// The presets: which rows and columns a report's aggregates make, laid out
// once for every format (report/table.hpp, docs/tables.md).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "metrics/metrics.hpp"
#include "paths/path.hpp"
#include "report/table.hpp"

namespace chunkinv {

using nlohmann::json;

// ---------------------------------------------------------------- presets

TableLayout layout_for(TableFormat f) {
  switch (f) {
    case TableFormat::kMarkdown: return TableLayout::kRows;
    case TableFormat::kLatex: return TableLayout::kColumnGroups;
    case TableFormat::kCsv: return TableLayout::kTidy;
  }
  return TableLayout::kRows;
}

namespace {

struct Row {
  const ReportEntry* entry;
  std::string report;
};

const Stats* find_stats(const ReportEntry& e, const std::string& metric) {
  const auto it = e.metrics.find(metric);
  return it == e.metrics.end() ? nullptr : &it->second;
}

// A column of a preset: which statistic of which metric, and its names.
struct ColumnSpec {
  std::string header;  // Markdown's header, the article's words
  std::string title;   // LaTeX's title line (verbatim); empty: the escaped header
  std::string metric;  // empty: the sample count
  std::string stat;    // median, p99, max; mean for a share
  CellKind kind = CellKind::kNumber;
  bool interval = false;  // a share with its 95% Wilson interval
};

// ---------------------------------------------------------------- the legend's words

// A statistic in words.
std::string stat_words(const std::string& stat) {
  static const std::map<std::string, std::string> words{
      {"median", "median over the samples"},
      {"mean", "mean over the finite samples"},
      {"p10", "10th percentile over the samples"},
      {"p90", "90th percentile over the samples"},
      {"p99", "99th percentile over the samples"},
      {"p999", "99.9th percentile over the samples"},
      {"p999999", "99.9999th percentile over the samples"},
      {"min", "smallest value over the samples"},
      {"max", "largest value over the samples (the worst sample)"},
      {"finite_count", "samples whose value is finite"},
      {"wilson_low", "low end of the share's 95% Wilson interval"},
      {"wilson_high", "high end of the share's 95% Wilson interval"}};
  const auto it = words.find(stat);
  return it == words.end() ? stat : it->second;
}

// A metric in words: its name, what it measures, and what it tells a
// kernel author where the article's name alone does not.
std::string metric_words(const std::string& metric) {
  static const std::map<std::string, std::string> why{
      {"l_rel_rmse", "the error of the path's L alone"},
      {"inv_total_rel_rmse", "the whole error of the inverse the path hands on"},
      {"inv_method_only_rel_rmse", "the method's error on the path's own L"},
      {"inv_gold_l_rel_rmse", "the method's own error, run on the exact L: the article's \"INV power\""},
      {"decay_zeros", "decays exp(G_i - G_j) that underflow to 0"},
      {"inv_decay_nonfinite", "reciprocal decays exp(G_j) that overflow to inf"},
      {"gold_l_highest_power", "the highest power of L the Neumann product forms on fp16(gold L)"},
      {"gold_l_power_max", "the largest |entry| of those powers"}};
  const MetricInfo* info = find_metric(metric);
  std::string s = metric;
  if (info) s += fmt::format(" ({}{})", info->kind == MetricKind::kError ? "relative RMS error, " : "", info->help);
  if (const auto it = why.find(metric); it != why.end()) s += ": " + it->second;
  return s;
}

std::string spec_help(const ColumnSpec& c) {
  if (c.metric.empty()) return "samples aggregated in the row";
  if (c.kind == CellKind::kShare) {
    const MetricInfo* info = find_metric(c.metric);
    return fmt::format("share of samples with {} = 1{}{}", c.metric, info ? fmt::format(" ({})", info->help) : "",
                       c.interval ? ", with its 95% Wilson interval" : "");
  }
  if (c.kind == CellKind::kPower) return fmt::format("L^p, p the {} of {}", stat_words(c.stat), metric_words(c.metric));
  return fmt::format("{} of {}", stat_words(c.stat), metric_words(c.metric));
}

// An axis column's line.
std::string axis_help(const std::string& axis) {
  if (axis == "family") return "the input family (run --list-families)";
  if (axis == "path") return "how L is formed (run --list-paths); gold is the FP64 reference";
  if (axis == "method") return "the inverse method (run --list-methods)";
  if (axis == "dim") return "the key dimension d";
  if (axis == "report") return "the report file the row comes from";
  if (axis == "metric") return "the metric of the row (run --list-metrics)";
  if (axis == "chunk") return "the chunk size C, tokens per chunk";
  return fmt::format("the family's axis {} (run --list-families)", axis);
}

Column column_of(const ColumnSpec& c) {
  Column col{c.header, Align::kRight, c.title};
  col.help = spec_help(c);
  if (c.metric.empty()) {
    col.key = "samples";
    col.latex_header = "$n$";
    return col;
  }
  col.key = c.metric + "_" + c.stat;
  col.stat = c.kind == CellKind::kShare ? "\\%" : c.stat == "p999" ? "p99.9" : c.stat;
  if (c.interval) col.interval_key = c.metric + "_wilson";
  return col;
}

// A statistic's cell: a quantile of fewer samples than it needs is a mark, not a number.
Cell stat_cell(const Stats& s, const std::string& stat, uint64_t samples, bool as_count) {
  if (samples < samples_needed(stat)) return Cell::too_few(double(samples_needed(stat)));
  const double v = stat_value(s, stat);
  return as_count ? Cell::count(v) : Cell::number(v);
}

// The legend's notes a table's cells and rows call for.
void add_notes(Table& t, bool gold_rows) {
  bool few = false;
  for (const auto& row : t.rows)
    for (const Cell& c : row) few = few || c.kind == CellKind::kTooFew;
  if (few)
    t.notes.push_back("n<100, n<1000, ...: a quantile of fewer samples than it needs is not shown (p10 and p90 need "
                      "10, p99 100, p99.9 1000, p99.9999 10^6: 1/(1-q) samples, else it is the largest values "
                      "interpolated)");
  if (gold_rows)
    t.notes.push_back("path gold: a method on the FP64 gold L; its errors are the method's own, not zero");
}

Cell fill(const ColumnSpec& c, const ReportEntry& e) {
  if (c.metric.empty()) return Cell::count(static_cast<double>(e.samples));
  const Stats* s = find_stats(e, c.metric);
  if (!s) return Cell::empty();
  if (c.kind == CellKind::kShare) {
    return c.interval && s->has_wilson ? Cell::share(s->mean, s->wilson_low, s->wilson_high) : Cell::share(s->mean);
  }
  if (!has_stat(*s, c.stat)) return Cell::empty();
  if (c.kind == CellKind::kPower) return Cell::power(stat_value(*s, c.stat));
  return stat_cell(*s, c.stat, e.samples, c.kind == CellKind::kCount);
}

struct Preset {
  std::string name;
  // Entries without this metric (the gold's own entry) are left out of the table.
  std::string required_metric;
  std::vector<ColumnSpec> columns;
  // The article's tables show the approximate paths: methods on the gold's
  // L appear in summary and full, and as the "INV power" column here.
  bool approximate_paths_only = false;
  // The method comparison: a row per method, the methods of one
  // configuration and path adjacent in the order given (the `method` column
  // after the chunk); LaTeX's column groups are the paths only.
  bool method_rows = false;
};

// The article's three tables (SPEC §5): errors are medians, non-finite
// counts and power magnitudes the worst sample, "finite" the share of
// samples with a finite inverse.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = [] {
    const std::string inv = "inv_total_rel_rmse", power = "inv_gold_l_rel_rmse";
    const ColumnSpec finite{"Finite", "", "inv_finite", "mean", CellKind::kShare};
    const ColumnSpec inv_total{"INV total", "", inv, "median"};
    const ColumnSpec inv_power{"INV power", "", power, "median"};
    const ColumnSpec power_max{"Max power magnitude", "", "gold_l_power_max", "max"};
    // A median and a high percentile, titled once in LaTeX.
    const ColumnSpec total_median{"INV total median", "INV total", inv, "median"};
    const ColumnSpec total_p99{"INV total p99", "INV total", inv, "p99"};
    const ColumnSpec power_median{"INV power median", "INV power", power, "median"};
    const ColumnSpec power_p99{"INV power p99", "INV power", power, "p99"};
    const ColumnSpec total_p999{"INV total p99.9", "INV total", inv, "p999"};
    const ColumnSpec power_p999{"INV power p99.9", "INV power", power, "p999"};
    std::vector<Preset> v;
    v.push_back({"summary", inv,
                 {{"Samples", "", "", "", CellKind::kCount},
                  {"Finite [95% CI]", "Finite", "inv_finite", "mean", CellKind::kShare, true},
                  {"L median", "$L$", "l_rel_rmse", "median"},
                  total_median,
                  total_p99,
                  {"Method only median", "Method only", "inv_method_only_rel_rmse", "median"},
                  power_median,
                  power_p99}});
    v.push_back({"k3-exponent", inv,
                 {{"inverse finite", "", "inv_finite", "mean", CellKind::kShare},
                  {"decay = 0", "decay $= 0$", "decay_zeros", "max", CellKind::kCount},
                  {"reciprocal = inf", "reciprocal $= \\infty$", "inv_decay_nonfinite", "max", CellKind::kCount},
                  inv_total, inv_power},
                 true});
    v.push_back({"k3-stress", inv,
                 {{"Highest power formed", "", "gold_l_highest_power", "max", CellKind::kPower}, power_max, inv_total,
                  inv_power, finite},
                 true});
    v.push_back({"k3-model", inv, {finite, inv_total, inv_power, power_max}, true});
    // Choosing an inverse (docs/tables.md): on the path's L and on the exact L.
    // The far tail (p99.9) beside p99: which method fails one chunk in a thousand.
    v.push_back({"methods", inv, {total_median, total_p99, total_p999, finite, power_median, power_p999}, true, true});
    // What the inverse does to the layer (chunkinv seq, docs/downstream.md): o's error, its inverse-only
    // and storage parts, the final state's, the state's worst and its growth per chunk.
    v.push_back({"downstream", "o_rel_rmse",
                 {{"Samples", "", "", "", CellKind::kCount},
                  {"o finite", "", "o_finite", "mean", CellKind::kShare},
                  {"o median", "$o$", "o_rel_rmse", "median"},
                  {"o p99", "$o$ p99", "o_rel_rmse", "p99"},
                  {"Inverse only median", "Inverse only", "o_rel_rmse_inverse_only", "median"},
                  {"Storage median", "Storage", "o_rel_rmse_storage", "median"},
                  {"Inverse share median", "Inverse share", "o_inverse_share", "median"},
                  {"ht median", "$h_T$", "ht_rel_rmse", "median"},
                  {"State max median", "State max", "state_rel_rmse_max", "median"},
                  {"Growth per chunk median", "Growth per chunk", "state_growth_per_chunk", "median"}},
                 false, true});
    // The backward (seq -a backward=..., docs/downstream.md "Backward"): each gradient's error, total and
    // inverse only.
    v.push_back({"backward", "dk_rel_rmse",
                 {{"Samples", "", "", "", CellKind::kCount},
                  {"Gradients finite", "", "grad_finite", "mean", CellKind::kShare},
                  {"dq median", "$dq$", "dq_rel_rmse", "median"},
                  {"dk median", "$dk$", "dk_rel_rmse", "median"},
                  {"dv median", "$dv$", "dv_rel_rmse", "median"},
                  {"dg median", "$dg$", "dg_rel_rmse", "median"},
                  {"dbeta median", "$d\\beta$", "dbeta_rel_rmse", "median"},
                  {"dq inverse only", "$dq$ inv.", "dq_rel_rmse_inverse_only", "median"},
                  {"dk inverse only", "$dk$ inv.", "dk_rel_rmse_inverse_only", "median"},
                  {"dv inverse only", "$dv$ inv.", "dv_rel_rmse_inverse_only", "median"},
                  {"dg inverse only", "$dg$ inv.", "dg_rel_rmse_inverse_only", "median"},
                  {"dbeta inverse only", "$d\\beta$ inv.", "dbeta_rel_rmse_inverse_only", "median"}},
                 false, true});
    return v;
  }();
  return p;
}

int compare_json_values(const json& a, const json& b) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  const std::string x = a.is_string() ? a.get<std::string>() : a.dump();
  const std::string y = b.is_string() ? b.get<std::string>() : b.dump();
  return x.compare(y) < 0 ? -1 : x == y ? 0 : 1;
}

// The row layout shared by every preset: which axis columns appear, and in
// which order the entries go.
struct Layout {
  std::vector<std::string> axis_columns;  // family first, then other axes by name; those that vary
  std::vector<std::string> axes;          // every axis but path and chunk, in the same order
  std::map<std::string, int> family_rank, path_rank, method_rank;  // order of first appearance
  bool show_path = false;
  bool show_report = false;
  bool several_reports = false;
  bool method_rows = false;  // Preset::method_rows
  bool show_chunk = true;    // false where chunk is the pivot's axis
  std::vector<Row> rows;

  int family_of(const Row& r) const {
    return family_rank.at(r.entry->axes.contains("family") ? axis_value_text(r.entry->axes["family"]) : "");
  }
  int method_of(const Row& r) const {
    return method_rank.at(axis_value_text(r.entry->axes.value("method", json(""))));
  }
  // Family (in order of appearance), the other axes but `skip` (ascending), chunk (ascending).
  int compare_configurations(const Row& a, const Row& b, const std::string& skip) const {
    if (family_of(a) != family_of(b)) return family_of(a) < family_of(b) ? -1 : 1;
    for (const auto& n : axes) {
      if (n == "family" || n == skip) continue;
      const bool ha = a.entry->axes.contains(n), hb = b.entry->axes.contains(n);
      if (ha != hb) return ha ? -1 : 1;
      if (!ha) continue;
      if (const int c = compare_json_values(a.entry->axes[n], b.entry->axes[n]); c != 0) return c;
    }
    return 0;
  }
};

int compare_chunks(const Row& a, const Row& b) {
  return compare_json_values(a.entry->axes.value("chunk", json(0)), b.entry->axes.value("chunk", json(0)));
}

Layout lay_out(const std::vector<NamedReport>& reports, const std::string& required_metric,
               bool approximate_paths_only = false, bool method_rows = false) {
  Layout l;
  l.method_rows = method_rows;
  l.several_reports = reports.size() > 1;
  std::map<std::string, int>& path_rank = l.path_rank;
  std::map<std::string, int> key_count;
  for (const auto& r : reports) {
    for (const auto& e : r.report.results) {
      if (!required_metric.empty() && !find_stats(e, required_metric)) continue;
      if (approximate_paths_only && e.axes["path"].is_string())
        if (const PathSpec* p = find_path_or_null(e.axes["path"].get<std::string>()); p && p->reference) continue;
      l.rows.push_back({&e, r.name});
      const std::string fam = e.axes.contains("family") ? axis_value_text(e.axes["family"]) : "";
      const std::string path = axis_value_text(e.axes["path"]);
      l.family_rank.emplace(fam, static_cast<int>(l.family_rank.size()));
      path_rank.emplace(path, static_cast<int>(path_rank.size()));
      l.method_rank.emplace(axis_value_text(e.axes.value("method", json(""))), static_cast<int>(l.method_rank.size()));
      ++key_count[axes_key(e.axes)];
    }
  }
  l.show_path = path_rank.size() > 1;
  for (const auto& [k, n] : key_count) l.show_report = l.show_report || n > 1;

  // Axes other than path and chunk get a column when they differ between rows.
  std::set<std::string> names;
  for (const auto& row : l.rows) {
    for (const auto& [k, v] : row.entry->axes.items()) {
      if (k != "path" && k != "chunk") names.insert(k);
    }
  }
  if (names.count("family")) l.axes.push_back("family");
  for (const auto& n : names) {
    if (n != "family") l.axes.push_back(n);
  }
  for (const auto& n : l.axes) {
    std::set<std::string> values;
    for (const auto& row : l.rows) {
      values.insert(row.entry->axes.contains(n) ? axes_key(json{{"v", row.entry->axes[n]}}) : "<absent>");
    }
    if (values.size() > 1) l.axis_columns.push_back(n);
  }

  std::stable_sort(l.rows.begin(), l.rows.end(), [&](const Row& a, const Row& b) {
    if (const int c = l.compare_configurations(a, b, method_rows ? "method" : ""); c != 0) return c < 0;
    const int pa = path_rank.at(axis_value_text(a.entry->axes["path"]));
    const int pb = path_rank.at(axis_value_text(b.entry->axes["path"]));
    if (pa != pb) return pa < pb;
    if (const int c = compare_chunks(a, b); c != 0 || !method_rows) return c < 0;
    return l.method_of(a) < l.method_of(b);
  });
  return l;
}

Cell axis_cell(const Row& r, const std::string& name) {
  return r.entry->axes.contains(name) ? Cell::of_text(axis_value_text(r.entry->axes[name])) : Cell::empty();
}

Cell chunk_cell(const Row& r) {
  const json chunk = r.entry->axes.value("chunk", json());
  return chunk.is_number() ? Cell::count(chunk.get<double>())
         : chunk.is_null() ? Cell::empty()
                           : Cell::of_text(axis_value_text(chunk));
}

Column chunk_column() { return {"Chunk C", Align::kRight, "Chunk $C$", "chunk"}; }

Column method_column() { return {"method", Align::kLeft, "", "method"}; }

// The leading columns of every row: varying axes, path, report, chunk (then
// the method, always, where methods are rows).
std::vector<Column> leading_columns(const Layout& l) {
  std::vector<Column> c;
  for (const auto& n : l.axis_columns) {
    if (!(l.method_rows && n == "method")) c.push_back({n, n == "family" ? Align::kLeft : Align::kRight, "", n});
  }
  if (l.show_path) c.push_back({"path", Align::kLeft, "", "path"});
  if (l.show_report) c.push_back({"report", Align::kLeft, "", "report"});
  if (l.show_chunk) c.push_back(chunk_column());
  if (l.method_rows) c.push_back(method_column());
  return c;
}

std::vector<Cell> leading_cells(const Layout& l, const Row& r) {
  std::vector<Cell> c;
  for (const auto& n : l.axis_columns) {
    if (!(l.method_rows && n == "method")) c.push_back(axis_cell(r, n));
  }
  if (l.show_path) c.push_back(Cell::of_text(axis_value_text(r.entry->axes["path"])));
  if (l.show_report) c.push_back(Cell::of_text(r.report));
  if (l.show_chunk) c.push_back(chunk_cell(r));
  if (l.method_rows) c.push_back(axis_cell(r, "method"));
  return c;
}

// Tidy data: every axis a column, in the schema's order (family, chunk, dim,
// path, method, then the family's own by name), then the report when several.
std::vector<std::string> tidy_axes(const Layout& l) {
  std::vector<std::string> order = {"family", "chunk", "dim", "path", "method"};
  std::set<std::string> present;
  for (const auto& r : l.rows) {
    for (const auto& [k, v] : r.entry->axes.items()) present.insert(k);
  }
  std::vector<std::string> out;
  for (const auto& n : order) {
    if (present.count(n)) out.push_back(n);
  }
  for (const auto& n : present) {
    if (std::find(order.begin(), order.end(), n) == order.end()) out.push_back(n);
  }
  return out;
}

std::vector<Column> tidy_columns(const Layout& l) {
  std::vector<Column> c;
  for (const auto& n : tidy_axes(l)) c.push_back({n, n == "family" ? Align::kLeft : Align::kRight, "", n});
  if (l.several_reports) c.push_back({"report", Align::kLeft, "", "report"});
  return c;
}

std::vector<Cell> tidy_cells(const Layout& l, const Row& r) {
  std::vector<Cell> c;
  for (const auto& n : tidy_axes(l)) c.push_back(n == "chunk" ? chunk_cell(r) : axis_cell(r, n));
  if (l.several_reports) c.push_back(Cell::of_text(r.report));
  return c;
}

// Metric names in report order (metrics/metrics.hpp), then any other.
std::vector<std::string> metric_order(const ReportEntry& e) {
  std::vector<std::string> order;
  std::set<std::string> seen;
  for (const auto& m : all_metric_names()) {
    if (e.metrics.count(m) && seen.insert(m).second) order.push_back(m);
  }
  for (const auto& [name, s] : e.metrics) {
    if (seen.insert(name).second) order.push_back(name);
  }
  return order;
}

// Every statistic of every metric, one row per (entry, metric).
Table full_table(const std::vector<NamedReport>& reports, TableLayout layout) {
  const Layout l = lay_out(reports, "");
  const bool tidy = layout == TableLayout::kTidy;
  Table t;
  t.columns = tidy ? tidy_columns(l) : leading_columns(l);
  t.columns.push_back({"metric", Align::kLeft, "", "metric"});
  t.columns.push_back({"samples", Align::kRight, "", "samples"});
  for (const auto& s : stat_names()) t.columns.push_back({s, Align::kRight, "", s});
  t.columns.push_back({"wilson_low", Align::kRight, "", "wilson_low"});
  t.columns.push_back({"wilson_high", Align::kRight, "", "wilson_high"});
  for (const auto& r : l.rows) {
    for (const auto& name : metric_order(*r.entry)) {
      const Stats& s = r.entry->metrics.at(name);
      const MetricInfo* info = find_metric(name);
      const bool integral = info && (info->kind == MetricKind::kCount || info->kind == MetricKind::kFlag);
      auto row = tidy ? tidy_cells(l, r) : leading_cells(l, r);
      row.push_back(Cell::of_text(name));
      row.push_back(Cell::count(static_cast<double>(r.entry->samples)));
      for (const auto& stat : stat_names()) {
        if (!has_stat(s, stat)) {
          row.push_back(Cell::empty());
          continue;
        }
        const double v = stat_value(s, stat);
        const bool as_count = stat == "finite_count" || (integral && std::isfinite(v) && v == std::floor(v) && stat != "mean");
        row.push_back(stat_cell(s, stat, r.entry->samples, as_count));
      }
      row.push_back(s.has_wilson ? Cell::number(s.wilson_low) : Cell::empty());
      row.push_back(s.has_wilson ? Cell::number(s.wilson_high) : Cell::empty());
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

bool has_samples_column(const Preset& p) {
  return std::any_of(p.columns.begin(), p.columns.end(), [](const ColumnSpec& c) { return c.metric.empty(); });
}

// One row per configuration, path and method (Markdown; LaTeX where groups do not fit).
Table rows_table(const Layout& l, const Preset& p) {
  Table t;
  t.columns = leading_columns(l);
  for (const auto& c : p.columns) t.columns.push_back(column_of(c));
  for (const auto& r : l.rows) {
    auto row = leading_cells(l, r);
    for (const auto& c : p.columns) row.push_back(fill(c, *r.entry));
    t.rows.push_back(std::move(row));
  }
  return t;
}

// Every axis a column and snake_case names: a data frame in one read (CSV).
Table tidy_table(const Layout& l, const Preset& p) {
  Table t;
  t.columns = tidy_columns(l);
  const bool samples = !has_samples_column(p);
  if (samples) t.columns.push_back(column_of({"Samples", "", "", "", CellKind::kCount}));
  for (const auto& c : p.columns) t.columns.push_back(column_of(c));
  for (const auto& r : l.rows) {
    auto row = tidy_cells(l, r);
    if (samples) row.push_back(Cell::count(static_cast<double>(r.entry->samples)));
    for (const auto& c : p.columns) row.push_back(fill(c, *r.entry));
    t.rows.push_back(std::move(row));
  }
  return t;
}

// The sample count of `rows`, or 0 when it varies.
uint64_t common_samples(const std::vector<const Row*>& rows) {
  uint64_t n = 0;
  for (const Row* r : rows) {
    if (n != 0 && r->entry->samples != n) return 0;
    n = r->entry->samples;
  }
  return n;
}

Column samples_column(const std::string& group) {
  Column c = column_of({"Samples", "", "", "", CellKind::kCount});
  c.group = group;
  return c;
}

// The rows layout for LaTeX: the sample count over the value columns, or a
// column of its own where it varies.
Table rows_table_with_samples(const Layout& l, const Preset& p) {
  Table t = rows_table(l, p);
  const size_t lead = leading_columns(l).size();
  if (!l.show_path && !l.rows.empty()) {
    // One path: its name heads the value columns (Markdown leaves it out).
    for (size_t j = lead; j < t.columns.size(); ++j) t.columns[j].group = axis_value_text(l.rows[0].entry->axes["path"]);
  }
  std::vector<const Row*> all;
  for (const auto& r : l.rows) all.push_back(&r);
  const uint64_t n = common_samples(all);
  if (has_samples_column(p)) return t;  // the count has its column already
  if (n > 0) {
    for (size_t j = lead; j < t.columns.size(); ++j) t.columns[j].samples = n;
  } else {
    t.columns.insert(t.columns.begin() + static_cast<long>(lead), samples_column(t.columns[lead].group));
    for (size_t i = 0; i < l.rows.size(); ++i) {
      t.rows[i].insert(t.rows[i].begin() + static_cast<long>(lead),
                       Cell::count(static_cast<double>(l.rows[i].entry->samples)));
    }
  }
  return t;
}

// One row per configuration, each path and method a group of columns: the
// article's comparison of paths side by side. Empty when there is a single
// group or the groups would make the table wider than kMaxGroupedColumns.
std::optional<Table> grouped_table(const Layout& l, const Preset& p) {
  std::set<std::string> methods;
  for (const auto& r : l.rows) methods.insert(axis_value_text(r.entry->axes.value("method", json(""))));
  // Methods are groups of columns too, unless they are rows (the methods preset).
  const bool method_groups = methods.size() > 1 && !l.method_rows;
  auto group_of = [&](const Row& r) {
    std::string g = axis_value_text(r.entry->axes["path"]);
    if (method_groups) g += " / " + axis_value_text(r.entry->axes.value("method", json("")));
    if (l.show_report) g += " (" + r.report + ")";
    return g;
  };
  // Groups in the order the paths and methods were given (then the reports').
  std::vector<std::string> groups;
  std::map<std::string, std::vector<const Row*>> members;
  std::map<std::string, std::tuple<int, int, int>> rank;
  std::map<std::string, int> report_rank;
  for (const auto& r : l.rows) {
    const std::string g = group_of(r);
    if (!members.count(g)) groups.push_back(g);
    members[g].push_back(&r);
    report_rank.emplace(r.report, static_cast<int>(report_rank.size()));
    rank.emplace(g, std::make_tuple(l.path_rank.at(axis_value_text(r.entry->axes["path"])),
                                    l.method_rank.at(axis_value_text(r.entry->axes.value("method", json("")))),
                                    report_rank.at(r.report)));
  }
  std::stable_sort(groups.begin(), groups.end(), [&](const std::string& a, const std::string& b) { return rank[a] < rank[b]; });
  size_t width = 0;
  for (const auto& c : p.columns) width += c.interval ? 2 : 1;
  if (groups.size() < 2 || groups.size() * width > kMaxGroupedColumns) return std::nullopt;

  // The configurations, in the rows' order without the path (with the
  // method where methods are rows).
  const std::string skip = methods.size() > 1 ? "method" : "";
  std::vector<const Row*> configs;
  std::map<std::string, size_t> config_index;
  auto config_key = [&](const Row& r) {
    json a = r.entry->axes;
    a.erase("path");
    if (!l.method_rows) a.erase("method");
    return axes_key(a);
  };
  for (const auto& r : l.rows) {
    if (config_index.emplace(config_key(r), configs.size()).second) configs.push_back(&r);
  }
  std::stable_sort(configs.begin(), configs.end(), [&](const Row* a, const Row* b) {
    if (const int c = l.compare_configurations(*a, *b, skip); c != 0) return c < 0;
    if (const int c = compare_chunks(*a, *b); c != 0 || !l.method_rows) return c < 0;
    return l.method_of(*a) < l.method_of(*b);
  });
  config_index.clear();
  for (size_t i = 0; i < configs.size(); ++i) config_index[config_key(*configs[i])] = i;

  Table t;
  std::vector<std::string> axis_columns;
  for (const auto& n : l.axis_columns) {
    if (n != "method") axis_columns.push_back(n);
  }
  for (const auto& n : axis_columns) t.columns.push_back({n, n == "family" ? Align::kLeft : Align::kRight, "", n});
  t.columns.push_back(chunk_column());
  if (l.method_rows) t.columns.push_back(method_column());
  t.rows.resize(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    for (const auto& n : axis_columns) t.rows[i].push_back(axis_cell(*configs[i], n));
    t.rows[i].push_back(chunk_cell(*configs[i]));
    if (l.method_rows) t.rows[i].push_back(axis_cell(*configs[i], "method"));
  }
  const bool counted = has_samples_column(p);  // the preset has a column of sample counts
  for (const auto& g : groups) {
    const uint64_t n = counted ? 0 : common_samples(members[g]);
    std::vector<const ReportEntry*> cell_entry(configs.size(), nullptr);
    for (const Row* r : members[g]) cell_entry[config_index.at(config_key(*r))] = r->entry;
    if (!counted && n == 0) {
      t.columns.push_back(samples_column(g));
      for (size_t i = 0; i < configs.size(); ++i) {
        t.rows[i].push_back(cell_entry[i] ? Cell::count(static_cast<double>(cell_entry[i]->samples)) : Cell::empty());
      }
    }
    for (const auto& c : p.columns) {
      Column col = column_of(c);
      col.group = g;
      col.samples = n;
      t.columns.push_back(col);
      for (size_t i = 0; i < configs.size(); ++i) t.rows[i].push_back(cell_entry[i] ? fill(c, *cell_entry[i]) : Cell::empty());
    }
  }
  return t;
}

}  // namespace

const std::vector<std::string>& table_presets() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& p : presets()) v.push_back(p.name);
    v.push_back("full");
    return v;
  }();
  return names;
}

// --columns AXIS: one row per configuration without the axis, and for each
// of its values (ascending numbers, else in order of appearance) a group of
// the preset's columns: the paper's "C = 16 | C = 32 | C = 64" layout.
Table pivot_table(const Layout& l, const Preset& p, const std::string& axis) {
  std::vector<json> values;
  for (const auto& r : l.rows) {
    if (!r.entry->axes.contains(axis)) continue;
    const json& v = r.entry->axes[axis];
    if (std::none_of(values.begin(), values.end(), [&](const json& x) { return compare_json_values(x, v) == 0; }))
      values.push_back(v);
  }
  if (values.empty()) {
    std::set<std::string> names;
    for (const auto& r : l.rows)
      for (const auto& [k, v] : r.entry->axes.items()) names.insert(k);
    throw UsageError(fmt::format("--columns {}: no row of the table has that axis; axes: {}", axis, fmt::join(names, ", ")));
  }
  if (std::all_of(values.begin(), values.end(), [](const json& v) { return v.is_number(); }))
    std::stable_sort(values.begin(), values.end(), [](const json& a, const json& b) { return compare_json_values(a, b) < 0; });
  Layout lead = l;  // the leading columns, without the axis
  lead.axis_columns.erase(std::remove(lead.axis_columns.begin(), lead.axis_columns.end(), axis), lead.axis_columns.end());
  if (axis == "path") lead.show_path = false;
  if (axis == "chunk") lead.show_chunk = false;
  if (axis == "method") lead.method_rows = false;
  const auto config_key = [&](const Row& r) {
    json a = r.entry->axes;
    a.erase(axis);
    return axes_key(a) + "\n" + (l.show_report ? r.report : "");
  };
  std::vector<const Row*> configs;
  std::map<std::string, size_t> index;
  for (const auto& r : l.rows)
    if (index.emplace(config_key(r), configs.size()).second) configs.push_back(&r);
  Table t;
  t.columns = leading_columns(lead);
  for (const Row* r : configs) t.rows.push_back(leading_cells(lead, *r));
  for (const json& v : values) {
    const std::string text = axis_value_text(v);
    const std::string group = axis == "path" || axis == "method" ? text : axis + "=" + text;
    std::vector<const ReportEntry*> at(configs.size(), nullptr);
    for (const auto& r : l.rows)
      if (r.entry->axes.contains(axis) && compare_json_values(r.entry->axes[axis], v) == 0)
        at[index.at(config_key(r))] = r.entry;
    for (const auto& c : p.columns) {
      Column col = column_of(c);
      col.group = group;
      col.key = axis + "_" + text + "_" + col.key;
      t.columns.push_back(col);
      for (size_t i = 0; i < configs.size(); ++i) t.rows[i].push_back(at[i] ? fill(c, *at[i]) : Cell::empty());
    }
  }
  std::vector<std::string> groups;
  for (const json& v : values)
    groups.push_back(axis == "path" || axis == "method" ? axis_value_text(v) : axis + "=" + axis_value_text(v));
  t.notes.push_back(fmt::format("{}: each group of columns holds the row's configuration at that {} (--columns {})",
                                fmt::join(groups, ", "), axis, axis));
  return t;
}

// Every column's legend line (the axes' and counts' where the preset gave none) and the notes.
Table with_legend(Table t, const Layout& l) {
  for (Column& c : t.columns) {
    if (!c.help.empty()) continue;
    const std::string key = c.key.empty() ? c.header : c.key;
    const auto& stats = stat_names();
    if (key == "samples") c.help = "samples aggregated in the row";
    else if (std::find(stats.begin(), stats.end(), key) != stats.end() || key == "wilson_low" || key == "wilson_high")
      c.help = stat_words(key) + " of the row's metric";
    else c.help = axis_help(key);
  }
  bool gold_rows = false;
  for (const auto& r : l.rows)
    if (r.entry->axes["path"].is_string())
      if (const PathSpec* p = find_path_or_null(r.entry->axes["path"].get<std::string>()); p && p->reference)
        gold_rows = gold_rows || axis_value_text(r.entry->axes.value("method", json(""))) != "exact";
  add_notes(t, gold_rows);
  return t;
}

Table build_table(const std::vector<NamedReport>& reports, const std::string& preset, TableLayout layout,
                  const std::string& columns) {
  if (preset == "full") {
    if (!columns.empty()) throw UsageError("--columns does not go with --preset full (a row per metric, a column per statistic)");
    return with_legend(full_table(reports, layout), lay_out(reports, ""));
  }
  const auto it = std::find_if(presets().begin(), presets().end(), [&](const Preset& p) { return p.name == preset; });
  if (it == presets().end()) {
    const std::string near = nearest_of(preset, table_presets());
    throw UsageError(fmt::format("unknown preset \"{}\"{}; presets: {}", preset,
                                 near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near),
                                 fmt::join(table_presets(), ", ")));
  }
  const Layout l = lay_out(reports, it->required_metric, it->approximate_paths_only, it->method_rows);
  if (!columns.empty()) return with_legend(pivot_table(l, *it, columns), l);
  switch (layout) {
    case TableLayout::kRows: return with_legend(rows_table(l, *it), l);
    case TableLayout::kTidy: return with_legend(tidy_table(l, *it), l);
    case TableLayout::kColumnGroups:
      if (auto t = grouped_table(l, *it)) return with_legend(*t, l);
      return with_legend(rows_table_with_samples(l, *it), l);
  }
  return with_legend(rows_table(l, *it), l);
}

}  // namespace chunkinv
