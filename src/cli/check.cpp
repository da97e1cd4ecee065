// chunkinv check NEW.json --baseline BASE.json [--rules RULES.json] [--exact] [--format md|json]
// Compares a report with a baseline (docs/check.md). Exit status: 0 nothing
// worse, 1 something worse, 2 the reports could not be compared.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/text.hpp"
#include "report/compare.hpp"

namespace chunkinv::cli {
namespace {

struct CheckOptions {
  std::string fresh;
  std::string baseline;
  std::string rules;
  std::string format = "md";
  bool exact = false;
  bool changes_only = false;
};

void run_check(const CheckOptions& o) {
  if (o.format != "md" && o.format != "json") {
    const std::string near = nearest(o.format, {"md", "json"});
    throw UsageError(fmt::format("unknown check format \"{}\"{}; formats: md, json", o.format,
                                 near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
  }
  CheckRules rules = o.rules.empty() ? default_check_rules() : read_check_rules(o.rules);
  if (o.exact) rules.bit_exact = true;
  const Report baseline = read_report(o.baseline);
  const Report fresh = read_report(o.fresh);
  const CheckResult result = compare_reports(baseline, fresh, rules);

  std::string text;
  if (o.format == "json") {
    auto j = check_json(result, rules);
    j["baseline"] = printable(o.baseline);  // JSON holds text; a file name may not be
    j["new"] = printable(o.fresh);
    text = j.dump(2) + "\n";
  } else {
    text = check_markdown(result, o.changes_only);
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (result.failed()) set_exit_status(1);
}

}  // namespace

void set_check_command(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  auto* cmd = app.add_subcommand(
      "check", "Compare a report with a baseline; exit 1 if any figure got worse, 2 if they cannot be compared");
  cmd->add_option("new", o->fresh, "the new report")->required();
  cmd->add_option("--baseline,-b", o->baseline, "the baseline report")->required();
  cmd->add_option("--rules,-r", o->rules, "rules file (docs/check.md); default: the built-in rules");
  cmd->add_flag("--exact", o->exact, "bit-exact: any change of any statistic counts as worse");
  cmd->add_option("--format,-f", o->format, "md or json")->capture_default_str();
  cmd->add_flag("--changes-only", o->changes_only, "list only figures that are not SAME (md)");
  cmd->callback([o] { run_check(*o); });
}

}  // namespace chunkinv::cli
