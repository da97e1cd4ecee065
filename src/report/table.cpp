#include "report/table.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "metrics/metrics.hpp"
#include "paths/path.hpp"

namespace chunkinv {

using nlohmann::json;

// ---------------------------------------------------------------- cells

Cell Cell::of_text(std::string t) {
  Cell c;
  c.kind = CellKind::kText;
  c.text = std::move(t);
  return c;
}
Cell Cell::number(double v) {
  Cell c;
  c.kind = CellKind::kNumber;
  c.value = v;
  return c;
}
Cell Cell::count(double v) {
  Cell c;
  c.kind = CellKind::kCount;
  c.value = v;
  return c;
}
Cell Cell::share(double p) {
  Cell c;
  c.kind = CellKind::kShare;
  c.value = p;
  return c;
}
Cell Cell::share(double p, double low, double high) {
  Cell c = share(p);
  c.has_interval = true;
  c.low = low;
  c.high = high;
  return c;
}
Cell Cell::power(double exponent) {
  Cell c;
  c.kind = CellKind::kPower;
  c.value = exponent;
  return c;
}

// ---------------------------------------------------------------- numbers

std::string format_sig3(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  // Round once to 3 significant digits, then choose the notation from the
  // rounded exponent (9.996 becomes 10.0, not 9.100e0).
  const std::string e = fmt::format("{:.2e}", v);  // "-8.80e-07"
  const size_t epos = e.find('e');
  const int exponent = std::stoi(e.substr(epos + 1));
  const std::string mantissa = e.substr(0, epos);
  if (exponent >= 0 && exponent <= 2) return fmt::format("{:.{}f}", std::stod(mantissa) * std::pow(10.0, exponent), 2 - exponent);
  return fmt::format("{}e{}", mantissa, exponent);
}

std::string format_percent(double p) {
  if (std::isnan(p)) return "nan";
  const double pct = 100.0 * p;
  if (pct == 100.0) return "100";
  if (pct == 0.0) return "0";
  // 3 significant digits, then more decimals while rounding would claim 100
  // or 0: a share of 99.96% must not read as "all finite".
  int decimals = pct >= 100 ? 0 : pct >= 10 ? 1 : pct >= 1 ? 2 : 3;
  if (pct < 1) decimals = std::max(2, 2 - static_cast<int>(std::floor(std::log10(pct))));
  std::string s = fmt::format("{:.{}f}", pct, decimals);
  while (decimals < 12 && ((p < 1 && std::stod(s) >= 100.0) || (p > 0 && std::stod(s) == 0.0))) {
    s = fmt::format("{:.{}f}", pct, ++decimals);
  }
  return s;
}

std::string format_full(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return fmt::format("{}", v);  // shortest representation that reads back exactly
}

namespace {

std::string format_count(double v) {
  if (!std::isfinite(v)) return format_full(v);
  if (v == std::floor(v) && std::fabs(v) < 9.0e15) return fmt::format("{}", static_cast<long long>(v));
  return format_sig3(v);
}

// ---------------------------------------------------------------- formatters

// Each format supplies how a cell, a header and the surrounding rules look;
// the layout is the table's.
struct Style {
  std::function<std::string(const Cell&)> cell;
  std::function<std::string(const Column&)> header;
};

std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string md_cell(const Cell& c) {
  switch (c.kind) {
    case CellKind::kEmpty: return "-";
    case CellKind::kText: return md_escape(c.text);
    case CellKind::kNumber: return format_sig3(c.value);
    case CellKind::kCount: return format_count(c.value);
    case CellKind::kPower: return "L^" + format_count(c.value);
    case CellKind::kShare:
      if (!c.has_interval) return format_percent(c.value) + "%";
      return fmt::format("{}% [{}, {}]", format_percent(c.value), format_percent(c.low), format_percent(c.high));
  }
  return "";
}

std::string latex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\textbackslash{}"; break;
      case '~': out += "\\textasciitilde{}"; break;
      case '^': out += "\\textasciicircum{}"; break;
      case '|': out += "\\textbar{}"; break;
      case '<': out += "\\textless{}"; break;
      case '>': out += "\\textgreater{}"; break;
      case '&': case '%': case '$': case '#': case '_': case '{': case '}':
        out += '\\';
        out += c;
        break;
      default: out += c;
    }
  }
  return out;
}

// Numbers go through siunitx's \num so that a column of them typesets as
// 8.80 x 10^-7; infinity is the symbol.
std::string latex_number(const std::string& s) {
  if (s == "inf") return "$\\infty$";
  if (s == "-inf") return "$-\\infty$";
  if (s == "nan") return "NaN";
  return "\\num{" + s + "}";
}

