// chunkinv seq: what an inverse's error does to the layer's output and
// state (docs/downstream.md). Sequences from a family, their chunks'
// inverses from every path x method, the chunked forward as the kernels
// compute it scored against the FP64 token recurrence, into a standard
// report (`table --preset downstream`, `check`, `merge`).
#include <sys/stat.h>

#include <cstdio>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "api/meta.hpp"
#include "cli/commands.hpp"
#include "cli/seq.hpp"
#include "core/error.hpp"
#include "core/json_read.hpp"
#include "core/limits.hpp"
#include "core/output_file.hpp"
#include "core/signals.hpp"
#include "downstream/backward.hpp"
#include "downstream/experiment.hpp"
#include "downstream/storage.hpp"
#include "driver/spec.hpp"
#include "report/merge.hpp"
#include "report/report.hpp"
#include "report/worst.hpp"
#include "report/table.hpp"

namespace chunkinv::cli {
namespace {

using json = nlohmann::json;

struct SeqArgs {
  std::string config, paths, output, table_format = "md", inputs, candidate, shard, checkpoint_every, pipeline = "host";
  std::vector<std::string> axes;
  std::optional<uint64_t> samples, seed;
  int threads = 0;
  bool per_sample = false, quiet = false, list_families = false, list_storage = false, resume = false;
};

// A config: {"axes": {axis: value or list}, "samples": n, "seed": s, "paths": "gold,emulated"}.
json read_seq_config(const std::string& file, SeqArgs& a, std::string& paths) {
  const std::string what = "config " + file;
  const json j = parse_json_strict(read_text_file(file, config_source(what)), what);
  if (!j.is_object()) throw UsageError(what + ": must be an object with \"axes\"");
  for (const auto& [k, v] : j.items()) {
    if (k == "axes") continue;
    if (k == "samples" || k == "seed") {
      if (!v.is_number_unsigned()) throw UsageError(fmt::format("{}: \"{}\" must be a whole number >= 0", what, k));
      (k == "samples" ? a.samples : a.seed) = v.get<uint64_t>();  // the command line's, when given, win after
    } else if (k == "paths") {
      if (!v.is_string()) throw UsageError(what + ": \"paths\" must be a string (e.g. \"gold,emulated\")");
      paths = v.get<std::string>();
    } else {
      const std::string near = nearest(k, {"axes", "samples", "seed", "paths"});
      throw UsageError(fmt::format("{}: unknown key \"{}\"{}", what, k, near.empty() ? "" : " (did you mean \"" + near + "\"?)"));
    }
  }
  if (!j.contains("axes") || !j["axes"].is_object()) throw UsageError(what + ": \"axes\" is missing or not an object");
  return j["axes"];  // each value checked where the grid is expanded
}

void list_families() {
  for (const auto& n : source_names()) {
    const SequenceSource& s = find_source(n);
    std::cout << n << ": " << s.description() << "\n";
    for (const auto& p : s.params())
      std::cout << "  " << p.name << " (default " << (p.default_value.is_null() ? "none" : p.default_value.dump())
                << "): " << p.help << "\n";
  }
}

void seq(SeqArgs a) {
  if (a.list_families) return list_families();
  if (a.list_storage) {
    for (const auto& n : storage_names()) std::cout << n << ": " << find_storage(n).models << "\n";
    for (const auto& n : backward_storage_names())
      std::cout << n << " (backward): " << find_backward_storage(n).models << "\n";
    return;
  }
  const TableFormat format = parse_table_format(a.table_format);
  std::string paths_text = "gold,emulated";
  json axes = json::object();
  const std::optional<uint64_t> cli_samples = a.samples, cli_seed = a.seed;
  if (!a.config.empty()) axes = read_seq_config(a.config, a, paths_text);
  if (cli_samples) a.samples = cli_samples;
  if (cli_seed) a.seed = cli_seed;
  if (!a.paths.empty()) paths_text = a.paths;
  for (const auto& ax : a.axes) {
    const size_t eq = ax.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(fmt::format("axis \"{}\" must be name=value or name=[v1,v2,...]", ax));
    axes[ax.substr(0, eq)] = parse_axis_value(ax.substr(0, eq), ax.substr(eq + 1));
  }
  const uint64_t samples = a.samples.value_or(4);
  if (samples < 1 || samples > 1'000'000) throw UsageError(fmt::format("--samples {} is outside 1..10^6", samples));
  if (!a.candidate.empty() && a.inputs.empty()) throw UsageError("seq --candidate needs --inputs (the sequences it ran on)");
  std::optional<Shard> shard;
  if (!a.shard.empty()) shard = parse_shard(a.shard);
  if (shard && !a.per_sample)
    throw UsageError("seq --shard needs --per-sample: seq's quantiles are exact, and the merge puts every value back "
                     "together");
  if (!a.candidate.empty() && (shard || a.resume))
    throw UsageError(fmt::format("seq --candidate with {}: a kernel's outputs are scored at once, with no shards or "
                                 "checkpoint", shard ? "--shard" : "--resume"));
  const double every =
      a.checkpoint_every.empty() ? 10.0 : double(parse_count("--checkpoint-every", a.checkpoint_every, 0, 86400));
  std::shared_ptr<const SequenceSet> set;
  if (!a.inputs.empty()) set = std::make_shared<const SequenceSet>(load_sequences(a.inputs));
  const std::vector<SeqGroup> groups = set ? expand_inputs(set, axes) : expand_sequences(axes);
  std::optional<CandidateOutputs> candidate;
  if (!a.candidate.empty()) candidate = load_candidate_outputs(a.candidate, *set);
  const std::vector<PathChoice> paths = parse_paths(paths_text);
  if (shard)
    for (const SeqGroup& g : groups)
      if (const uint64_t n = g.inputs ? g.inputs->sequences.size() : samples; shard->count > n)
        throw UsageError(fmt::format("--shard {}: {} shards of {} sequences; at most {} shards (a shard holds a "
                                     "sequence at least)", a.shard, shard->count, n, n));
  if (a.pipeline != "host" && a.pipeline != "device")
    throw UsageError(fmt::format("--pipeline {}: must be host or device (the FP64 recurrence and the chunked forwards on the GPU)", a.pipeline));
  const bool device = a.pipeline == "device";
  if (device) require_device_reference(groups);
  std::optional<OutputFile> out;
  if (!a.output.empty()) {
    out.emplace(a.output);
    std::vector<std::string> read;
    for (const std::string* f : {&a.config, &a.inputs, &a.candidate})
      if (!f->empty()) read.push_back(*f);
    out->refuse_overwriting(read);
  }
  SeqRunOptions opt;
  opt.samples = samples;
  opt.seed = a.seed.value_or(0);
  opt.threads = a.threads;
  opt.per_sample = a.per_sample;
  opt.shard = shard;
  opt.device = device;
  const bool checkpointed = out && out->replaced_atomically() && !candidate;
  if (a.resume && !checkpointed)
    throw UsageError("--resume needs -o FILE (a regular file): the checkpoint lies beside the report");

  // What the results depend on (a resume must match it; the shards of one
  // run share it but for the shard itself).
  json identity = api::build_identity();
  identity["command"] = "seq";
  identity["axes"] = axes;
  identity["seed"] = set ? 0 : opt.seed;
  identity["samples"] = set ? set->sequences.size() : samples;
  identity["per_sample"] = a.per_sample;
  if (set) identity["inputs"] = a.inputs;
  std::vector<std::string> labels;
  for (const PathChoice& p : paths) labels.push_back(p.label());
  identity["paths"] = labels;
  const Checkpoint::Layout layout = sequence_layout(groups, paths, opt);
  if (layout.axes.empty() && !candidate) {
    std::vector<std::string> why;
    for (const SeqGroup& g : groups)
      for (const PathChoice& p : paths)
        for (const Method& m : g.methods)
          if (std::string w; !p.spec->supports(g.config.chunk_config(), m, &w))
            why.push_back(fmt::format("path {} does not run method {}: {}", p.label(), m.label(), w));
    throw UsageError(fmt::format("seq: no path runs any method of these configurations ({})", why.empty() ? "" : why.front()));
  }
  identity["entries"] = json::array();
  for (const auto& g : layout.axes)
    for (const json& e : g) identity["entries"].push_back(e);
  json run_identity = identity;
  run_identity.erase("entries");
  if (shard) identity["shard"] = fmt::format("{}/{}", shard->index, shard->count);

  const std::string ckpt_path = checkpointed ? sibling_path(out->target(), ".ckpt") : std::string();
  struct stat st;
  if (checkpointed && !a.resume && ::lstat(ckpt_path.c_str(), &st) == 0)
    throw UsageError(fmt::format("output {}: {} holds an unfinished run; add --resume to finish it, or delete it to start over",
                                 a.output, ckpt_path));
  std::unique_ptr<Checkpoint> ckpt;
  std::string started = api::utc_now();
  std::vector<std::string> argv = invocation().argv;
  if (a.resume) {
    ckpt = Checkpoint::open(ckpt_path, identity, layout);
    argv = ckpt->run().value("argv", argv);  // the report says what the first part of the run was
    started = ckpt->run().value("started", started);
  } else if (checkpointed) {
    ckpt = Checkpoint::create(ckpt_path, identity, {{"argv", argv}, {"started", started}});
  }
  if (ckpt) ckpt->interval_s = every;
  opt.checkpoint = ckpt.get();
  // With a checkpoint, the first Ctrl-C stops after the sequence and saves it.
  std::optional<signals::StopPoint> stop_point;
  if (ckpt) {
    stop_point.emplace();
    opt.stop = [] { return signals::received(); };
  }
  SeqRunResult result;
  if (candidate) {
    // The kernel's own outputs: one method (the arithmetic it implements), no path runs.
    const std::string method = axes.contains("method") && axes["method"].is_string() ? axes["method"].get<std::string>()
                                                                                      : "neumann";
    result.entries = score_candidates(groups, *candidate, parse_method(method).label(), device);
  } else {
    try {
      result = run_sequences(groups, paths, opt);
    } catch (const signals::Stopped& s) {
      std::vector<std::string> again = invocation().argv;
      if (!a.resume) again.push_back("--resume");
      std::fprintf(stderr, "chunkinv: stopped by %s; %zu of %zu configurations are saved in %s; finish with: %s\n",
                   signals::name(s.signal).c_str(), ckpt->groups_finished(), layout.axes.size(), ckpt_path.c_str(),
                   shell_command(again).c_str());
      throw;
    }
  }
  stop_point.reset();  // from here a signal ends the run at once (the checkpoint holds everything)
  if (!a.quiet)
    for (const auto& why : result.skipped) std::fprintf(stderr, "skipped: %s\n", why.c_str());
  if (result.entries.empty()) throw UsageError("seq: no path runs any method of these configurations (see skipped)");
  Report report;
  report.results = std::move(result.entries);
  api::MetaFields meta;
  meta.paths = paths;
  meta.threads = opt.threads;
  meta.argv = argv;
  meta.started = started;
  if (a.resume) meta.resumed = api::utc_now();
  if (shard) meta.shard = shard_meta(*shard, set ? set->sequences.size() : samples, run_identity);
  meta.skipped = result.skipped;
  meta.experiment = a.config.empty() ? "seq" : a.config;
  meta.seed = set ? 0 : opt.seed;
  meta.samples = set ? set->sequences.size() : samples;
  if (set) meta.inputs = a.inputs;
  if (candidate) {
    json holds = candidate->ht.empty() ? json{"o"} : json{"o", "ht"};
    if (!candidate->dq.empty())
      for (const char* g : {"dq", "dk", "dv", "dg", "dbeta"}) holds.push_back(g);
    meta.candidate = {{"file", a.candidate}, {"inputs", a.inputs}, {"holds", holds}};
  }
  json storage = json::object();
  for (const auto& g : groups) storage[g.config.storage] = std::string(find_storage(g.config.storage).models);
  meta.downstream = {
      {"reference", "the FP64 token recurrence (fla's naive_recurrent_kda): S_t = diag(exp(g_t)) S_{t-1}; "
                    "S_t += beta_t k_t (v_t - S_t^T k_t)^T; o_t = scale S_t^T q_t"},
      {"scale", "K^-1/2"},
      {"decomposition", "total: the path's inverse and the preset's storage; inverse_only: the path's inverse, "
                        "everything else FP64; storage: the exact inverse and the preset's storage"},
      {"storage", storage},
      {"reference_pipeline", device ? "device" : "host"}};
  json backward = json::object();
  for (const auto& g : groups)
    if (g.config.backward != "none") backward[g.config.storage] = std::string(find_backward_storage(g.config.storage).models);
  if (!backward.empty())
    meta.downstream["backward"] = {
        {"reference", "reverse mode through the FP64 token recurrence, derived by hand, of sum(do o) + sum(dht ht)"},
        {"upstream", "do: the inputs' own, else BF16 N(0, 1) from its own stream; dht: the inputs' own, else zero"},
        {"inverse", "stored: A as the forward stored it, read as the backward preset reads A; recomputed: the "
                    "path x method's A as it makes it"},
        {"storage", backward}};
  report.meta = api::make_meta(meta);
  if (out) {
    out->commit(report_to_json(report).dump(1) + "\n");
    if (ckpt) ckpt->remove();  // kept when the report could not be written: --resume writes it without computing
  }
  if (!out || !out->to_stdout()) {
    if (!a.quiet) std::cout << format_table(build_table({{a.output.empty() ? "seq" : a.output, report}}, "downstream"), format);
    if (!a.quiet && !backward.empty())
      std::cout << "\n" << format_table(build_table({{a.output.empty() ? "seq" : a.output, report}}, "backward"), format);
  }
  if (out && !out->to_stdout() && !a.quiet) std::fprintf(stderr, "report written to %s\n", out->path().c_str());
}

}  // namespace

void score_sequences(const SeqScoreRequest& r) {
  SeqArgs a;
  a.inputs = r.inputs;
  a.candidate = r.candidate;
  a.axes = r.axes;
  a.output = r.output;
  a.table_format = r.table_format;
  a.quiet = r.quiet;
  a.threads = r.threads;
  seq(std::move(a));
}

void set_seq_command(CLI::App& app) {
  auto args = std::make_shared<SeqArgs>();
  auto* cmd = app.add_subcommand(
      "seq", "Sequences: what each path x method's inverse does to the layer's output o and state, against the FP64 "
             "recurrence, split into the inverse's share and the storage's (docs/downstream.md)");
  cmd->add_option("config", args->config, "a downstream config: {\"axes\": {...}, \"samples\", \"seed\", \"paths\"}")
      ->check(CLI::ExistingFile);
  cmd->add_option("-a,--axis", args->axes,
                  "family, seq_len, chunk, dim (K), value_dim (V), storage, window, initial_state, method, "
                  "backward (none, stored, recomputed), and the family's own: name=value, name=[v1,v2], "
                  "name=[start:stop:step]");
  cmd->add_option("--samples", args->samples, "sequences per configuration, 1 to 10^6 (default: the config's, else 4)");
  cmd->add_option("--seed", args->seed, "seed (default: the config's, else 0)");
  cmd->add_option("--inputs", args->inputs,
                  "sequences in fla's layout: q, k [B,T,H,K], v [B,T,H,V], g [B,T,H] or [B,T,H,K], beta [B,T,H], "
                  "optional initial_state [N,H,K,V] and cu_seqlens (a directory of .npy, an .npz or a .safetensors)");
  cmd->add_option("--candidate", args->candidate,
                  "a kernel's outputs on --inputs: o [B,T,H,V], optional ht (or final_state) [N,H,K,V]; scored "
                  "against the FP64 recurrence as path candidate (-a method=M names its arithmetic)");
  cmd->add_option("--paths", args->paths, "the paths whose inverses run (default gold,emulated)");
  cmd->add_option("-o,--output", args->output, "write the JSON report here (atomically)");
  cmd->add_option("--format", args->table_format, "summary table format: md, latex, csv");
  cmd->add_option("--threads", args->threads, "worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_flag("--per-sample", args->per_sample, "keep every sequence's metric values in the report");
  cmd->add_option("--shard", args->shard,
                  "i/n: run shard i of n of every configuration's sequences (with --per-sample); `chunkinv merge` "
                  "joins the shards into the unsharded report");
  cmd->add_flag("--resume", args->resume, "finish a seq run that was stopped or killed, from FILE.ckpt (same options)");
  cmd->add_option("--checkpoint-every", args->checkpoint_every,
                  "seconds between saves of the sequences done to FILE.ckpt, 0 to 86400 (default 10)");
  cmd->add_option("--pipeline", args->pipeline,
                  "host (default) or device: the FP64 recurrence every variant is scored against and the chunked "
                  "forwards on the GPU (bit for bit the host's, the same report; K 16, 32, 64 or 128)");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing but errors");
  cmd->add_flag("--list-families", args->list_families, "list the sequence families and their axes");
  cmd->add_flag("--list-storage", args->list_storage, "list the storage presets and what they model");
  cmd->callback([args] { seq(*args); });
}

}  // namespace chunkinv::cli
