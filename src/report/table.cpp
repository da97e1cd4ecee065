#include "report/table.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

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

// Text and powers in LaTeX; numbers go into siunitx S columns (latex_s_cell).
std::string latex_cell(const Cell& c) {
  switch (c.kind) {
    case CellKind::kEmpty: return "--";
    case CellKind::kText: return latex_escape(c.text);
    case CellKind::kPower: return "$L^{" + format_count(c.value) + "}$";
    case CellKind::kNumber: case CellKind::kCount: case CellKind::kShare: break;
  }
  return "";
}

// Text that is a plain decimal number ("-5", "0.01", "1e-3"): an axis value.
bool plain_number(const std::string& s) {
  size_t i = s.empty() || s[0] != '-' ? 0 : 1;
  const size_t digits_from = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  if (i == digits_from) return false;
  if (i < s.size() && s[i] == '.') {
    const size_t from = ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == from) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    if (++i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    const size_t from = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == from) return false;
  }
  return i == s.size();
}

// The number an S column parses ("8.80e-7", "15", a share as "94.0", an
// axis value as given), or "" when the cell holds none (empty, non-finite).
std::string latex_bare_number(const Cell& c) {
  std::string s;
  switch (c.kind) {
    case CellKind::kNumber: s = format_sig3(c.value); break;
    case CellKind::kCount: s = format_count(c.value); break;
    case CellKind::kShare: s = format_percent(c.value); break;
    case CellKind::kText: return plain_number(c.text) ? c.text : "";
    default: return "";
  }
  return std::isfinite(c.value) ? s : "";
}

// A cell of an S column: the bare number, or text in braces (siunitx does
// not parse it): infinity is the symbol, never a number.
std::string latex_s_cell(const Cell& c) {
  const std::string bare = latex_bare_number(c);
  if (!bare.empty()) return bare;
  if (c.kind == CellKind::kEmpty) return "{--}";
  if (std::isnan(c.value)) return "{NaN}";
  return c.value > 0 ? "{$\\infty$}" : "{$-\\infty$}";
}

// siunitx's table-format that holds every number of a column: sign, integer
// and decimal digits, exponent ("-3.2e-1" holds -532, 8.80e-7 and 1.33).
std::string siunitx_format(const std::vector<std::string>& numbers) {
  size_t ints = 1, decimals = 0, exponent = 0;
  bool negative = false, negative_exponent = false;
  for (const auto& s : numbers) {
    size_t i = 0;
    if (!s.empty() && s[0] == '-') {
      negative = true;
      i = 1;
    }
    const size_t e = s.find('e');
    const std::string mantissa = s.substr(i, e == std::string::npos ? std::string::npos : e - i);
    const size_t dot = mantissa.find('.');
    ints = std::max(ints, dot == std::string::npos ? mantissa.size() : dot);
    if (dot != std::string::npos) decimals = std::max(decimals, mantissa.size() - dot - 1);
    if (e != std::string::npos) {
      std::string ex = s.substr(e + 1);
      if (!ex.empty() && (ex[0] == '-' || ex[0] == '+')) {
        negative_exponent = negative_exponent || ex[0] == '-';
        ex.erase(0, 1);
      }
      exponent = std::max(exponent, ex.size());
    }
  }
  std::string f = fmt::format("{}{}", negative ? "-" : "", ints);
  if (decimals > 0) f += fmt::format(".{}", decimals);
  if (exponent > 0) f += fmt::format("e{}{}", negative_exponent ? "-" : "", exponent);
  return f;
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
  for (const auto& c : t.columns) header.push_back(md_escape(c.group.empty() ? c.header : c.group + ": " + c.header));
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

namespace {

// One LaTeX column: a table column, or the interval beside a share.
struct LatexColumn {
  size_t source;
  bool interval;
  std::string spec;  // S[table-format=...], c, l or r
};

// A column of numbers (numeric axis values included) is an S column.
bool numeric_column(const Table& t, size_t j) {
  bool any = false;
  for (const auto& row : t.rows) {
    const Cell& c = row[j];
    if (c.kind == CellKind::kPower || (c.kind == CellKind::kText && !plain_number(c.text))) return false;
    any = any || c.kind != CellKind::kEmpty;
  }
  return any;
}

std::string latex_title(const Column& c) { return c.latex_header.empty() ? latex_escape(c.header) : c.latex_header; }

// A header row: spans of LaTeX columns, each a \\multicolumn or its columns
// left blank, with a \\cmidrule under each span that asks for one.
struct Span {
  size_t first, count;
  std::string text;
  bool rule;
};

std::string header_row(const std::vector<Span>& spans) {
  std::vector<std::string> cells;
  std::string rules;
  for (const Span& sp : spans) {
    if (sp.text.empty()) {
      cells.insert(cells.end(), sp.count, "");
      continue;
    }
    cells.push_back(sp.count == 1 ? sp.text : fmt::format("\\multicolumn{{{}}}{{c}}{{{}}}", sp.count, sp.text));
    if (sp.rule) rules += fmt::format("\\cmidrule(lr){{{}-{}}}", sp.first + 1, sp.first + sp.count);
  }
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i) line += line.empty() ? "&" : " &";
    if (!cells[i].empty()) line += (i ? " " : "") + cells[i];
  }
  return line + " \\\\\n" + (rules.empty() ? "" : rules + "\n");
}

}  // namespace