std::string latex_cell(const Cell& c) {
  switch (c.kind) {
    case CellKind::kEmpty: return "--";
    case CellKind::kText: return latex_escape(c.text);
    case CellKind::kNumber: return latex_number(format_sig3(c.value));
    case CellKind::kCount: return latex_number(format_count(c.value));
    case CellKind::kPower: return "$L^{" + format_count(c.value) + "}$";
    case CellKind::kShare:
      if (!c.has_interval) return format_percent(c.value) + "\\%";
      return fmt::format("{}\\% [{}, {}]", format_percent(c.value), format_percent(c.low), format_percent(c.high));
  }
  return "";
}

std::string csv_quote(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// CSV is for machines: full precision, shares as fractions, a power as its
// exponent; a share's interval gets two columns of its own (see csv_columns).
std::string csv_value(const Cell& c) {
  switch (c.kind) {
    case CellKind::kEmpty: return "";
    case CellKind::kText: return csv_quote(c.text);
    case CellKind::kNumber: case CellKind::kCount: case CellKind::kShare: case CellKind::kPower:
      return format_full(c.value);
  }
  return "";
}

// Pads every cell of a column to one width (Markdown reads well raw, too).
std::vector<size_t> widths(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& body) {
  std::vector<size_t> w(header.size(), 0);
  for (size_t j = 0; j < header.size(); ++j) w[j] = header[j].size();
  for (const auto& row : body) {
    for (size_t j = 0; j < row.size(); ++j) w[j] = std::max(w[j], row[j].size());
  }
  return w;
}

std::string pad(const std::string& s, size_t width, Align a) {
  const std::string fill(width > s.size() ? width - s.size() : 0, ' ');
  return a == Align::kLeft ? s + fill : fill + s;
}

std::vector<std::vector<std::string>> render_body(const Table& t, const std::function<std::string(const Cell&)>& f) {
  std::vector<std::vector<std::string>> body;
  for (const auto& row : t.rows) {
    std::vector<std::string> r;
    for (const auto& c : row) r.push_back(f(c));
    body.push_back(std::move(r));
  }
  return body;
}

void check_shape(const Table& t) {
  for (const auto& row : t.rows) {
    if (row.size() != t.columns.size()) throw std::logic_error("table row has the wrong number of cells");
  }
}

}  // namespace

std::string to_markdown(const Table& t) {
  check_shape(t);
  std::vector<std::string> header;
  for (const auto& c : t.columns) header.push_back(md_escape(c.header));
  const auto body = render_body(t, md_cell);
  auto w = widths(header, body);
  for (auto& x : w) x = std::max<size_t>(x, 3);
  std::string out = "|";
  // Appended piece by piece: GCC 12 warns (-Wrestrict, falsely) on " " + std::string.
  for (size_t j = 0; j < header.size(); ++j) {
    out += ' ';
    out += pad(header[j], w[j], t.columns[j].align);
    out += " |";
  }
  out += "\n|";
  for (size_t j = 0; j < header.size(); ++j) {
    const bool left = t.columns[j].align == Align::kLeft;
    if (left) out += ':';
    out += std::string(w[j] + 1, '-');
    if (!left) out += ':';
    out += '|';
  }
  out += "\n";
  for (const auto& row : body) {
    out += "|";
    for (size_t j = 0; j < row.size(); ++j) {
      out += ' ';
      out += pad(row[j], w[j], t.columns[j].align);
      out += " |";
    }
    out += "\n";
  }
  return out;
}

std::string to_latex(const Table& t) {
  check_shape(t);
  std::string spec;
  for (const auto& c : t.columns) spec += c.align == Align::kLeft ? 'l' : 'r';
  std::vector<std::string> header;
  for (const auto& c : t.columns) header.push_back(c.latex_header.empty() ? latex_escape(c.header) : c.latex_header);
  const auto body = render_body(t, latex_cell);
  auto line = [](const std::vector<std::string>& cells) {
    std::string s;
    for (size_t j = 0; j < cells.size(); ++j) s += (j ? " & " : "") + cells[j];
    return s + " \\\\\n";
  };
  // Needs \usepackage{booktabs} and \usepackage{siunitx}.
  std::string out = "\\begin{tabular}{" + spec + "}\n\\toprule\n" + line(header) + "\\midrule\n";
  for (const auto& row : body) out += line(row);
  out += "\\bottomrule\n\\end{tabular}\n";
  return out;
}

