// chunkinv score: measure another kernel's L and/or INV, read from a file,
// against the gold of the samples they were made from, with the metrics and
// aggregates of every path, into a report that `check` can gate
// (docs/inputs.md "Scoring a kernel"). The candidate runs through the same
// runner as `run`, as path `candidate` (src/paths/candidate/).
#include <cstdio>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "api/meta.hpp"
#include "cli/commands.hpp"
#include "cli/seq.hpp"
#include "cli/summary.hpp"
#include "core/error.hpp"
#include "core/limits.hpp"
#include "core/output_file.hpp"
#include "core/text.hpp"
#include "downstream/tensors.hpp"
#include "driver/runner.hpp"
#include "driver/spec.hpp"
#include "inputs/data_families.hpp"
#include "paths/candidate/candidate.hpp"
#include "report/report.hpp"
#include "report/table.hpp"

namespace chunkinv::cli {
namespace {

struct ScoreArgs {
  std::string inputs, candidate, paths = "gold", output, table_format = "md";
  std::vector<std::string> axes;
  std::string worst, worst_by;  // --worst N --by METRIC
  std::string threads = "0";  // read by parse_count, capped as every subcommand caps it
  bool per_sample = false, quiet = false, legend = false, no_legend = false;
};

void score(const ScoreArgs& a) {
  const TableFormat format = parse_table_format(a.table_format);
  const bool legend = want_legend(a.legend, a.no_legend, true);
  std::string worst_by = a.worst_by;
  const size_t worst = parse_worst(a.worst, worst_by);
  if (a.inputs.empty() || a.candidate.empty()) throw UsageError("score needs --inputs PATH and --candidate PATH");
  if (holds_sequences(a.inputs)) {  // a kernel's o (and ht) on sequences: seq's scoring (docs/downstream.md)
    if (worst) throw UsageError("score --worst: the inputs are sequences, whose outputs are scored without worst samples");
    if (a.paths != "gold")
      throw UsageError(fmt::format("score --paths {}: the inputs are sequences; their candidate is scored against the "
                                   "FP64 recurrence alone (seq --inputs runs the paths)", a.paths));
    if (a.per_sample) throw UsageError("score --per-sample: the inputs are sequences, scored as entries without per-sample values");
    SeqScoreRequest r;
    r.inputs = a.inputs;
    r.candidate = a.candidate;
    r.axes = a.axes;
    r.output = a.output;
    r.table_format = a.table_format;
    r.threads = int(parse_count("--threads", a.threads, 0, 1024));
    r.quiet = a.quiet;
    return score_sequences(r);
  }
  ExperimentSpec spec;
  spec.name = "score";
  spec.grids.push_back({{"family", "file"}, {"inputs", a.inputs}});
  for (const auto& ax : a.axes) {
    const std::string name = ax.substr(0, ax.find('='));
    if (name == "family" || name == "inputs")
      throw UsageError(fmt::format("score: axis {} is not for score: the samples are those of --inputs", name));
    apply_axis(spec, ax);
  }
  const auto points = expand(spec);
  for (const Point& p : points)
    if (!(p.config == points[0].config))
      throw UsageError("score: the axes give several configurations; a candidate file holds the matrices of one "
                       "chunking: give one chunk and one tail (the method axis may have several)");
  const Configuration& cfg = points[0].config;

  std::vector<PathChoice> paths = parse_paths(a.paths);
  bool has_gold = false;
  for (const auto& p : paths) has_gold = has_gold || p.spec->reference;
  if (!has_gold) paths.insert(paths.begin(), PathChoice{&reference_path(), {}});
  PathChoice cand{&kCandidatePath, {{"file", a.candidate}, {"inputs", a.inputs}}};
  const Tail tail = file_family_tail(cfg);
  cand.options["tail"] = tail == Tail::kPad ? "pad" : "drop";
  paths.push_back(cand);

  const uint64_t samples = *find_family(cfg.family).available_samples(cfg);
  // The candidate is read now: a file that does not fit the samples is an
  // error before anything is computed.
  const auto set = cached_tensor_set(a.inputs);
  const auto chunks = cached_chunks(a.inputs, cfg.chunk, tail);
  const CandidateSet c = load_candidate(a.candidate, *set, *chunks, cfg.chunk);
  if (c.count != samples)
    throw UsageError(fmt::format("candidate {}: holds {} matrices, the inputs {} give {} samples at chunk {}", a.candidate,
                                 c.count, a.inputs, samples, cfg.chunk));
  std::vector<std::string> holds;
  if (!c.L.empty()) holds.push_back("L");
  if (!c.INV.empty()) holds.push_back("INV");
  if (!c.decay.empty()) holds.push_back("decay");
  if (!c.inv_decay.empty()) holds.push_back("inv_decay");

  std::optional<OutputFile> out;
  if (!a.output.empty()) {
    out.emplace(a.output);
    out->refuse_overwriting({a.inputs, a.candidate});
  }
  RunnerOptions opt;
  opt.threads = int(parse_count("--threads", a.threads, 0, 1024));
  opt.progress = !a.quiet;
  const std::string started = api::utc_now();
  StatsOptions stats;
  stats.per_sample = a.per_sample;
  stats.worst = worst;
  stats.worst_by = worst_by;
  RunResult result = run_experiment(points, paths, samples, 0, opt, stats);
  if (!a.quiet)
    for (const auto& why : result.skipped) std::fprintf(stderr, "skipped: %s\n", why.c_str());
  Report report;
  report.results = std::move(result.entries);
  api::MetaFields meta;
  meta.paths = paths;
  meta.threads = opt.threads;
  meta.argv = invocation().argv;
  meta.started = started;
  meta.skipped = result.skipped;
  meta.seed = 0;
  meta.samples = samples;
  meta.experiment = spec.name;
  meta.candidate = {{"file", printable(a.candidate)}, {"inputs", printable(a.inputs)}, {"holds", holds}};
  report.meta = api::make_meta(meta);
  if (out) out->commit(report_to_json(report).dump(1) + "\n");
  if (a.quiet) return;  // -q: nothing but errors, as in every subcommand
  const std::vector<NamedReport> shown{{a.output.empty() ? spec.name : a.output, report}};
  print_summary(shown, out ? &*out : nullptr, format, legend, worst, worst_by);
}

}  // namespace

void set_score_command(CLI::App& app) {
  auto args = std::make_shared<ScoreArgs>();
  auto* cmd = app.add_subcommand(
      "score", "Score another kernel's L and/or INV (read from a file) against the gold: the metrics of a path, as a report");
  cmd->add_option("--inputs", args->inputs, "the tensor set the candidate ran on (keys/g/beta: [N,C,d] or [B,T,H,K])")->required();
  cmd->add_option("--candidate", args->candidate,
                  "the candidate's L and/or INV ([N,C,C], or [B,T,H,C] for token-layout inputs; bf16/f16/f32/f64), "
                  "optionally decay and inv_decay: a directory of .npy, an .npz or a .safetensors")
      ->required();
  cmd->add_option("-a,--axis", args->axes,
                  "chunk=C and tail=pad|drop (token-layout inputs), method=M (the arithmetic the candidate implements; "
                  "several allowed; default neumann)");
  cmd->add_option("--paths", args->paths, "paths to measure beside the candidate (default gold; e.g. gold,emulated)");
  cmd->add_option("-o,--output", args->output, "write the JSON report here (atomically)");
  cmd->add_option("--format", args->table_format, "summary table format: md, latex, csv");
  cmd->add_flag("--legend", args->legend, "a line per column under the table (default: when stdout is a terminal)");
  cmd->add_flag("--no-legend", args->no_legend, "no legend, even on a terminal");
  cmd->add_option("--threads", args->threads, "worker threads (default 0: all cores; at most 1024)");
  cmd->add_flag("--per-sample", args->per_sample, "keep every sample's metric values in the report");
  cmd->add_option("--worst", args->worst,
                  "list the N worst samples of every entry (1 to 1000), each with the `inspect` command that shows it "
                  "beside the gold; kept in the report (\"worst\")");
  cmd->add_option("--by", args->worst_by, fmt::format("the metric --worst ranks by (default {})", kDefaultWorstMetric));
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing but errors (no progress line, no table)");
  cmd->callback([args] { score(*args); });
}

}  // namespace chunkinv::cli
