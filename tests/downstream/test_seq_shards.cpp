// `seq` as `run`: the same seed gives the same numbers whatever the shard
// split (merge of the shards = the unsharded report, check --exact), and
// a seq killed with SIGKILL part-way and resumed gives the uninterrupted
// report; refusals are one line, exit 2, nothing written.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/process.hpp"
#include "support/shell.hpp"
#include "support/usage_error.hpp"

namespace chunkinv {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Proc = testing::ShellResult;

Proc sh(const std::string& dir, const std::string& args) { return testing::run_chunkinv_in(dir, args); }
json load(const std::string& p) { return testing::load_json(p); }

void expect_one_line_exit_2(const Proc& p, const std::string& expect, const std::string& what) {
  EXPECT_EQ(p.status, 2) << what << "\n" << p.out;
  EXPECT_HAS(p.out, expect);
  EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << what << ": one line\n" << p.out;
}

// Two configurations (chunk 16 and 32), two paths, seven sequences.
const std::string kSeq =
    "seq -a family=sparse_forget -a forget_rate=0.02 -a seq_len=256 -a 'chunk=[16,32]' -a dim=8 -a value_dim=8 "
    "-a 'method=[neumann,fwdsub_fp32]' --paths gold,emulated --samples 7 --per-sample -q ";

TEST(SeqShards, MergedShardsAreTheUnshardedReport) {
  const std::string dir = testing::test_dir("seq-shards");
  ASSERT_EQ(sh(dir, kSeq + "--seed 5 --threads 1 -o whole.json").status, 0);
  for (const int n : {2, 3}) {
    std::string list;
    for (int i = 1; i <= n; ++i) {
      const std::string name = "s" + std::to_string(i) + "of" + std::to_string(n) + ".json";
      const Proc p =
          sh(dir, kSeq + "--seed 5 --threads 2 --shard " + std::to_string(i) + "/" + std::to_string(n) + " -o " + name);
      ASSERT_EQ(p.status, 0) << p.out;
      const json s = load(dir + "/" + name);
      EXPECT_EQ(s["meta"]["shard"]["index"], i);
      EXPECT_TRUE(s["results"][0].contains("state")) << "a shard's entries carry their statistics' state";
      list += " " + name;
    }
    const std::string merged = "merged" + std::to_string(n) + ".json";
    const Proc m = sh(dir, "merge" + list + " -q -o " + merged);
    ASSERT_EQ(m.status, 0) << m.out;
    EXPECT_EQ(load(dir + "/whole.json")["results"], load(dir + "/" + merged)["results"]) << n << " shards";
    const Proc check = sh(dir, "check --exact -q -b whole.json " + merged);
    EXPECT_EQ(check.status, 0) << check.out;
  }
  // Shards of another seed are another run.
  ASSERT_EQ(sh(dir, kSeq + "--seed 6 --shard 2/2 -o other.json").status, 0);
  expect_one_line_exit_2(sh(dir, "merge s1of2.json other.json -o bad.json"), "is a shard of another run", "seed");
  EXPECT_FALSE(fs::exists(dir + "/bad.json"));
  fs::remove_all(dir);
}

TEST(SeqShards, RefusalsAreOneLineAndWriteNothing) {
  const std::string dir = testing::test_dir("seq-shard-refusals");
  const struct {
    std::string args, expect;
  } cases[] = {
      {kSeq + "--shard 3/2", "--shard 3/2: must be i/n"},
      {kSeq + "--shard 1/8", "--shard 1/8: 8 shards of 7 sequences; at most 7 shards"},
      {"seq -a seq_len=64 -a chunk=16 --shard 1/2", "seq --shard needs --per-sample"},
      {kSeq + "--resume", "--resume needs -o FILE"},
      {kSeq + "--checkpoint-every x", "--checkpoint-every"},
  };
  for (const auto& c : cases) {
    expect_one_line_exit_2(sh(dir, c.args + (c.args.find("--resume") != std::string::npos ? "" : " -o r.json")), c.expect,
                           c.args);
    EXPECT_FALSE(fs::exists(dir + "/r.json")) << c.args;
    EXPECT_FALSE(fs::exists(dir + "/r.json.ckpt")) << c.args;
  }
  // --resume without a checkpoint, and a checkpoint of another run.
  expect_one_line_exit_2(sh(dir, kSeq + "--resume -o r.json"), "r.json.ckpt", "no checkpoint");
  EXPECT_FALSE(fs::exists(dir + "/r.json"));
  fs::remove_all(dir);
}

uint64_t size_of(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

// The meta that differs between an interrupted and an uninterrupted run.
json without_times(json j) {
  for (const char* k : {"started", "finished", "resumed", "threads", "argv"}) j["meta"].erase(k);
  return j;
}

// Killed once the first configuration is saved and sequences of the second
// with it; resumed on other threads: the uninterrupted report.
TEST(SeqResume, SigkillThenResumeGivesTheUninterruptedReport) {
  const std::string dir = testing::test_dir("seq-resume");
  const std::vector<std::string> args{"seq", "-a", "family=model_like", "-a", "seq_len=2048", "-a", "chunk=[16,32]",
                                      "-a", "dim=32", "-a", "value_dim=32", "-a", "method=neumann", "--paths",
                                      "gold,emulated", "--samples", "12", "--checkpoint-every", "0", "-q", "-o",
                                      "r.json"};
  std::string line;
  for (const auto& a : args) line += " '" + a + "'";
  const Proc ref = sh(dir, line.substr(0, line.size() - std::string(" 'r.json'").size()) + " 'ref.json' --threads 1");
  ASSERT_EQ(ref.status, 0) << ref.out;

  std::vector<std::string> first = args;
  first.insert(first.end(), {"--threads", "2"});
  testing::Child run(first, dir, "first");
  ASSERT_TRUE(run.started());
  const std::string ckpt = dir + "/r.json.ckpt";
  // The first configuration's record ("{"group":0,") and blocks after it.
  bool caught = false;
  uint64_t least = UINT64_MAX;
  for (int i = 0; i < 120 * 100 && run.running() && !caught; ++i) {
    const std::string bytes = testing::slurp(ckpt);
    if (bytes.find("{\"group\":1,") != std::string::npos) break;  // too late
    if (bytes.find("{\"group\":0,") != std::string::npos) {
      least = std::min<uint64_t>(least, bytes.size());
      caught = bytes.size() > least + 1000;  // two sequences' blocks of the second (27 metrics x 2 entries x 8 bytes each)
    }
    if (!caught) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(caught) << "not caught between the configurations' ends: " << run.err();
  run.signal(SIGKILL);
  const int st = run.wait();
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  ASSERT_FALSE(fs::exists(dir + "/r.json"));
  ASSERT_GT(size_of(ckpt), 0u);
  // A run over it without --resume is refused; another run's options are refused.
  expect_one_line_exit_2(sh(dir, line), "holds an unfinished run; add --resume", "no --resume");
  expect_one_line_exit_2(sh(dir, line + " --seed 1 --resume"), "seed", "another seed");

  const Proc r1 = sh(dir, line + " --threads 1 --resume");
  ASSERT_EQ(r1.status, 0) << r1.out;
  const json a = load(dir + "/ref.json"), b = load(dir + "/r.json");
  EXPECT_EQ(a["results"], b["results"]);
  EXPECT_EQ(without_times(a), without_times(b));
  EXPECT_TRUE(b["meta"].contains("resumed"));
  EXPECT_FALSE(fs::exists(ckpt)) << "the checkpoint goes once the report is written";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace chunkinv