std::string to_csv(const Table& t) {
  check_shape(t);
  // A column holding share intervals gets "<header> low" and "<header> high" beside it.
  std::vector<bool> interval(t.columns.size(), false);
  for (const auto& row : t.rows) {
    for (size_t j = 0; j < row.size(); ++j) interval[j] = interval[j] || row[j].has_interval;
  }
  std::string out;
  auto emit = [&out](const std::vector<std::string>& cells) {
    for (size_t j = 0; j < cells.size(); ++j) out += (j ? "," : "") + cells[j];
    out += "\n";
  };
  std::vector<std::string> header;
  for (size_t j = 0; j < t.columns.size(); ++j) {
    header.push_back(csv_quote(t.columns[j].header));
    if (interval[j]) {
      header.push_back(csv_quote(t.columns[j].header + " low"));
      header.push_back(csv_quote(t.columns[j].header + " high"));
    }
  }
  emit(header);
  for (const auto& row : t.rows) {
    std::vector<std::string> cells;
    for (size_t j = 0; j < row.size(); ++j) {
      cells.push_back(csv_value(row[j]));
      if (interval[j]) {
        cells.push_back(row[j].has_interval ? format_full(row[j].low) : "");
        cells.push_back(row[j].has_interval ? format_full(row[j].high) : "");
      }
    }
    emit(cells);
  }
  return out;
}

TableFormat parse_table_format(const std::string& name) {
  if (name == "md" || name == "markdown") return TableFormat::kMarkdown;
  if (name == "latex" || name == "tex") return TableFormat::kLatex;
  if (name == "csv") return TableFormat::kCsv;
  const std::string near = nearest(name, {"md", "markdown", "latex", "tex", "csv"});
  throw UsageError(fmt::format("unknown table format \"{}\"{}; formats: md, latex, csv", name,
                               near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
}

std::string format_table(const Table& t, TableFormat f) {
  switch (f) {
    case TableFormat::kMarkdown: return to_markdown(t);
    case TableFormat::kLatex: return to_latex(t);
    case TableFormat::kCsv: return to_csv(t);
  }
  return "";
}

// ---------------------------------------------------------------- axes

std::string axis_value_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number()) return format_full(v.get<double>());
  return v.dump();
}

std::string axes_key(const json& axes) {
  // nlohmann's objects iterate in key order; numbers are written as doubles
  // so that an integer and the equal float give one key.
  std::string key;
  for (const auto& [k, v] : axes.items()) {
    key += k + "=";
    if (v.is_number()) {
      key += "n:" + format_full(v.get<double>());
    } else {
      key += "j:" + v.dump();
    }
    key += ";";
  }
  return key;
}

std::string axes_label(const json& axes) {
  std::string s = axes.contains("family") ? axis_value_text(axes["family"]) : std::string("?");
  if (axes.contains("chunk")) s += " chunk=" + axis_value_text(axes["chunk"]);
  for (const auto& [k, v] : axes.items()) {
    if (k == "family" || k == "chunk" || k == "path") continue;
    s += " " + k + "=" + axis_value_text(v);
  }
  return s;
}

// ---------------------------------------------------------------- presets

