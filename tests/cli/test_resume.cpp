// Nothing lost on a killed run: a real `chunkinv run` killed with SIGKILL
// part-way (a configuration done, samples of the next saved) and resumed
// with other threads and batches gives the report of an uninterrupted run,
// apart from its times; Ctrl-C stops it, leaves no temporary and says how
// to finish; a resume refuses a checkpoint of another run in one line.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <nettle/sha2.h>
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

namespace {

// A checkpoint's records as the file holds them (docs/reliability.md):
// "ckiv", a kind, a length, the payload and its SHA-256.
struct Record {
  uint32_t kind;
  std::string payload;
};

std::string sha256(const std::string& s) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, s.size(), reinterpret_cast<const uint8_t*>(s.data()));
  std::string d(SHA256_DIGEST_SIZE, '\0');
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, reinterpret_cast<uint8_t*>(d.data()));
  return d;
}

std::vector<Record> records_of(const std::string& bytes) {
  std::vector<Record> out;
  for (size_t at = 0; at + 48 <= bytes.size() && bytes.compare(at, 4, "ckiv") == 0;) {
    Record r;
    uint64_t len;
    std::memcpy(&r.kind, bytes.data() + at + 4, 4);
    std::memcpy(&len, bytes.data() + at + 8, 8);
    if (len > bytes.size() - at - 48) break;
    r.payload = bytes.substr(at + 16, len);
    out.push_back(r);
    at += 48 + len;
  }
  return out;
}

// The records framed again, each with a checksum that holds: what a
// deliberate or unlucky edit leaves.
std::string framed(const std::vector<Record>& recs) {
  std::string out;
  for (const Record& r : recs) {
    std::string x(16, '\0');
    const uint64_t len = r.payload.size();
    std::memcpy(x.data(), "ckiv", 4);
    std::memcpy(x.data() + 4, &r.kind, 4);
    std::memcpy(x.data() + 8, &len, 8);
    x += r.payload;
    x += sha256(x.substr(4));
    out += x;
  }
  return out;
}

void put_u64(std::string& s, size_t at, uint64_t v) { std::memcpy(s.data() + at, &v, 8); }
uint64_t get_u64(const std::string& s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}

}  // namespace

