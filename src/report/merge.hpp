// Shards of a run and their merge (run --shard i/n, chunkinv merge;
// docs/design.md, "Shards and merge"). Shard i of n covers a fixed range
// of sample indices of every configuration; its entries carry the
// mergeable state of their statistics (metrics/sketch.hpp). Merging every
// shard of a run gives the unsharded run's entries: the same bits for the
// same quantile mode (sketch states add exactly; with --per-sample the
// values are put back in index order and aggregated as one run would).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report.hpp"

namespace chunkinv {

struct Shard {
  uint64_t index = 1;  // 1 to count
  uint64_t count = 1;
};

// "2/8"; UsageError("--shard TEXT: ...") unless 1 <= i <= n <= 10^15.
Shard parse_shard(const std::string& text);
// The samples of shard s of a run of `samples` per configuration:
// [floor((i - 1) N / n), floor(i N / n)), as (first, count).
std::pair<uint64_t, uint64_t> shard_span(Shard s, uint64_t samples);
// What a shard's report says of itself (meta.shard): which shard, its
// samples, and `run`, everything its results depend on (compared by merge).
nlohmann::json shard_meta(Shard s, uint64_t samples, const nlohmann::json& run);

struct ShardReport {
  std::string path;  // for messages
  Report report;
};
struct MergeRules {
  // Shards whose runs differ only in the build's git_commit are one run
  // (merge --across-commits): for a long run whose shards were made by
  // builds known to give the same values. The merged meta lists each
  // shard's commit (merged.git_commits, in shard order); its git_commit is
  // the first shard's, as always.
  bool across_commits = false;
};

// Every shard of one run, in any order, merged into the run's report.
// UsageError naming the culprit: a report that is not a shard, shards of
// different runs or splits, a shard twice or missing, entries that differ
// or lack their state.
Report merge_shards(const std::vector<ShardReport>& shards, const MergeRules& rules = {});

}  // namespace chunkinv