std::string to_latex(const Table& t) {
  check_shape(t);
  // Columns: numbers in siunitx S columns aligned on the decimal marker, a
  // share's interval in a column of its own, text left or right.
  std::vector<LatexColumn> cols;
  std::vector<std::vector<size_t>> of_source(t.columns.size());
  for (size_t j = 0; j < t.columns.size(); ++j) {
    bool interval = false;
    for (const auto& row : t.rows) interval = interval || row[j].has_interval;
    std::string spec = t.columns[j].align == Align::kLeft ? "l" : "r";
    if (numeric_column(t, j)) {
      std::vector<std::string> numbers;
      for (const auto& row : t.rows) {
        if (const std::string b = latex_bare_number(row[j]); !b.empty()) numbers.push_back(b);
      }
      spec = "S[table-format=" + siunitx_format(numbers) + "]";
    }
    of_source[j].push_back(cols.size());
    cols.push_back({j, false, spec});
    if (interval) {
      of_source[j].push_back(cols.size());
      cols.push_back({j, true, "c"});
    }
  }
  const auto braced = [&](size_t lc, const std::string& text) {
    return cols[lc].spec[0] == 'S' && !text.empty() ? "{" + text + "}" : text;
  };

  // Header: (1) groups and sample counts, (2) titles, (3) statistics; a
  // column without a statistic (an axis) has its title on the last line.
  bool any_stat = false;
  for (const auto& c : t.columns) any_stat = any_stat || !c.stat.empty();
  std::string head;
  {
    std::vector<Span> spans;
    bool any = false;
    for (size_t j = 0; j < t.columns.size();) {
      size_t k = j;
      size_t width = 0;
      while (k < t.columns.size() && t.columns[k].group == t.columns[j].group &&
             t.columns[k].samples == t.columns[j].samples) {
        width += of_source[k].size();
        ++k;
      }
      std::string text = latex_escape(t.columns[j].group);
      if (t.columns[j].samples > 0) text += (text.empty() ? "" : ", ") + fmt::format("$n = {}$", t.columns[j].samples);
      any = any || !text.empty();
      spans.push_back({of_source[j].front(), width, text, true});
      j = k;
    }
    if (any) head += header_row(spans);
  }
  if (any_stat) {
    std::vector<Span> spans;
    for (size_t j = 0; j < t.columns.size();) {
      size_t k = j + 1, width = of_source[j].size();
      const std::string title = t.columns[j].stat.empty() ? "" : latex_title(t.columns[j]);
      while (!title.empty() && k < t.columns.size() && !t.columns[k].stat.empty() &&
             latex_title(t.columns[k]) == title && t.columns[k].group == t.columns[j].group) {
        width += of_source[k].size();
        ++k;
      }
      spans.push_back({of_source[j].front(), width, width == 1 ? braced(of_source[j].front(), title) : title, width > 1});
      j = k;
    }
    head += header_row(spans);
  }
  {
    std::vector<Span> spans;
    for (size_t j = 0; j < t.columns.size(); ++j) {
      const Column& c = t.columns[j];
      const std::string text = !any_stat || c.stat.empty() ? latex_title(c) : c.stat;
      spans.push_back({of_source[j].front(), 1, braced(of_source[j].front(), text), false});
      if (of_source[j].size() > 1) spans.push_back({of_source[j].back(), 1, "95\\% CI", false});
    }
    head += header_row(spans);
  }

  std::string spec;
  for (const auto& c : cols) spec += c.spec;
  std::string out = "\\begin{tabular}{" + spec + "}\n\\toprule\n" + head + "\\midrule\n";
  for (const auto& row : t.rows) {
    std::string line;
    for (size_t lc = 0; lc < cols.size(); ++lc) {
      const Cell& c = row[cols[lc].source];
      std::string cell;
      if (cols[lc].interval) {
        cell = c.has_interval ? fmt::format("[{}, {}]", format_percent(c.low), format_percent(c.high)) : "";
      } else {
        cell = cols[lc].spec[0] == 'S' ? latex_s_cell(c) : latex_cell(c);
      }
      line += (lc ? " & " : "") + cell;
    }
    out += line + " \\\\\n";
  }
  // Needs \usepackage{booktabs} and \usepackage{siunitx}.
  out += "\\bottomrule\n\\end{tabular}\n";
  if (t.caption.empty() && t.label.empty()) return out;
  std::string fl = "\\begin{table}[tbp]\n\\centering\n";
  if (!t.caption.empty()) fl += "\\caption{" + t.caption + "}\n";
  if (!t.label.empty()) fl += "\\label{" + t.label + "}\n";
  return fl + out + "\\end{table}\n";
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
    const Column& c = t.columns[j];
    header.push_back(csv_quote(c.key.empty() ? c.header : c.key));
    if (interval[j]) {
      header.push_back(csv_quote(c.interval_key.empty() ? c.header + " low" : c.interval_key + "_low"));
      header.push_back(csv_quote(c.interval_key.empty() ? c.header + " high" : c.interval_key + "_high"));
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

Column column_of(const ColumnSpec& c) {
  Column col{c.header, Align::kRight, c.title};
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

Cell fill(const ColumnSpec& c, const ReportEntry& e) {
  if (c.metric.empty()) return Cell::count(static_cast<double>(e.samples));
  const Stats* s = find_stats(e, c.metric);
  if (!s) return Cell::empty();
  if (c.kind == CellKind::kShare) {
    return c.interval && s->has_wilson ? Cell::share(s->mean, s->wilson_low, s->wilson_high) : Cell::share(s->mean);
  }
  if (!has_stat(*s, c.stat)) return Cell::empty();
  const double v = stat_value(*s, c.stat);
  if (c.kind == CellKind::kCount) return Cell::count(v);
  if (c.kind == CellKind::kPower) return Cell::power(v);
  return Cell::number(v);
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
  c.push_back(chunk_column());
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
  c.push_back(chunk_cell(r));
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
        row.push_back(as_count ? Cell::count(v) : Cell::number(v));
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

Table build_table(const std::vector<NamedReport>& reports, const std::string& preset, TableLayout layout) {
  if (preset == "full") return full_table(reports, layout);
  const auto it = std::find_if(presets().begin(), presets().end(), [&](const Preset& p) { return p.name == preset; });
  if (it == presets().end()) {
    const std::string near = nearest_of(preset, table_presets());
    throw UsageError(fmt::format("unknown preset \"{}\"{}; presets: {}", preset,
                                 near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near),
                                 fmt::join(table_presets(), ", ")));
  }
  const Layout l = lay_out(reports, it->required_metric, it->approximate_paths_only, it->method_rows);
  switch (layout) {
    case TableLayout::kRows: return rows_table(l, *it);
    case TableLayout::kTidy: return tidy_table(l, *it);
    case TableLayout::kColumnGroups:
      if (auto t = grouped_table(l, *it)) return *t;
      return rows_table_with_samples(l, *it);
  }
  return rows_table(l, *it);
}

}  // namespace chunkinv