namespace {

struct Row {
  const ReportEntry* entry;
  std::string report;
};

const Stats* find_stats(const ReportEntry& e, const std::string& metric) {
  const auto it = e.metrics.find(metric);
  return it == e.metrics.end() ? nullptr : &it->second;
}

// A column of a preset: its header and how to fill it from one entry.
struct ColumnSpec {
  Column column;
  std::function<Cell(const ReportEntry&)> fill;
};

ColumnSpec share_of(std::string header, std::string metric, bool interval) {
  return {{std::move(header), Align::kRight, ""}, [metric, interval](const ReportEntry& e) {
            const Stats* s = find_stats(e, metric);
            if (!s) return Cell::empty();
            if (interval && s->has_wilson) return Cell::share(s->mean, s->wilson_low, s->wilson_high);
            return Cell::share(s->mean);
          }};
}

ColumnSpec stat_of(std::string header, std::string metric, std::string stat, CellKind kind, std::string latex = "") {
  return {{std::move(header), Align::kRight, std::move(latex)}, [metric, stat, kind](const ReportEntry& e) {
            const Stats* s = find_stats(e, metric);
            if (!s) return Cell::empty();
            const double v = stat_value(*s, stat);
            if (kind == CellKind::kCount) return Cell::count(v);
            if (kind == CellKind::kPower) return Cell::power(v);
            return Cell::number(v);
          }};
}

struct Preset {
  std::string name;
  // Entries without this metric (the gold's own entry) are left out of the table.
  std::string required_metric;
  std::vector<ColumnSpec> columns;
  // The article's tables show the approximate paths: methods on the gold's
  // L appear in summary and full, and as the "INV power" column here.
  bool approximate_paths_only = false;
};

// The article's three tables (SPEC §5): errors are medians, non-finite
// counts and power magnitudes the worst sample, "finite" the share of
// samples with a finite inverse.
const std::vector<Preset>& presets() {
  static const std::vector<Preset> p = [] {
    const std::string inv = "inv_total_rel_rmse";
    std::vector<Preset> v;
    v.push_back({"summary", inv,
                 {{{"Samples", Align::kRight, ""}, [](const ReportEntry& e) { return Cell::count(static_cast<double>(e.samples)); }},
                  share_of("Finite [95% CI]", "inv_finite", true),
                  stat_of("L median", "l_rel_rmse", "median", CellKind::kNumber),
                  stat_of("INV total median", inv, "median", CellKind::kNumber),
                  stat_of("INV total p99", inv, "p99", CellKind::kNumber),
                  stat_of("Method only median", "inv_method_only_rel_rmse", "median", CellKind::kNumber),
                  stat_of("INV power median", "inv_gold_l_rel_rmse", "median", CellKind::kNumber),
                  stat_of("INV power p99", "inv_gold_l_rel_rmse", "p99", CellKind::kNumber)}});
    v.push_back({"k3-exponent", inv,
                 {share_of("inverse finite", "inv_finite", false),
                  stat_of("decay = 0", "decay_zeros", "max", CellKind::kCount, "decay $= 0$"),
                  stat_of("reciprocal = inf", "inv_decay_nonfinite", "max", CellKind::kCount, "reciprocal $= \\infty$"),
                  stat_of("INV total", inv, "median", CellKind::kNumber),
                  stat_of("INV power", "inv_gold_l_rel_rmse", "median", CellKind::kNumber)},
                 true});
    v.push_back({"k3-stress", inv,
                 {stat_of("Highest power formed", "gold_l_highest_power", "max", CellKind::kPower),
                  stat_of("Max power magnitude", "gold_l_power_max", "max", CellKind::kNumber),
                  stat_of("INV total", inv, "median", CellKind::kNumber),
                  stat_of("INV power", "inv_gold_l_rel_rmse", "median", CellKind::kNumber),
                  share_of("Finite", "inv_finite", false)},
                 true});
    v.push_back({"k3-model", inv,
                 {share_of("Finite", "inv_finite", false), stat_of("INV total", inv, "median", CellKind::kNumber),
                  stat_of("INV power", "inv_gold_l_rel_rmse", "median", CellKind::kNumber),
                  stat_of("Max power magnitude", "gold_l_power_max", "max", CellKind::kNumber)},
                 true});
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
  std::vector<std::string> axis_columns;  // family first, then other axes by name
  bool show_path = false;
  bool show_report = false;
  std::vector<Row> rows;
};

Layout lay_out(const std::vector<NamedReport>& reports, const std::string& required_metric,
               bool approximate_paths_only = false) {
  Layout l;
  std::map<std::string, int> family_rank, path_rank;
  std::map<std::string, int> key_count;
  for (const auto& r : reports) {
    for (const auto& e : r.report.results) {
      if (!required_metric.empty() && !find_stats(e, required_metric)) continue;
      if (approximate_paths_only && e.axes["path"].is_string())
        if (const PathSpec* p = find_path_or_null(e.axes["path"].get<std::string>()); p && p->reference) continue;
      l.rows.push_back({&e, r.name});
      const std::string fam = e.axes.contains("family") ? axis_value_text(e.axes["family"]) : "";
      const std::string path = axis_value_text(e.axes["path"]);
      family_rank.emplace(fam, static_cast<int>(family_rank.size()));
      path_rank.emplace(path, static_cast<int>(path_rank.size()));
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
  std::vector<std::string> ordered;
  if (names.count("family")) ordered.push_back("family");
  for (const auto& n : names) {
    if (n != "family") ordered.push_back(n);
  }
  for (const auto& n : ordered) {
    std::set<std::string> values;
    for (const auto& row : l.rows) {
      values.insert(row.entry->axes.contains(n) ? axes_key(json{{"v", row.entry->axes[n]}}) : "<absent>");
    }
    if (values.size() > 1) l.axis_columns.push_back(n);
  }

  auto fam = [&](const Row& r) {
    return family_rank.at(r.entry->axes.contains("family") ? axis_value_text(r.entry->axes["family"]) : "");
  };
  std::stable_sort(l.rows.begin(), l.rows.end(), [&](const Row& a, const Row& b) {
    if (fam(a) != fam(b)) return fam(a) < fam(b);
    for (const auto& n : ordered) {
      if (n == "family") continue;
      const bool ha = a.entry->axes.contains(n), hb = b.entry->axes.contains(n);
      if (ha != hb) return ha;
      if (!ha) continue;
      const int c = compare_json_values(a.entry->axes[n], b.entry->axes[n]);
      if (c != 0) return c < 0;
    }
    const int pa = path_rank.at(axis_value_text(a.entry->axes["path"]));
    const int pb = path_rank.at(axis_value_text(b.entry->axes["path"]));
    if (pa != pb) return pa < pb;
    const json ca = a.entry->axes.value("chunk", json(0)), cb = b.entry->axes.value("chunk", json(0));
    return compare_json_values(ca, cb) < 0;
  });
  return l;
}

// The leading columns of every row: varying axes, path, report, chunk.
std::vector<Column> leading_columns(const Layout& l) {
  std::vector<Column> c;
  for (const auto& n : l.axis_columns) c.push_back({n, n == "family" ? Align::kLeft : Align::kRight, ""});
  if (l.show_path) c.push_back({"path", Align::kLeft, ""});
  if (l.show_report) c.push_back({"report", Align::kLeft, ""});
  c.push_back({"Chunk C", Align::kRight, "Chunk $C$"});
  return c;
}

std::vector<Cell> leading_cells(const Layout& l, const Row& r) {
  std::vector<Cell> c;
  for (const auto& n : l.axis_columns) {
    c.push_back(r.entry->axes.contains(n) ? Cell::of_text(axis_value_text(r.entry->axes[n])) : Cell::empty());
  }
  if (l.show_path) c.push_back(Cell::of_text(axis_value_text(r.entry->axes["path"])));
  if (l.show_report) c.push_back(Cell::of_text(r.report));
  const json chunk = r.entry->axes.value("chunk", json());
  c.push_back(chunk.is_number() ? Cell::count(chunk.get<double>())
              : chunk.is_null() ? Cell::empty()
                                : Cell::of_text(axis_value_text(chunk)));
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
Table full_table(const std::vector<NamedReport>& reports) {
  const Layout l = lay_out(reports, "");
  Table t;
  t.columns = leading_columns(l);
  t.columns.push_back({"metric", Align::kLeft, ""});
  t.columns.push_back({"samples", Align::kRight, ""});
  for (const auto& s : stat_names()) t.columns.push_back({s, Align::kRight, ""});
  t.columns.push_back({"wilson_low", Align::kRight, ""});
  t.columns.push_back({"wilson_high", Align::kRight, ""});
  for (const auto& r : l.rows) {
    for (const auto& name : metric_order(*r.entry)) {
      const Stats& s = r.entry->metrics.at(name);
      const MetricInfo* info = find_metric(name);
      const bool integral = info && (info->kind == MetricKind::kCount || info->kind == MetricKind::kFlag);
      auto row = leading_cells(l, r);
      row.push_back(Cell::of_text(name));
      row.push_back(Cell::count(static_cast<double>(r.entry->samples)));
      for (const auto& stat : stat_names()) {
        const double v = stat_value(s, stat);
        const bool as_count = stat == "finite_count" || (integral && std::isfinite(v) && v == std::floor(v) && stat != "mean");
        row.push_back(as_count ? Cell::count(v) : Cell::number(v));
      }
      row.push_back(s.has_wilson ? Cell::number(s.wilson_low) : Cell::empty());
      row.push_back(s.has_wilson ? Cell::number(s.wilson_high) : Cell::empty());
      t.rows.push_back(std::move(row));
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

Table build_table(const std::vector<NamedReport>& reports, const std::string& preset) {
  if (preset == "full") return full_table(reports);
  const auto it = std::find_if(presets().begin(), presets().end(), [&](const Preset& p) { return p.name == preset; });
  if (it == presets().end()) {
    const std::string near = nearest_of(preset, table_presets());
    throw UsageError(fmt::format("unknown preset \"{}\"{}; presets: {}", preset,
                                 near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near),
                                 fmt::join(table_presets(), ", ")));
  }
  const Layout l = lay_out(reports, it->required_metric, it->approximate_paths_only);
  Table t;
  t.columns = leading_columns(l);
  for (const auto& c : it->columns) t.columns.push_back(c.column);
  for (const auto& r : l.rows) {
    auto row = leading_cells(l, r);
    for (const auto& c : it->columns) row.push_back(c.fill(*r.entry));
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace chunkinv
