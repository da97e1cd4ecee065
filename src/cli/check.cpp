// chunkinv check NEW.json --baseline BASE.json [--rules RULES.json] [--exact] [--format md|json|github]
//                [--junit FILE] [--update] [-q]
// Compares a report with a baseline (docs/check.md). Exit status: 0 nothing
// worse (or the baseline refreshed with --update), 1 something worse, 2 the
// reports could not be compared.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/output_file.hpp"
#include "core/text.hpp"
#include "report/compare.hpp"

namespace chunkinv::cli {
namespace {

struct CheckOptions {
  std::string fresh;
  std::string baseline;
  std::string rules;
  std::string format = "md";
  std::string junit;  // --junit FILE
  bool exact = false;
  bool changes_only = false;
  bool update = false, quiet = false;
};

// The text of a report file, as read (the baseline becomes this, byte for byte).
std::string file_text(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw UsageError(fmt::format("report {}: cannot be read ({})", path, std::strerror(errno)));
  std::string text;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  const bool failed = std::ferror(f);
  std::fclose(f);
  if (failed) throw UsageError(fmt::format("report {}: read failed", path));
  return text;
}

void run_check(const CheckOptions& o) {
  if (o.format != "md" && o.format != "json" && o.format != "github") {
    const std::string near = nearest(o.format, {"md", "json", "github"});
    throw UsageError(fmt::format("unknown check format \"{}\"{}; formats: md, json, github", o.format,
                                 near.empty() ? "" : fmt::format(" (did you mean \"{}\"?)", near)));
  }
  CheckRules rules = o.rules.empty() ? default_check_rules() : read_check_rules(o.rules);
  if (o.exact) rules.bit_exact = true;
  // The destinations before any work: an unwritable one is named now.
  std::unique_ptr<OutputFile> junit, update;
  if (!o.junit.empty()) {
    junit = std::make_unique<OutputFile>(o.junit);
    junit->refuse_overwriting({o.fresh, o.baseline});
  }
  if (o.update) update = std::make_unique<OutputFile>(o.baseline);
  const Report baseline = read_report(o.baseline);
  const std::string fresh_text = o.update ? file_text(o.fresh) : std::string();
  const Report fresh = o.update ? parse_report(fresh_text, o.fresh) : read_report(o.fresh);
  const CheckResult result = compare_reports(baseline, fresh, rules);

  std::string text;
  if (o.format == "json") {
    auto j = check_json(result, rules);
    j["baseline"] = printable(o.baseline);  // JSON holds text; a file name may not be
    j["new"] = printable(o.fresh);
    text = j.dump(2) + "\n";
  } else if (o.format == "github") {
    text = check_github(result, o.baseline, o.fresh);
  } else {
    text = check_markdown(result, o.changes_only);
    // In a GitHub Actions job the failing figures are annotations as well.
    if (const char* gh = std::getenv("GITHUB_ACTIONS"); gh && std::string(gh) == "true")
      text += check_github(result, o.baseline, o.fresh);
  }
  if (junit) junit->commit(check_junit(result, o.baseline, o.fresh));
  if (!o.quiet) std::fwrite(text.data(), 1, text.size(), stdout);
  if (update) {  // asked for: the new report becomes the baseline, whatever the verdict
    update->commit(fresh_text);
    if (!o.quiet)
      std::fprintf(stderr, "baseline %s replaced by %s (%zu figures counted as worse against the old one)\n",
                   printable(o.baseline).c_str(), printable(o.fresh).c_str(), result.failing);
    return;
  }
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
  cmd->add_option("--format,-f", o->format,
                  "md, json or github (GitHub Actions annotations: an ::error line per worse figure; md adds them "
                  "where GITHUB_ACTIONS=true)")
      ->capture_default_str();
  cmd->add_flag("--changes-only", o->changes_only, "list only figures that are not SAME (md)");
  cmd->add_option("--junit", o->junit,
                  "also write a JUnit XML here (atomically): a testcase per compared figure, a failure per worse one");
  cmd->add_flag("--update", o->update,
                "after the comparison, replace the baseline by the new report (atomically, byte for byte) and exit 0");
  cmd->add_flag("-q,--quiet", o->quiet, "print nothing but errors: the exit status (and --junit) say the verdict");
  cmd->callback([o] { run_check(*o); });
}

}  // namespace chunkinv::cli
