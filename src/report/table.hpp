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
};

struct Column {
  std::string header;
  Align align = Align::kRight;
  std::string latex_header;  // if set, used verbatim by the LaTeX formatter
};

struct Table {
  std::vector<Column> columns;
  std::vector<std::vector<Cell>> rows;  // each row has one cell per column
};

enum class TableFormat { kMarkdown, kLatex, kCsv };
// "md" / "markdown", "latex" / "tex", "csv"; UsageError naming the nearest otherwise.
TableFormat parse_table_format(const std::string& name);

std::string to_markdown(const Table& t);
std::string to_latex(const Table& t);
std::string to_csv(const Table& t);
std::string format_table(const Table& t, TableFormat f);

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
// path, then chunk; axis columns appear only where values differ.
Table build_table(const std::vector<NamedReport>& reports, const std::string& preset);

}  // namespace chunkinv