// Records that pass their checksum but do not fit the run (a block's count
// or tasks edited, a group's record emptied, doubled, of other axes or
// another group, missing a metric) are refused in one line before anything
// is used, and the checkpoint is left as it was (once a SIGSEGV, or a
// wrong report with exit 0).
TEST(Resume, RecordsThatDoNotFitTheRunAreRefused) {
  const std::string dir = temp_dir();
  std::vector<std::string> args = kRun;
  args.insert(args.end(), {"--threads", "2", "--batch", "50"});
  Child run(args, dir, "first");
  const std::string ckpt = dir + "/r.json.ckpt";
  ASSERT_TRUE(wait_for_partial(run, ckpt)) << run.err();
  run.signal(SIGKILL);
  run.wait();
  const std::string saved = slurp(ckpt);
  const std::vector<Record> recs = records_of(saved);
  size_t group = 0, block = 0;
  for (size_t i = 1; i < recs.size(); ++i) {
    if (recs[i].kind == 2 && !group) group = i;
    if (recs[i].kind == 3 && !block) block = i;
  }
  ASSERT_TRUE(group && block) << recs.size() << " records";
  ASSERT_EQ(get_u64(recs[block].payload, 0), 1u) << "a block of the second configuration";

  using Edit = std::function<void(std::vector<Record>&)>;
  const auto group_json = [&](std::vector<Record>& r, const std::function<void(json&)>& f) {
    json g = json::parse(r[group].payload);
    f(g);
    r[group].payload = g.dump();
  };
  const std::vector<std::pair<std::string, Edit>> edits = {
      {"a block's count + 1", [&](auto& r) { put_u64(r[block].payload, 16, get_u64(r[block].payload, 16) + 1); }},
      {"a block's count 10^6", [&](auto& r) { put_u64(r[block].payload, 16, 1000000); }},
      {"a block's first sample", [&](auto& r) { put_u64(r[block].payload, 8, 50); }},
      {"a block's tasks", [&](auto& r) { put_u64(r[block].payload, 24, 2); }},
      {"a block of group 7", [&](auto& r) { put_u64(r[block].payload, 0, 7); }},
      {"a group's entries emptied", [&](auto& r) { group_json(r, [](json& g) { g["results"] = json::array(); }); }},
      {"a group's record twice", [&](auto& r) { r.insert(r.begin() + long(group), r[group]); }},
      {"a group's axes", [&](auto& r) { group_json(r, [](json& g) { g["results"][0]["axes"]["chunk"] = 32; }); }},
      {"a group's metric missing",
       [&](auto& r) {
         group_json(r, [](json& g) { g["results"][1]["metrics"].erase(g["results"][1]["metrics"].begin()); });
       }},
      {"a group's number", [&](auto& r) { group_json(r, [](json& g) { g["group"] = 2; }); }},
      {"a group's samples", [&](auto& r) { group_json(r, [](json& g) { g["results"][0]["samples"] = 700; }); }},
      {"a record of kind 9", [&](auto& r) { r.push_back({9, "x"}); }},
  };
  for (const auto& [what, edit] : edits) {
    std::vector<Record> r = recs;
    edit(r);
    const std::string bytes = framed(r);
    { std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << bytes; }
    const Proc p = sh(dir, joined(kRun) + " --threads 1 --resume");
    EXPECT_EQ(p.status, 2) << what << ": " << p.out;
    EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << what << ": " << p.out;
    EXPECT_NE(p.out.find("delete it to start over"), std::string::npos) << what << ": " << p.out;
    EXPECT_EQ(slurp(ckpt), bytes) << what << ": a refused resume leaves the checkpoint as it was";
    EXPECT_FALSE(fs::exists(dir + "/r.json")) << what;
  }
  // Untouched, the same records (framed again) resume.
  { std::ofstream(ckpt, std::ios::binary | std::ios::trunc) << framed(recs); }
  const Proc ok = sh(dir, joined(kRun) + " --threads 1 --resume");
  EXPECT_EQ(ok.status, 0) << ok.out;
  fs::remove_all(dir);
}

// A checkpoint (or its saved statistics) that is not a regular file is
// refused at once: a FIFO would block the resume, /dev/zero never end.
TEST(Resume, CheckpointsThatAreNotRegularFilesAreRefused) {
  const std::string dir = temp_dir();
  const std::string ckpt = dir + "/r.json.ckpt";
  // With a timeout, so that a hang fails the test instead of holding ctest.
  const auto resume = [&](const std::vector<std::string>& args, const std::string& extra) {
    return chunkinv::testing::run_shell("cd '" + dir + "' && timeout 20 " + chunkinv::testing::binary() + " " +
                                        joined(args) + extra + " 2>&1");
  };
  const auto expect_refused = [&](const std::string& what, const std::string& says) {
    for (const char* extra : {" --resume --dry-run", " --resume"}) {
      const Proc p = resume(kRun, extra);
      EXPECT_EQ(p.status, 2) << what << extra << ": " << p.out;
      EXPECT_NE(p.out.find(says), std::string::npos) << what << extra << ": " << p.out;
      EXPECT_EQ(std::count(p.out.begin(), p.out.end(), '\n'), 1) << what << extra << ": " << p.out;
    }
  };
  ASSERT_EQ(::mkfifo(ckpt.c_str(), 0600), 0);
  expect_refused("a FIFO", "is a FIFO, not a regular file");
  fs::remove(ckpt);
  fs::create_symlink("/dev/zero", ckpt);
  expect_refused("a link to /dev/zero", "is a character device, not a regular file");
  fs::remove(ckpt);
  // A real checkpoint with a FIFO for its saved statistics.
  std::vector<std::string> args = kRun;
  args.insert(args.end(), {"--quantiles", "sketch"});
  Child run(args, dir, "first");
  ASSERT_TRUE(wait_for_progress(run, ckpt, 100)) << run.err();
  run.signal(SIGKILL);
  run.wait();
  fs::remove(ckpt + ".state");
  ASSERT_EQ(::mkfifo((ckpt + ".state").c_str(), 0600), 0);
  const Proc p = resume(args, " --resume --dry-run");
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_NE(p.out.find("r.json.ckpt.state are a FIFO, not a regular file"), std::string::npos) << p.out;
  fs::remove_all(dir);
}

