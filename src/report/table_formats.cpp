// The table model's cells and numbers, the three formatters (Markdown,
// LaTeX, CSV: each decides how a cell, a header and a rule look) and the
// axis texts every table shares (report/table.hpp).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>

#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/text.hpp"
#include "report/table.hpp"

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
Cell Cell::too_few(double needed) {
  Cell c;
  c.kind = CellKind::kTooFew;
  c.value = needed;
  return c;
}

uint64_t samples_needed(const std::string& stat) {
  if (stat == "p10" || stat == "p90") return 10;
  if (stat == "p99") return 100;
  if (stat == "p999") return 1000;
  if (stat == "p999999") return 1000000;
  return 1;
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

// 100, 1000, 10^6: the samples a quantile needs.
std::string too_few_text(double needed) {
  return needed >= 1e6 ? fmt::format("10^{}", static_cast<int>(std::lround(std::log10(needed)))) : format_count(needed);
}

// Every text of a table passes printable() first: a newline or a byte
// that is not UTF-8 (a file name's) would split a row or the file.
std::string md_escape(const std::string& s) {
  std::string out;
  for (char c : printable(s)) {
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
    case CellKind::kTooFew: return "n<" + too_few_text(c.value);
    case CellKind::kShare:
      if (!c.has_interval) return format_percent(c.value) + "%";
      return fmt::format("{}% [{}, {}]", format_percent(c.value), format_percent(c.low), format_percent(c.high));
  }
  return "";
}

std::string latex_escape(const std::string& s) {
  std::string out;
  for (char c : printable(s)) {
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
    case CellKind::kTooFew: return "$n<" + too_few_text(c.value) + "$";
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
  if (c.kind == CellKind::kTooFew) return "{" + latex_cell(c) + "}";
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

std::string csv_quote(const std::string& text) {
  const std::string s = printable(text);
  if (s.find_first_of(",\"") == std::string::npos) return s;
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
    case CellKind::kEmpty: case CellKind::kTooFew: return "";  // machines read the sample count
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

std::string format_legend(const Table& t, TableFormat f) {
  std::vector<std::string> lines;
  std::vector<std::string> seen;
  for (const Column& c : t.columns) {
    if (c.help.empty() || std::find(seen.begin(), seen.end(), c.header) != seen.end()) continue;
    seen.push_back(c.header);
    lines.push_back(c.header + ": " + c.help);
  }
  lines.insert(lines.end(), t.notes.begin(), t.notes.end());
  const std::string lead = f == TableFormat::kLatex ? "% " : f == TableFormat::kCsv ? "# " : "- ";
  std::string out = f == TableFormat::kMarkdown ? "\n" : "";
  for (const auto& l : lines) out += lead + l + "\n";
  return out;
}

bool want_legend(bool legend, bool no_legend, bool to_stdout) {
  if (legend && no_legend) throw UsageError("--legend and --no-legend: give one of them");
  if (legend || no_legend) return legend;
  return to_stdout && ::isatty(STDOUT_FILENO);
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

}  // namespace chunkinv
