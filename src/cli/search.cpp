// chunkinv search: look for the inputs that make a path's method as bad as
// possible (docs/search.md). sep-CMA-ES with IPOP restarts over a
// parametrisation in which every point is a valid sample; the best inputs
// are written as a tensor set (the witness) that `run --inputs` and
// `inspect --inputs` replay exactly, and a JSON report holds the objective,
// the trace and each witness's structure.

#include <chrono>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/meta.hpp"
#include "cli/commands.hpp"
#include "core/error.hpp"
#include "core/output_file.hpp"
#include "core/limits.hpp"
#include "core/progress.hpp"
#include "core/text.hpp"
#include "driver/spec.hpp"
#include "inputs/tensor_set.hpp"
#include "inputs/witness_summary.hpp"
#include "report/report.hpp"
#include "search/search.hpp"

namespace chunkinv::cli {
namespace {

using nlohmann::json;

struct SearchArgs {
  std::vector<std::string> axes;
  std::string keys = "normalised", gates = "per_token";
  std::string path = "emulated", method = "neumann", objective = "inv_total_rel_rmse";
  // Numbers as typed, read by parse_count: "-1" is refused, not wrapped to 2^64 - 1.
  std::string budget = "100000", seed = "0", restarts = "4", population = "0", threads = "0";
  double sigma0 = 1.0;
  bool keep_going = false, quiet = false, no_shared_key = false;
  std::string output, witness;
};

// The space from -a axes: model_like's (chunk, dim, decay_floor), through
// the same axis machinery as `run` (so unknown axes get a suggestion).
SearchSpace space_of(const SearchArgs& a, Configuration& config) {
  ExperimentSpec spec;
  spec.grids.push_back(json{{"family", "model_like"}});
  for (const auto& ax : a.axes) apply_axis(spec, ax);
  const auto points = expand(spec);
  if (points.size() != 1)
    throw UsageError("search takes one configuration: give one value per axis (and the method with --method)");
  config = points[0].config;
  if (config.family != "model_like")
    throw UsageError(fmt::format("search: family {}: the searched space is model_like's (normalised keys, g in "
                                 "[decay_floor, 0), beta in (0, 1)); leave out -a family",
                                 config.family));
  SearchSpace s;
  s.chunk = config.chunk;
  s.dim = config.dim;
  s.decay_floor = config.params.at("decay_floor").get<double>();
  s.keys = parse_key_form(a.keys);
  s.gates = parse_gate_form(a.gates);
  s.shared_direction = !a.no_shared_key;
  s.validate();
  return s;
}

json trace_json(const Trace& t) {
  json best = json::array();
  for (double v : t.best) best.push_back(json_number(v));
  return {{"evaluations", t.evaluations}, {"iteration", t.iteration}, {"best", best}};
}

// Evaluations a search may be given: at a few microseconds each, days.
constexpr uint64_t kMaxBudget = 1'000'000'000'000;

std::string derived_witness_path(const std::string& report) {
  const std::string ext = ".json";
  if (report.size() > ext.size() && report.compare(report.size() - ext.size(), ext.size(), ext) == 0)
    return report.substr(0, report.size() - ext.size()) + ".safetensors";
  return report + ".safetensors";
}

void search(const SearchArgs& a) {
  // Every option first: nothing is computed or written before all are valid.
  Configuration config;
  SearchOptions o;
  o.space = space_of(a, config);
  const std::vector<PathChoice> paths = parse_paths(a.path);
  if (paths.size() != 1) throw UsageError(fmt::format("--path {}: name one path", a.path));
  const Method method = parse_method(a.method);
  const Objective objective = parse_objective(a.objective, *method.spec);
  if (a.output.empty()) throw UsageError("search: give -o REPORT.json (the witness goes beside it unless --witness says where)");
  o.lanes = int(parse_count("--restarts", a.restarts, 1, 1024));
  o.budget = parse_count("--budget", a.budget, uint64_t(o.lanes), kMaxBudget);
  o.seed = parse_count("--seed", a.seed, 0, UINT64_MAX);
  o.lambda0 = int(parse_count("--population", a.population, 0, 100000));
  const int threads = int(parse_count("--threads", a.threads, 0, 1024));
  if (!(a.sigma0 > 0) || !(a.sigma0 < 1e6)) throw UsageError(fmt::format("--sigma0 {}: must be in (0, 1e6)", a.sigma0));
  o.sigma0 = a.sigma0;
  o.stop_at_nonfinite = !a.keep_going;
  check_budget(o);  // a budget too small for one generation of every lane is named now
  // Both outputs are checked now and written together at the end: the
  // witness, one file, replaced only once the report can be written too.
  OutputFile report_out(a.output);
  if (report_out.to_stdout() && a.witness.empty())
    throw UsageError("search -o -: give --witness FILE.safetensors (there is no file name to put it beside)");
  const std::string witness_path = a.witness.empty() ? derived_witness_path(a.output) : a.witness;
  if (!witness_path.ends_with(".safetensors") && !witness_path.ends_with(".npz"))
    throw UsageError(fmt::format("--witness {}: must end in .safetensors or .npz (the witnesses are one file, written whole)",
                                 witness_path));
  OutputFile witness_out(witness_path);
  if (witness_out.same_destination(report_out))
    throw UsageError(fmt::format("--witness {}: is the report -o {}; give another file", witness_path, a.output));

  Evaluator evaluator(config, paths[0], method, objective, threads);
  const std::string started = api::utc_now();
  const auto t0 = std::chrono::steady_clock::now();
  // The bar (share of the budget, time left, best so far) only on a terminal, never with -q.
  ProgressBar bar(double(o.budget), !a.quiet);
  uint64_t shown = 0;
  const SearchResult r = run_search(o, evaluator, [&](uint64_t evals, double best) {
    bar.advance(double(evals - shown), fmt::format("best {} = {:.4g}", objective.name, best));
    shown = evals;
  });
  bar.finish();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<Sample> samples;
  for (const Witness& w : r.witnesses) samples.push_back(w.sample);
  witness_out.stage(tensor_set_bytes(witness_path, samples));

  json j;
  j["schema"] = "chunkinv.search/1";
  api::MetaFields meta;
  meta.paths = paths;
  meta.threads = int(evaluator.pool().size());
  meta.argv = invocation().argv;
  meta.started = started;
  meta.wall_s = wall_s;
  j["meta"] = api::make_meta(meta);
  j["space"] = o.space.to_json();
  j["path"] = paths[0].label();
  j["method"] = method.label();
  j["objective"] = {{"name", objective.name}, {"help", objective.help}, {"maximised", true}};
  j["optimiser"] = {{"name", "sep-CMA-ES with IPOP restarts"},
                    {"source", "Hansen, The CMA Evolution Strategy: A Tutorial (arXiv:1604.00772); Ros & Hansen, "
                               "PPSN 2008 (sep-CMA-ES); Auger & Hansen, CEC 2005 (IPOP)"},
                    {"budget", o.budget},
                    {"lanes", o.lanes},
                    {"seed", o.seed},
                    {"sigma0", o.sigma0},
                    {"lambda0", r.restarts.empty() ? 0 : r.restarts.front().lambda},
                    {"stop_at_nonfinite", o.stop_at_nonfinite}};
  j["evaluations"] = r.evaluations;
  j["iterations"] = r.rounds;
  j["best"] = json_number(r.witnesses.empty() ? 0.0 : r.witnesses[0].value);
  j["nonfinite_at"] = r.nonfinite_at ? json(r.nonfinite_at) : json(nullptr);
  json ws = json::array();
  for (size_t i = 0; i < r.witnesses.size(); ++i) {
    const Witness& w = r.witnesses[i];
    json m = json::object();
    for (size_t k = 0; k < evaluator.metric_count(); ++k) m[evaluator.metric_set().infos[k].name] = json_number(w.metrics[k]);
    ws.push_back({{"index", i},
                  {"objective", json_number(w.value)},
                  {"lane", w.lane},
                  {"restart", w.restart},
                  {"generation", w.generation},
                  {"evaluation", w.evaluation},
                  {"metrics", m},
                  {"structure", witness_summary_json(summarise_witness(w.sample, o.space.decay_floor))}});
  }
  j["witnesses"] = {{"file", printable(witness_path)}, {"samples", ws}};
  json rs = json::array();
  for (const RestartRecord& x : r.restarts)
    rs.push_back({{"lane", x.lane}, {"restart", x.restart}, {"lambda", x.lambda}, {"generations", x.generations},
                  {"evaluations", x.evaluations}, {"best", json_number(x.best)}, {"stop", x.stop}});
  j["restarts"] = rs;
  j["trace"] = trace_json(r.trace);
  j["lane_traces"] = json::array();
  for (const Trace& t : r.lane_traces) j["lane_traces"].push_back(trace_json(t));
  // The report first where it may still fail (stdout, a device): a witness
  // without its report is never left.
  report_out.stage(j.dump(1) + "\n");
  report_out.publish();
  witness_out.publish();

  if (a.quiet) return;
  std::printf("search %s/%s, %s, C=%d d=%d decay_floor=%g: %llu evaluations in %.1f s\n", paths[0].label().c_str(),
              method.label().c_str(), objective.name.c_str(), o.space.chunk, o.space.dim, o.space.decay_floor,
              static_cast<unsigned long long>(r.evaluations), wall_s);
  if (!r.witnesses.empty()) {
    std::printf("best %s = %.6g (lane %d, restart %d, evaluation %llu)%s\n", objective.name.c_str(),
                r.witnesses[0].value, r.witnesses[0].lane, r.witnesses[0].restart,
                static_cast<unsigned long long>(r.witnesses[0].evaluation),
                r.nonfinite_at ? fmt::format("; first non-finite at evaluation {}", r.nonfinite_at).c_str() : "");
    std::printf("%s", witness_summary_text(summarise_witness(r.witnesses[0].sample, o.space.decay_floor)).c_str());
  }
  std::printf("witnesses (%zu, best first): %s\nreport: %s\n", r.witnesses.size(), printable(witness_path).c_str(),
              printable(a.output).c_str());
}

}  // namespace

void set_search_command(CLI::App& app) {
  auto args = std::make_shared<SearchArgs>();
  auto* cmd = app.add_subcommand("search", "Search for the inputs that make a path's method worst (sep-CMA-ES, IPOP restarts); write them as a tensor set");
  cmd->add_option("-a,--axis", args->axes, "axis of the space: chunk, dim, decay_floor (model_like's; one value each)");
  cmd->add_option("--keys", args->keys, "key form: normalised (default; raw is planned)");
  cmd->add_option("--gates", args->gates, "gate form: per_token (default; per_channel is planned)");
  cmd->add_flag("--no-shared-key", args->no_shared_key,
                "keys without the shared direction: row r's key is the direction of its own coordinates only");
  cmd->add_option("--path", args->path, "the path measured (default emulated; kernel where there is a GPU)");
  cmd->add_option("--method", args->method, "the inverse method (default neumann)");
  cmd->add_option("--objective", args->objective,
                  "maximised: any per-sample metric of the method (default inv_total_rel_rmse), or overflow_margin");
  cmd->add_option("--budget", args->budget, "evaluations in all (default 100000)");
  cmd->add_option("--restarts", args->restarts, "restart sequences run side by side, each with budget/restarts (default 4)");
  cmd->add_option("--population", args->population, "first population of each sequence (default 0: 4 + 3 ln n)");
  cmd->add_option("--sigma0", args->sigma0, "initial step size in the parametrisation (default 1)");
  cmd->add_option("--seed", args->seed, "seed (default 0)");
  cmd->add_option("--threads", args->threads, "worker threads (default 0: all cores); results do not depend on it");
  cmd->add_flag("--keep-going", args->keep_going, "do not stop at the first non-finite objective");
  cmd->add_option("-o,--output", args->output, "the JSON report (required)");
  cmd->add_option("--witness", args->witness, "the witnesses' tensor set (default: the report's name with .safetensors)");
  cmd->add_flag("-q,--quiet", args->quiet, "print nothing but errors");
  cmd->callback([args] { search(*args); });
}

}  // namespace chunkinv::cli
