// chunkinv merge SHARD.json... -o ALL.json
// Joins the reports of `run --shard i/n`, i = 1..n, into the report of the
// whole run (report/merge.hpp). Every refusal names the culprit, exit 2,
// and leaves no output.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "api/meta.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "report/merge.hpp"

namespace chunkinv::cli {
namespace {

struct MergeOptions {
  std::vector<std::string> reports;
  std::string output;
  bool quiet = false;
  MergeRules rules;
};

void run_merge(const MergeOptions& o) {
  OutputFile out(o.output);  // checked before anything is read
  out.refuse_overwriting(o.reports);
  std::vector<ShardReport> shards;
  for (const std::string& path : o.reports) shards.push_back({path, read_report(path)});
  Report merged = merge_shards(shards, o.rules);
  api::stamp_merge(merged.meta, invocation().argv);
  out.commit(report_to_json(merged).dump(1) + "\n");
  if (!o.quiet && !out.to_stdout())
    std::fprintf(stderr, "merged %zu shards (%s samples per configuration) into %s\n", shards.size(),
                 merged.meta.value("samples", nlohmann::json()).dump().c_str(), out.path().c_str());
}

}  // namespace

void set_merge_command(CLI::App& app) {
  auto o = std::make_shared<MergeOptions>();
  auto* cmd = app.add_subcommand("merge", "Join the reports of run --shard i/n (every shard of one run) into its report");
  cmd->add_option("reports", o->reports, "the shards' reports, in any order")->required();
  cmd->add_option("-o,--output", o->output, "write the merged report here (replaced atomically; - for stdout)")->required();
  cmd->add_flag("--across-commits", o->rules.across_commits,
                "shards whose runs differ only in the build's git_commit are one run (builds known to give the same "
                "values); the merged meta lists each shard's commit");
  cmd->add_flag("-q,--quiet", o->quiet, "print nothing but errors");
  cmd->callback([o] { run_merge(*o); });
}

}  // namespace chunkinv::cli
