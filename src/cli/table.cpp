// chunkinv table REPORT... --format md|latex|csv [--preset NAME] [-o FILE]
// Lays one or more reports out as a table (docs/tables.md).
#include <algorithm>
#include <cstdio>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "report/table.hpp"

namespace chunkinv::cli {
namespace {

struct TableOptions {
  std::vector<std::string> reports;
  std::string format = "md";
  std::string preset = "summary";
  std::string output;
  std::string caption, label;  // LaTeX's \caption and \label
};

void run_table(const TableOptions& o) {
  const TableFormat format = parse_table_format(o.format);
  if ((!o.caption.empty() || !o.label.empty()) && format != TableFormat::kLatex) {
    throw UsageError("--caption and --label are for --format latex");
  }
  // Fail on a bad preset or an unwritable destination before reading anything large.
  if (std::find(table_presets().begin(), table_presets().end(), o.preset) == table_presets().end()) {
    build_table({}, o.preset);  // throws the error naming the nearest preset
  }
  std::unique_ptr<AtomicFile> out;
  if (!o.output.empty()) {
    out = std::make_unique<AtomicFile>(o.output);
    out->refuse_overwriting(o.reports);  // `table R -o R` would replace the report by its table
  }

  std::vector<NamedReport> reports;
  for (const auto& path : o.reports) reports.push_back({path, read_report(path)});
  Table table = build_table(reports, o.preset, layout_for(format));
  table.caption = o.caption;
  table.label = o.label;
  const std::string text = format_table(table, format);
  if (out) {
    out->commit(text);
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
}

}  // namespace

void set_table_command(CLI::App& app) {
  auto o = std::make_shared<TableOptions>();
  auto* cmd = app.add_subcommand("table", "Lay reports out as a Markdown, LaTeX or CSV table");
  cmd->add_option("reports", o->reports, "report JSON files (several are combined)")->required();
  cmd->add_option("--format,-f", o->format, "md, latex or csv")->capture_default_str();
  cmd->add_option("--preset,-p", o->preset,
                  fmt::format("table layout: {}", fmt::join(table_presets(), ", ")))
      ->capture_default_str();
  cmd->add_option("--caption", o->caption, "LaTeX: put the table in a float with this \\caption (LaTeX as is)");
  cmd->add_option("--label", o->label, "LaTeX: the float's \\label");
  cmd->add_option("-o,--output", o->output, "write to FILE (replaced atomically; - for stdout) instead of stdout");
  cmd->callback([o] { run_table(*o); });
}

}  // namespace chunkinv::cli
