// chunkinv table REPORT... --format md|latex|csv [--preset NAME] [--columns AXIS] [-o FILE]
// Lays one or more reports out as a table with its legend, and lists the
// worst samples of a --per-sample report (docs/tables.md).
#include <algorithm>
#include <cstdio>
#include <memory>

#include <sys/stat.h>

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
  std::string columns;         // --columns AXIS: a pivot
  std::string worst, worst_by; // --worst N --by METRIC
  bool legend = false, no_legend = false, quiet = false;
};

// The same file twice (however spelled: a link, ./r.json) would give rows
// that differ in nothing, not even in the report column: refused.
void refuse_one_report_twice(const std::vector<std::string>& paths) {
  std::vector<struct stat> seen(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    if (::stat(paths[i].c_str(), &seen[i]) != 0) continue;  // read_report names what is wrong with it
    for (size_t j = 0; j < i; ++j)
      if (seen[j].st_ino == seen[i].st_ino && seen[j].st_dev == seen[i].st_dev && seen[j].st_nlink)
        throw UsageError(paths[i] == paths[j]
                             ? fmt::format("table: report {} is given twice; give each report once", paths[i])
                             : fmt::format("table: reports {} and {} are one file; give each report once", paths[j],
                                           paths[i]));
  }
}

void run_table(const TableOptions& o) {
  const TableFormat format = parse_table_format(o.format);
  std::string worst_by = o.worst_by;
  const size_t worst = parse_worst(o.worst, worst_by);
  const bool legend = want_legend(o.legend, o.no_legend, o.output.empty() || o.output == "-");
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

  refuse_one_report_twice(o.reports);
  std::vector<NamedReport> reports;
  for (const auto& path : o.reports) reports.push_back({path, read_report(path)});
  Table table = build_table(reports, o.preset, layout_for(format), o.columns);
  table.caption = o.caption;
  table.label = o.label;
  std::string text = format_table(table, format) + (legend ? format_legend(table, format) : "");
  if (worst) {
    const std::string list = worst_text(reports, worst, worst_by);
    if (list.empty())
      throw UsageError(fmt::format("--worst: no entry of the reports has per-sample values or worst samples by {} "
                                   "(run --per-sample or run --worst {} --by {} keeps them)",
                                   worst_by, worst, worst_by));
    // Beside a Markdown table; on stderr where the table is for machines.
    if (format == TableFormat::kMarkdown) text += "\n" + list;
    else if (!o.quiet) std::fputs(list.c_str(), stderr);
  }
  if (out) {
    out->commit(text);
  } else if (!o.quiet) {
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
  cmd->add_option("--columns", o->columns,
                  "pivot: this axis's values (chunk, path, method, decay_floor, ...) as groups of columns, one row per "
                  "configuration without it");
  cmd->add_flag("--legend", o->legend, "a line per column under the table (default: when stdout is a terminal)");
  cmd->add_flag("--no-legend", o->no_legend, "no legend, even on a terminal");
  cmd->add_option("--worst", o->worst,
                  "list the N worst samples of every entry of a --per-sample report (or of one run with --worst), "
                  "each with the `inspect` command that shows it");
  cmd->add_option("--by", o->worst_by, fmt::format("the metric --worst ranks by (default {})", kDefaultWorstMetric));
  cmd->add_flag("-q,--quiet", o->quiet, "print nothing but errors (-o FILE is still written)");
  cmd->add_option("--caption", o->caption, "LaTeX: put the table in a float with this \\caption (LaTeX as is)");
  cmd->add_option("--label", o->label, "LaTeX: the float's \\label");
  cmd->add_option("-o,--output", o->output, "write to FILE (replaced atomically; - for stdout) instead of stdout");
  cmd->callback([o] { run_table(*o); });
}

}  // namespace chunkinv::cli