// Two runs started together on one report: one holds the checkpoint's lock
// and the other is refused in one line (or, started after the first
// finished, runs whole). Killed and resumed, the report is the survivor's
// own seed, equal to an uninterrupted run of it: never a blend of both
// (once 10 trials in 19 ended with exit 0 and blended figures).
TEST(Resume, TwoRunsOnOneReportAreNeverBlended) {
  const std::string dir = temp_dir();
  json want[3];
  for (int seed : {1, 2}) {
    std::vector<std::string> ref = kRun;
    ref.back() = "ref" + std::to_string(seed) + ".json";
    ref.insert(ref.end(), {"--seed", std::to_string(seed)});
    ASSERT_EQ(sh(dir, joined(ref)).status, 0);
    want[seed] = load(dir + "/" + ref[ref.size() - 3]);
    fs::remove(dir + "/" + ref[ref.size() - 3]);
  }
  const std::string ckpt = dir + "/r.json.ckpt";
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<std::string> a1 = kRun, a2 = kRun;
    a1.insert(a1.end(), {"--seed", "1"});
    a2.insert(a2.end(), {"--seed", "2"});
    Child one(a1, dir, "one"), two(a2, dir, "two");
    ASSERT_TRUE(one.started() && two.started());
    // Until the checkpoint holds a configuration, or both have ended.
    for (int i = 0; i < 6000 && (one.running() || two.running()); ++i) {
      if (slurp(ckpt).find("{\"group\":0,") != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    int survivor = 0;
    for (auto* c : {&one, &two}) {
      if (c->running()) c->signal(SIGKILL);
      const int st = c->wait();
      const int seed = c == &one ? 1 : 2;
      if (WIFSIGNALED(st)) {
        EXPECT_EQ(survivor, 0) << "trial " << trial << ": both ran on one checkpoint";
        survivor = seed;
      } else if (WEXITSTATUS(st) == 2) {
        const std::string err = c->err();
        EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
        EXPECT_TRUE(err.find("another run of this report holds it") != std::string::npos ||
                    err.find("holds an unfinished run") != std::string::npos)
            << err;
      } else {
        EXPECT_EQ(WEXITSTATUS(st), 0) << c->err();
      }
    }
    if (survivor) {  // the killed one's resume: its own figures, whole
      std::vector<std::string> args = kRun;
      args.insert(args.end(), {"--seed", std::to_string(survivor)});
      const Proc other = sh(dir, joined(kRun) + " --seed " + std::to_string(3 - survivor) + " --resume");
      EXPECT_EQ(other.status, 2) << other.out;
      const Proc r = sh(dir, joined(args) + " --resume");
      ASSERT_EQ(r.status, 0) << r.out;
    }
    const json got = load(dir + "/r.json");
    const int seed = got["meta"]["seed"].get<int>();
    ASSERT_TRUE(seed == 1 || seed == 2);
    EXPECT_EQ(got["results"], want[seed]["results"]) << "trial " << trial << ": seed " << seed << " blended";
    EXPECT_FALSE(fs::exists(ckpt));
    fs::remove(dir + "/r.json");
  }
  fs::remove_all(dir);
}
