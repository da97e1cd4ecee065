// One table model, thin formatters (Markdown, LaTeX, CSV), and the presets
// that lay a report's aggregates out as tables (docs/tables.md).
//
// A formatter only decides how one cell, one header and one rule look; the
// layout (which columns, which rows, in which order) is decided once, here,
// for every format.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "report/report.hpp"

namespace chunkinv {

enum class Align { kLeft, kRight };

// What a cell holds. Numbers are shown with 3 significant digits in Markdown
// and LaTeX and at full precision in CSV.
enum class CellKind {
  kEmpty,   // no value (metric absent from this entry)
  kText,    // free text, escaped per format
  kNumber,  // a real value, possibly +-inf or nan
  kCount,   // a non-negative integer
  kShare,   // a share in [0,1], shown as a percentage, optionally with an interval
  kPower,   // the exponent p of a matrix power L^p
  kTooFew,  // a quantile the sample count does not support; value: the samples it needs
};

struct Cell {
  CellKind kind = CellKind::kEmpty;
  std::string text;
  double value = 0;  // number, count, share, exponent
  bool has_interval = false;
  double low = 0, high = 0;  // share interval

  static Cell empty() { return {}; }
  static Cell of_text(std::string t);
  static Cell number(double v);
  static Cell count(double v);  // a double so that an aggregate's max can be passed as is
  static Cell share(double p);
  static Cell share(double p, double low, double high);
  static Cell power(double exponent);
  static Cell too_few(double needed);
};

// The samples a quantile needs to be more than the extreme values
// interpolated: 1/(1-q) for an upper one (p99: 100, p99.9: 1000,
// p99.9999: 10^6), 1/q for a lower one (p10: 10); 1 for every other statistic.
// Tables show "n<100" instead of a quantile of fewer samples.
uint64_t samples_needed(const std::string& stat);

struct Column {
  std::string header;
  Align align = Align::kRight;
  std::string latex_header;  // if set, used verbatim by the LaTeX formatter
  // CSV's snake_case name (`inv_total_rel_rmse_median`); empty: the header.
  std::string key{};
  // The statistic the column shows, LaTeX's second header line ("median",
  // "max", "\%"); verbatim LaTeX.
  std::string stat{};
  // Consecutive columns of one group (a path and method) share a spanning
  // LaTeX header; Markdown prefixes the header with it.
  std::string group{};
  // The sample count behind every cell of the column, 0 when it varies or
  // does not apply; LaTeX writes it over the column ("$n = 1000$").
  uint64_t samples = 0;
  // CSV names of a share's interval: `<interval_key>_low`, `_high`
  // (empty: "<header> low", "<header> high").
  std::string interval_key{};
  // The legend's line for the column: what it shows, in words.
  std::string help{};
};

struct Table {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;  // each row has one cell per column
  // LaTeX only: with either, the tabular goes into a table float with
  // \caption (verbatim LaTeX) and \label.
  std::string caption, label;
  // Legend lines beyond the columns' (a mark a cell uses, the pivot).
  std::vector<std::string> notes;
};

enum class TableFormat { kMarkdown, kLatex, kCsv };
// "md" / "markdown", "latex" / "tex", "csv"; UsageError naming the nearest otherwise.
TableFormat parse_table_format(const std::string& name);

// How a preset's rows and columns are laid out (docs/tables.md):
// - kRows: one row per configuration, path and method; an axis gets a
//   column only where it varies (Markdown, the article's tables);
// - kColumnGroups: one row per configuration, each path (and method) a group
//   of columns, where they fit (at most kMaxGroupedColumns value columns);
//   otherwise kRows. The sample count goes into the headers, or into a column
//   where it varies. For LaTeX;
// - kTidy: one row per configuration, path and method (and metric for
//   `full`), every axis a column, snake_case names. For CSV.
enum class TableLayout { kRows, kColumnGroups, kTidy };
inline constexpr size_t kMaxGroupedColumns = 12;
TableLayout layout_for(TableFormat f);

std::string to_markdown(const Table& t);
std::string to_latex(const Table& t);
std::string to_csv(const Table& t);
std::string format_table(const Table& t, TableFormat f);
// The legend under a table: one line per column (each header once), then
// the notes. Markdown a list, LaTeX `%` comments, CSV `#` lines.
std::string format_legend(const Table& t, TableFormat f);
// Whether to print a legend: --legend, --no-legend, else when stdout is a
// terminal and the table goes there.
bool want_legend(bool legend, bool no_legend, bool to_stdout);

// Shared number rendering (also used by `check`): 3 significant digits,
// fixed notation in [1, 1000), otherwise `8.80e-7`; "inf", "-inf", "nan"; "0".
std::string format_sig3(double v);
// A share p in [0,1] as a percentage with 3 significant digits ("94.0",
// "100", "0", "66.7"), never rounded to 100 or 0 unless it is exactly that.
std::string format_percent(double p);
// Full precision (shortest round-trip) for machine-readable output.
std::string format_full(double v);

// A canonical string of an `axes` object: equal exactly when the objects are
// equal as configurations (-5 and -5.0 are the same value). Used to match
// entries across reports.
std::string axes_key(const nlohmann::json& axes);
// A short label of a configuration without its path, e.g.
// "floor chunk=16 decay_floor=-5 dim=128".
std::string axes_label(const nlohmann::json& axes);
// An axis value as text: strings as they are, numbers at full precision.
std::string axis_value_text(const nlohmann::json& v);

// A labelled report: the file name is shown when several reports hold the
// same configuration.
struct NamedReport {
  std::string name;
  Report report;
};

// Preset names, in the order --help lists them.
const std::vector<std::string>& table_presets();
// Lays out `reports` with preset `preset` (UsageError with the nearest valid
// name if unknown). Rows are grouped by family, then the other axes, then
// path, then chunk; in kRows, axis columns appear only where values differ.
// `columns` names an axis whose values become groups of columns (a pivot:
// one row per configuration without it, docs/tables.md); UsageError when
// no entry has that axis.
Table build_table(const std::vector<NamedReport>& reports, const std::string& preset,
                  TableLayout layout = TableLayout::kRows, const std::string& columns = "");

}  // namespace chunkinv
