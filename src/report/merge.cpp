#include "report/merge.hpp"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/json_read.hpp"
#include "report/table.hpp"

namespace chunkinv {
namespace {

using nlohmann::json;

struct ShardInfo {
  Shard shard;
  uint64_t first = 0, samples = 0, total = 0;
  const json* run = nullptr;
  const ShardReport* from = nullptr;
};

ShardInfo shard_info(const ShardReport& s) {
  const auto bad = [&](const std::string& why) {
    return UsageError(fmt::format("merge: {} is not a shard of a run ({}; shards are made by run --shard i/n)", s.path, why));
  };
  const json& meta = s.report.meta;
  if (!meta.contains("shard")) throw bad("no meta.shard");
  const json& j = meta["shard"];
  if (!j.is_object()) throw bad("meta.shard is not an object");
  ShardInfo info;
  info.from = &s;
  const auto field = [&](const char* k, uint64_t lo, uint64_t hi) {
    const auto v = j.contains(k) ? json_unsigned(j[k], lo, hi) : std::nullopt;
    if (!v) throw bad(fmt::format("meta.shard.{} is missing or not a whole number from {} to {}", k, lo, hi));
    return *v;
  };
  info.shard.count = field("count", 1, kMaxSamples);
  info.shard.index = field("index", 1, info.shard.count);
  info.first = field("first", 0, kMaxSamples - 1);
  info.samples = field("samples", 1, kMaxSamples);
  if (!j.contains("run") || !j["run"].is_object() || !j["run"].contains("samples"))
    throw bad("meta.shard.run is missing or not an object with \"samples\"");
  info.run = &j["run"];
  const auto total = json_unsigned((*info.run)["samples"], 1, kMaxSamples);
  if (!total) throw bad("meta.shard.run.samples is not a whole number from 1");
  info.total = *total;
  const auto [first, n] = shard_span(info.shard, info.total);
  if (info.first != first || info.samples != n)
    throw UsageError(fmt::format("merge: {}: shard {}/{} of {} samples covers samples [{}, {}), not [{}, {}) as it says "
                                 "(a damaged or edited report)",
                                 s.path, info.shard.index, info.shard.count, info.total, first, first + n, info.first,
                                 info.first + info.samples));
  return info;
}

// The first key where two runs differ, in words.
std::string first_difference(const json& a, const json& b) {
  std::vector<std::string> keys;
  for (const json* j : {&a, &b})
    for (const auto& [k, v] : j->items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const std::string& k : keys) {
    const json x = a.value(k, json()), y = b.value(k, json());
    if (x != y) return fmt::format("{}: {} there, {} here", k, json_excerpt(x), json_excerpt(y));
  }
  return "";
}

std::string where(const ShardReport& s, size_t i) { return fmt::format("{} results[{}]", s.path, i); }

}  // namespace

Shard parse_shard(const std::string& text) {
  const auto bad = [&] {
    return UsageError(fmt::format("--shard {}: must be i/n, shard i of n with 1 <= i <= n <= {} (e.g. --shard 1/4)", text,
                                  kMaxSamples));
  };
  const size_t slash = text.find('/');
  if (slash == std::string::npos) throw bad();
  const std::string a = text.substr(0, slash), b = text.substr(slash + 1);
  for (const std::string& d : {a, b})
    if (d.empty() || d.size() > 16 || d.find_first_not_of("0123456789") != std::string::npos) throw bad();
  Shard s{std::stoull(a), std::stoull(b)};
  if (s.count < 1 || s.count > kMaxSamples || s.index < 1 || s.index > s.count) throw bad();
  return s;
}

std::pair<uint64_t, uint64_t> shard_span(Shard s, uint64_t samples) {
  const auto at = [&](uint64_t i) {
    return static_cast<uint64_t>(static_cast<unsigned __int128>(samples) * i / s.count);
  };
  return {at(s.index - 1), at(s.index) - at(s.index - 1)};
}

json shard_meta(Shard s, uint64_t samples, const json& run) {
  const auto [first, n] = shard_span(s, samples);
  return {{"index", s.index}, {"count", s.count}, {"first", first}, {"samples", n}, {"run", run}};
}

Report merge_shards(const std::vector<ShardReport>& shards, const MergeRules& rules) {
  if (shards.empty()) throw UsageError("merge: no reports to merge");
  std::vector<ShardInfo> info;
  for (const ShardReport& s : shards) info.push_back(shard_info(s));
  const ShardInfo& ref = info[0];
  // What makes two shards one run: everything in meta.shard.run, but the
  // build's commit with --across-commits.
  const auto without_commit = [](json run) {
    run.erase("git_commit");
    return run;
  };
  bool commits_differ = false;
  for (const ShardInfo& s : info) {
    if (s.shard.count != ref.shard.count)
      throw UsageError(fmt::format("merge: {} is shard {}/{}, {} shard {}/{}: not the same split", s.from->path,
                                   s.shard.index, s.shard.count, ref.from->path, ref.shard.index, ref.shard.count));
    const std::string other = first_difference(without_commit(*ref.run), without_commit(*s.run));
    const bool commit_differs = s.run->value("git_commit", json()) != ref.run->value("git_commit", json());
    if (!other.empty() || (commit_differs && !rules.across_commits))  // what differs beside the commit first
      throw UsageError(fmt::format("merge: {} is a shard of another run than {} ({})", s.from->path, ref.from->path,
                                   !other.empty() ? other
                                                  : first_difference(*ref.run, *s.run) +
                                                        "; shards of builds known to give the same values merge with "
                                                        "--across-commits"));
    commits_differ |= commit_differs;
  }
  std::sort(info.begin(), info.end(), [](const ShardInfo& a, const ShardInfo& b) { return a.shard.index < b.shard.index; });
  for (size_t i = 1; i < info.size(); ++i)
    if (info[i].shard.index == info[i - 1].shard.index)
      throw UsageError(fmt::format("merge: {} and {} are both shard {}/{} (overlapping shards)", info[i - 1].from->path,
                                   info[i].from->path, info[i].shard.index, info[i].shard.count));
  if (info.size() != ref.shard.count) {
    uint64_t missing = 1;
    for (const ShardInfo& s : info)
      if (s.shard.index == missing) ++missing;
    throw UsageError(fmt::format("merge: shard {}/{} is missing ({} of {} shards given)", missing, ref.shard.count,
                                 info.size(), ref.shard.count));
  }

  // Entry by entry: the same configurations in the same order in every shard.
  const Report& first = info[0].from->report;
  Report out;
  for (size_t e = 0; e < first.results.size(); ++e) {
    const ReportEntry& r0 = first.results[e];
    const bool per_sample = !r0.per_sample.empty();
    ReportEntry m;
    m.axes = r0.axes;
    m.seed = r0.seed;
    m.samples = ref.total;
    m.sketch = !per_sample;
    std::map<std::string, SketchState> states;
    std::map<std::string, std::vector<double>> values;
    // The worst samples of the whole run are the worst of the shards' (report/worst.hpp).
    std::optional<WorstHeap> worst;
    if (r0.worst) worst.emplace(r0.worst->by, r0.worst->n);
    for (const ShardInfo& s : info) {
      const ShardReport& sr = *s.from;
      if (sr.report.results.size() != first.results.size())
        throw UsageError(fmt::format("merge: {} has {} entries, {} has {}: not shards of one run", sr.path,
                                     sr.report.results.size(), info[0].from->path, first.results.size()));
      const ReportEntry& x = sr.report.results[e];
      if (x.axes != r0.axes)
        throw UsageError(fmt::format("merge: {} is {}, {} results[{}] {}: not shards of one run", where(sr, e),
                                     axes_label(x.axes), info[0].from->path, e, axes_label(r0.axes)));
      if (x.samples != s.samples || x.seed != r0.seed)
        throw UsageError(fmt::format("merge: {} has {} samples of seed {}; shard {}/{} has {} of seed {}", where(sr, e),
                                     x.samples, x.seed, s.shard.index, s.shard.count, s.samples, r0.seed));
      if (x.state.empty() || x.state.size() != r0.metrics.size())
        throw UsageError(fmt::format("merge: {} carries no \"state\" of its statistics (a shard's entries do)", where(sr, e)));
      if (x.per_sample.empty() == per_sample)
        throw UsageError(fmt::format("merge: {} {} per-sample values, {} results[{}] {}", where(sr, e),
                                     per_sample ? "lacks" : "has", info[0].from->path, e, per_sample ? "has" : "does not"));
      if (worst) {
        if (!x.worst || x.worst->by != r0.worst->by || x.worst->n != r0.worst->n)
          throw UsageError(fmt::format("merge: {} {} the worst {} samples by {}, {} results[{}] {}", where(sr, e),
                                       x.worst ? "keeps other worst samples than" : "lacks", r0.worst->n, r0.worst->by,
                                       info[0].from->path, e, "keeps them"));
        worst->add(*x.worst);
      } else if (x.worst) {
        throw UsageError(fmt::format("merge: {} has worst samples, {} results[{}] has none", where(sr, e),
                                     info[0].from->path, e));
      }
      for (const auto& [name, st] : r0.metrics) {
        const auto it = x.state.find(name);
        if (it == x.state.end() || !x.metrics.count(name))
          throw UsageError(fmt::format("merge: {} has no metric {}, which {} results[{}] has", where(sr, e), name,
                                       info[0].from->path, e));
        states[name].merge(it->second);
        if (per_sample) {
          const auto v = x.per_sample.find(name);
          if (v == x.per_sample.end())
            throw UsageError(fmt::format("merge: {} has no per-sample values of {}", where(sr, e), name));
          values[name].insert(values[name].end(), v->second.begin(), v->second.end());
        }
      }
    }
    for (const auto& [name, st] : r0.metrics) {
      const bool flag = st.has_wilson;
      if (per_sample) {
        m.per_sample[name] = values[name];
        m.metrics[name] = aggregate(values[name], flag);  // sorts its copy, as the unsharded run does
      } else {
        m.metrics[name] = states[name].stats(flag);
      }
    }
    if (worst) m.worst = worst->result();
    out.results.push_back(std::move(m));
  }

  // The meta of the whole run: the first shard's, with the times of all.
  out.meta = first.meta;
  out.meta.erase("shard");
  out.meta["samples"] = ref.total;
  for (const ShardInfo& s : info) {
    const json& meta = s.from->report.meta;
    for (const char* k : {"started", "finished"})
      if (meta.contains(k) && meta[k].is_string() && out.meta.contains(k) && out.meta[k].is_string() &&
          (k[0] == 's' ? meta[k].get<std::string>() < out.meta[k].get<std::string>()
                       : meta[k].get<std::string>() > out.meta[k].get<std::string>()))
        out.meta[k] = meta[k];
  }
  out.meta["merged"] = {{"shards", ref.shard.count}};
  if (commits_differ) {
    json commits = json::array();
    for (const ShardInfo& s : info) commits.push_back(s.run->value("git_commit", json()));
    out.meta["merged"]["git_commits"] = commits;
  }
  return out;
}

}  // namespace chunkinv
