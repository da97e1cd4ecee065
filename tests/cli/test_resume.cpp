// Nothing lost on a killed run: a real `chunkinv run` killed with SIGKILL
// part-way (a configuration done, samples of the next saved) and resumed
// with other threads and batches gives the report of an uninterrupted run,
// apart from its times; Ctrl-C stops it, leaves no temporary and says how
// to finish; a resume refuses a checkpoint of another run in one line.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/process.hpp"
#include "support/shell.hpp"

namespace fs = std::filesystem;
using chunkinv::testing::Child;
using nlohmann::json;

namespace {

using Proc = chunkinv::testing::ShellResult;
using chunkinv::testing::slurp;

std::string temp_dir() { return chunkinv::testing::test_dir("resume"); }
Proc sh(const std::string& dir, const std::string& args) { return chunkinv::testing::run_chunkinv_in(dir, args); }
json load(const std::string& p) { return chunkinv::testing::load_json(p); }

// Three configurations of model_like at d=64, saved after every batch.
const std::vector<std::string> kRun{"run", "-a", "family=model_like", "-a", "chunk=[16,32,48]", "-a", "dim=64",
                                    "--samples", "800", "--paths", "gold,emulated", "--checkpoint-every", "0",
                                    "-q", "-o", "r.json"};

std::string joined(std::vector<std::string> args) {
  std::string s;
  for (auto& a : args) s += (s.empty() ? "" : " ") + ("'" + a + "'");
  return s;
}

uint64_t size_of(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

// Waits until the checkpoint has grown past `bytes` while the run goes on.
bool wait_for_progress(Child& c, const std::string& ckpt, uint64_t bytes) {
  for (int i = 0; i < 120 * 50; ++i) {
    if (!c.running()) return false;
    if (size_of(ckpt) > bytes) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Waits until the checkpoint holds the first configuration (its record,
// JSON "{"group":0,") and blocks of samples of the second after it: the
// file shrinks when the first configuration's blocks are dropped, then
// grows by a block (50 samples x 3 entries x 14 metrics x 8 bytes).
bool wait_for_partial(Child& c, const std::string& ckpt) {
  uint64_t least = UINT64_MAX;
  for (int i = 0; i < 120 * 100; ++i) {
    if (!c.running()) return false;
    const std::string bytes = slurp(ckpt);
    if (bytes.find("{\"group\":1,") != std::string::npos) return false;  // too late: the second is done
    if (bytes.find("{\"group\":0,") != std::string::npos) {
      least = std::min<uint64_t>(least, bytes.size());
      if (bytes.size() > least + 10000) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The meta that may differ between an interrupted and an uninterrupted run.
json without_times(json j) {
  for (const char* k : {"started", "finished", "resumed", "threads", "argv"}) j["meta"].erase(k);
  return j;
}

void expect_only_report(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "r.json" || name == "ref.json" || name.ends_with(".out") || name.ends_with(".err")) << name;
  }
}

}  // namespace

TEST(Resume, SigkillMidRunThenResumeGivesTheUninterruptedReport) {
  const std::string dir = temp_dir();
  // The uninterrupted run, on one thread in one batch per configuration.
  std::vector<std::string> ref = kRun;
  ref.back() = "ref.json";
  const Proc r0 = sh(dir, joined(ref) + " --threads 1 --batch 4096");
  ASSERT_EQ(r0.status, 0) << r0.out;

  std::vector<std::string> args = kRun;
  args.insert(args.end(), {"--threads", "2", "--batch", "50"});
  Child run(args, dir, "first");
  ASSERT_TRUE(run.started());
  const std::string ckpt = dir + "/r.json.ckpt";
  ASSERT_TRUE(wait_for_partial(run, ckpt)) << "not caught between the first and the second configuration's end: "
                                           << run.err();
  run.signal(SIGKILL);
  const int st = run.wait();
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  ASSERT_FALSE(fs::exists(dir + "/r.json")) << "killed after it finished: nothing was tested";
  ASSERT_TRUE(fs::exists(ckpt));
  // Nothing but the checkpoint beside the report: no temporary, no half report.
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "r.json.ckpt" || name == "ref.json" || name.ends_with(".out") || name.ends_with(".err")) << name;
  }
  // What was saved: a configuration, and the next one part-way.
  const Proc dry = sh(dir, joined(kRun) + " --resume --dry-run");
  ASSERT_EQ(dry.status, 0) << dry.out;
  EXPECT_NE(dry.out.find("C=16 d=64 decay_floor=-5.0: gold/exact, gold/neumann, emulated/neumann (saved)"),
            std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("samples saved)"), std::string::npos) << dry.out;

  // Resumed with other threads and batches: the same results, bit for bit.
  const Proc r1 = sh(dir, joined(kRun) + " --threads 1 --batch 7 --resume");
  ASSERT_EQ(r1.status, 0) << r1.out;
  EXPECT_EQ(r1.out, "") << "-q prints nothing but errors";
  const json a = load(dir + "/ref.json"), b = load(dir + "/r.json");
  EXPECT_EQ(a["results"], b["results"]);
  EXPECT_EQ(without_times(a), without_times(b));
  EXPECT_TRUE(b["meta"].contains("resumed"));
  // The report's command line is the run's own (that reproduces it), not the resume's.
  EXPECT_EQ(b["meta"]["argv"].back(), "50");
  EXPECT_FALSE(fs::exists(ckpt)) << "the checkpoint goes once the report is written";
  expect_only_report(dir);
  fs::remove_all(dir);
}

// Sketch quantiles save no values: the state of the statistics so far, in
// r.json.ckpt.state, replaced whole after each batch here. Killed, then
// resumed on other threads and batches: the uninterrupted report.
TEST(Resume, SketchStateSurvivesSigkill) {
  const std::string dir = temp_dir();
  std::vector<std::string> args = kRun;
  args.insert(args.end(), {"--quantiles", "sketch"});
  std::vector<std::string> ref = args;
  ref[ref.size() - 3] = "ref.json";  // -o ref.json
  ASSERT_EQ(ref[ref.size() - 4], "-o");
  ASSERT_EQ(sh(dir, joined(ref) + " --threads 1").status, 0);
  Child run([&] { auto a = args; a.insert(a.end(), {"--threads", "2", "--batch", "50"}); return a; }(), dir, "first");
  const std::string state = dir + "/r.json.ckpt.state";
  // Until the state is the second configuration's: its record's payload
  // (after magic, kind and length) starts with the configuration's index.
  const auto group_of_state = [&]() -> int64_t {
    const std::string b = slurp(state);
    uint64_t g = 0;
    if (b.size() < 24) return -1;
    std::memcpy(&g, b.data() + 16, 8);
    return int64_t(g);
  };
  bool seen = false;
  for (int i = 0; i < 120 * 100 && !seen && run.running(); ++i) {
    seen = group_of_state() == 1;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(seen) << "no state of the second configuration saved: " << run.err();
  run.signal(SIGKILL);
  run.wait();
  ASSERT_FALSE(fs::exists(dir + "/r.json"));
  const Proc dry = sh(dir, joined(args) + " --resume --dry-run");
  EXPECT_NE(dry.out.find("samples saved)"), std::string::npos) << dry.out;
  const Proc r = sh(dir, joined(args) + " --threads 1 --batch 7 --resume");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(load(dir + "/ref.json")["results"], load(dir + "/r.json")["results"]);
  EXPECT_FALSE(fs::exists(state));
  EXPECT_FALSE(fs::exists(dir + "/r.json.ckpt"));
  fs::remove_all(dir);
}

TEST(Resume, SigintStopsAfterTheBatchSavesAndSaysHowToFinish) {
  const std::string dir = temp_dir();
  std::vector<std::string> ref = kRun;
  ref.back() = "ref.json";
  ASSERT_EQ(sh(dir, joined(ref)).status, 0);
  Child run(kRun, dir, "first");
  ASSERT_TRUE(wait_for_progress(run, dir + "/r.json.ckpt", 3000)) << run.err();
  run.signal(SIGINT);
  const int st = run.wait();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGINT) << "ends as Ctrl-C ends a program (status 130 in a shell)";
  const std::string err = run.err();
  EXPECT_NE(err.find("stopped by SIGINT"), std::string::npos) << err;
  EXPECT_NE(err.find("finish with: "), std::string::npos) << err;
  EXPECT_NE(err.find(" --resume\n"), std::string::npos) << err;
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  // The command it prints finishes the run.
  const std::string again = err.substr(err.find("finish with: ") + 13);
  const auto fin = chunkinv::testing::run_shell("cd '" + dir + "' && " + again.substr(0, again.find('\n')) + " 2>&1");
  ASSERT_EQ(fin.status, 0) << fin.out;
  EXPECT_EQ(load(dir + "/ref.json")["results"], load(dir + "/r.json")["results"]);
  expect_only_report(dir);
  fs::remove_all(dir);
}

TEST(Resume, SigtermStopsLikeSigint) {
  const std::string dir = temp_dir();
  Child run(kRun, dir, "first");
  ASSERT_TRUE(wait_for_progress(run, dir + "/r.json.ckpt", 3000)) << run.err();
  run.signal(SIGTERM);
  const int st = run.wait();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM) << "status 143 in a shell";
  EXPECT_NE(run.err().find("stopped by SIGTERM"), std::string::npos) << run.err();
  EXPECT_TRUE(fs::exists(dir + "/r.json.ckpt"));
  EXPECT_FALSE(fs::exists(dir + "/r.json"));
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  fs::remove_all(dir);
}

TEST(Resume, RefusesACheckpointOfAnotherRunInOneLine) {
  const std::string dir = temp_dir();
  Child run(kRun, dir, "first");
  ASSERT_TRUE(wait_for_progress(run, dir + "/r.json.ckpt", 3000)) << run.err();
  run.signal(SIGKILL);
  run.wait();
  const std::string ckpt = dir + "/r.json.ckpt";
  const uint64_t saved = size_of(ckpt);
  std::string base = joined(kRun);
  struct Case {
    std::string from, to, expect;
  };
  for (const Case& c : {Case{"'800'", "'801'", "samples: 800 there, 801 here"},
                        Case{"'gold,emulated'", "'emulated'", "paths"},
                        Case{"'chunk=[16,32,48]'", "'chunk=[16,32]'", "entries"},
                        Case{"'dim=64'", "'dim=64' --seed 3", "seed: 0 there, 3 here"},
                        Case{"'dim=64'", "'dim=64' --metrics inv_finite", "metrics"}}) {
    std::string args = base;
    args.replace(args.find(c.from), c.from.size(), c.to);
    const Proc p = sh(dir, args + " --resume");
    EXPECT_EQ(p.status, 2) << args << "\n" << p.out;
    EXPECT_NE(p.out.find("was saved by another run (" + c.expect), std::string::npos) << p.out;
    EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << p.out;
  }
  EXPECT_EQ(size_of(ckpt), saved) << "a refused resume leaves the checkpoint as it was";
  // Without --resume, the unfinished run is not replaced either.
  Proc p = sh(dir, base);
  EXPECT_EQ(p.status, 2);
  EXPECT_NE(p.out.find("holds an unfinished run; add --resume"), std::string::npos) << p.out;
  // Garbage is not a checkpoint; a missing one is named.
  std::ofstream(ckpt, std::ios::trunc) << "{\"not\": \"a checkpoint\"}";
  p = sh(dir, base + " --resume");
  EXPECT_EQ(p.status, 2);
  EXPECT_NE(p.out.find("is not a checkpoint of chunkinv"), std::string::npos) << p.out;
  fs::remove(ckpt);
  p = sh(dir, base + " --resume");
  EXPECT_EQ(p.status, 2);
  EXPECT_NE(p.out.find("no checkpoint"), std::string::npos) << p.out;
  p = sh(dir, "run -a chunk=8 --samples 2 --resume");
  EXPECT_EQ(p.status, 2);
  EXPECT_NE(p.out.find("--resume needs -o FILE"), std::string::npos) << p.out;
  fs::remove_all(dir);
}

TEST(Resume, ARecordCutShortByTheKillIsDropped) {
  const std::string dir = temp_dir();
  std::vector<std::string> ref = kRun;
  ref.back() = "ref.json";
  ASSERT_EQ(sh(dir, joined(ref)).status, 0);
  // Batches of 50 save a block of samples each (50 x 3 entries x 14 metrics
  // x 8 bytes), so the file passes 20000 bytes with blocks in it early in
  // the first configuration, on a fast machine as on a slow one; without
  // them only the configurations' records are saved, under 20000 bytes.
  std::vector<std::string> args = kRun;
  args.insert(args.end(), {"--batch", "50"});
  Child run(args, dir, "first");
  const std::string ckpt = dir + "/r.json.ckpt";
  ASSERT_TRUE(wait_for_progress(run, ckpt, 20000)) << run.err();
  run.signal(SIGKILL);
  run.wait();
  // A kill in the middle of a write leaves part of a record: cut the last 100 bytes.
  fs::resize_file(ckpt, size_of(ckpt) - 100);
  const Proc r = sh(dir, joined(kRun) + " --resume");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(load(dir + "/ref.json")["results"], load(dir + "/r.json")["results"]);
  fs::remove_all(dir);
}
