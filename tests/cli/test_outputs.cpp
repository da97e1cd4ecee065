// The command line's edges, run as the user runs them (the binary, through
// a shell): where a report may go (devices, FIFOs, links, stdout, a
// directory, a long name, an input), write errors on stdout, numbers read
// strictly, limits checked before allocating, and the flags around a run
// (--dry-run, -q, --version, --help, the progress bar, shell completion).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <chrono>
#include <csignal>

#include <nlohmann/json.hpp>

#include "cli/process.hpp"
#include "support/sanitizer.hpp"
#include "support/shell.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Proc = chunkinv::testing::ShellResult;
using chunkinv::testing::slurp;

// In `dir`; stdout and stderr together unless the command line redirects them.
Proc sh(const std::string& dir, const std::string& args, const std::string& redirect = "2>&1") {
  return chunkinv::testing::run_chunkinv_in(dir, args, redirect);
}
std::string temp_dir() { return chunkinv::testing::test_dir("out"); }

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> s;
  for (const auto& e : fs::directory_iterator(dir)) s.insert(e.path().filename().string());
  return s;
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

const std::string kTiny = "run -a chunk=8 -a dim=16 --samples 3 --paths gold,emulated ";

}  // namespace

TEST(Output, ADeviceIsWrittenToNotReplaced) {
  const std::string dir = temp_dir();
  // A device node of our own where we may make one (root), else /dev/full itself.
  std::string full = "/dev/full";
  if (::geteuid() == 0 && ::mknod((dir + "/full").c_str(), S_IFCHR | 0666, makedev(1, 7)) == 0) full = dir + "/full";
  const Proc p = sh(dir, kTiny + "-q -o " + full);
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_NE(p.out.find("output " + full + ": write failed (No space left on device)"), std::string::npos) << p.out;
  EXPECT_EQ(lines(p.out), 1u) << p.out;
  struct stat st;
  ASSERT_EQ(::stat(full.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "still the device, not a regular file";
  // /dev/null takes a report and stays what it is.
  EXPECT_EQ(sh(dir, kTiny + "-q -o /dev/null").status, 0);
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  for (const auto& n : names_in(dir)) EXPECT_EQ(n, "full") << "nothing else made: " << n;
  fs::remove_all(dir);
}

TEST(Output, AFifoIsWrittenToNotReplaced) {
  const std::string dir = temp_dir(), fifo = dir + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });  // opening blocks until the writer opens
  const Proc p = sh(dir, kTiny + "-q -o pipe");
  reader.join();
  EXPECT_EQ(p.status, 0) << p.out;
  EXPECT_EQ(json::parse(got)["schema"], "chunkinv.report/2");
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(names_in(dir), std::set<std::string>{"pipe"});
  fs::remove_all(dir);
}

TEST(Output, ASymlinkStaysALinkAndItsTargetIsReplaced) {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/real.json") << "old";
  fs::create_symlink("real.json", dir + "/link.json");
  fs::create_symlink("sub/new.json", dir + "/dangling.json");
  fs::create_directory(dir + "/sub");
  EXPECT_EQ(sh(dir, kTiny + "-q -o link.json").status, 0);
  EXPECT_TRUE(fs::is_symlink(dir + "/link.json"));
  EXPECT_EQ(json::parse(slurp(dir + "/real.json"))["schema"], "chunkinv.report/2");
  EXPECT_EQ(sh(dir, kTiny + "-q -o dangling.json").status, 0);
  EXPECT_TRUE(fs::is_symlink(dir + "/dangling.json"));
  EXPECT_EQ(json::parse(slurp(dir + "/sub/new.json"))["schema"], "chunkinv.report/2");
  EXPECT_EQ(names_in(dir), (std::set<std::string>{"real.json", "link.json", "dangling.json", "sub"}));
  EXPECT_EQ(names_in(dir + "/sub"), std::set<std::string>{"new.json"});
  fs::remove_all(dir);
}

TEST(Output, BadDestinationsAreRefusedBeforeAnyWork) {
  const std::string dir = temp_dir();
  fs::create_directory(dir + "/adir");
  // 10^6 samples would take minutes: a refusal must come first.
  const std::string big = "run -a chunk=32 --samples 1000000 -q ";
  struct Case {
    std::string output, expect;
  };
  for (const Case& c : {Case{"adir", "output adir: is a directory"}, Case{"adir/", "output adir/: is a directory"},
                        Case{"nowhere/r.json", "folder nowhere does not exist"},
                        Case{std::string(256, 'n'), "the file name is 256 bytes, longer than the 255"}}) {
    const Proc p = sh(dir, big + "-o '" + c.output + "'");
    EXPECT_EQ(p.status, 2) << c.output << "\n" << p.out;
    EXPECT_NE(p.out.find(c.expect), std::string::npos) << p.out;
    EXPECT_EQ(lines(p.out), 1u) << p.out;
  }
  EXPECT_EQ(names_in(dir), std::set<std::string>{"adir"});
  EXPECT_TRUE(fs::is_empty(dir + "/adir"));
  if (::geteuid() != 0) {  // root writes anyway
    std::ofstream(dir + "/ro.json") << "keep";
    fs::permissions(dir + "/ro.json", fs::perms::owner_read);
    const Proc p = sh(dir, big + "-o ro.json");
    EXPECT_EQ(p.status, 2);
    EXPECT_NE(p.out.find("read-only"), std::string::npos) << p.out;
    EXPECT_EQ(slurp(dir + "/ro.json"), "keep");
  }
  fs::remove_all(dir);
}

TEST(Output, ANameOf250BytesIsWrittenAndNothingElse) {
  const std::string dir = temp_dir(), name = std::string(245, 'r') + ".json";
  const Proc p = sh(dir, kTiny + "-q -o " + name);
  EXPECT_EQ(p.status, 0) << p.out;
  EXPECT_EQ(names_in(dir), std::set<std::string>{name});
  EXPECT_EQ(json::parse(slurp(dir + "/" + name))["schema"], "chunkinv.report/2");
  fs::remove_all(dir);
}

TEST(Output, StdoutTakesTheReportAndNothingElse) {
  const std::string dir = temp_dir();
  Proc p = sh(dir, kTiny + "-o -", "2>/dev/null");
  EXPECT_EQ(p.status, 0);
  EXPECT_EQ(json::parse(p.out)["schema"], "chunkinv.report/2") << "only the report: no table mixed in";
  // /dev/stdout when stdout is a file: that file gets the report and stays the same file.
  std::ofstream(dir + "/out.json") << "";
  struct stat before, after;
  ::stat((dir + "/out.json").c_str(), &before);
  p = sh(dir, kTiny + "-o /dev/stdout", "> out.json 2>/dev/null");
  EXPECT_EQ(p.status, 0);
  ::stat((dir + "/out.json").c_str(), &after);
  EXPECT_EQ(before.st_ino, after.st_ino);
  EXPECT_EQ(json::parse(slurp(dir + "/out.json"))["schema"], "chunkinv.report/2");
  EXPECT_EQ(names_in(dir), std::set<std::string>{"out.json"});
  fs::remove_all(dir);
}

TEST(Output, AnInputIsNeverOverwritten) {
  const std::string dir = temp_dir();
  ASSERT_EQ(sh(dir, kTiny + "-q -o r.json").status, 0);
  const std::string report = slurp(dir + "/r.json");
  Proc p = sh(dir, "table r.json -o r.json");
  EXPECT_EQ(p.status, 2);
  EXPECT_NE(p.out.find("output r.json: is also an input (r.json)"), std::string::npos) << p.out;
  EXPECT_EQ(slurp(dir + "/r.json"), report);
  fs::create_symlink("r.json", dir + "/same.json");  // the same file under another name
  p = sh(dir, "table r.json -o same.json");
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_EQ(slurp(dir + "/r.json"), report);
  std::ofstream(dir + "/c.json") << R"({"samples": 2, "experiments": [{"family": "floor", "chunk": 8, "dim": 16}]})";
  p = sh(dir, "run c.json -q -o c.json");
  EXPECT_EQ(p.status, 2);
  EXPECT_NE(p.out.find("is also an input (c.json)"), std::string::npos) << p.out;
  ASSERT_EQ(sh(dir, "inspect --family floor -a chunk=8 -a dim=16 --count 3 --export s.npz").status, 0);
  const std::string set = slurp(dir + "/s.npz");
  p = sh(dir, "inspect --inputs s.npz --count 2 --export s.npz");
  EXPECT_EQ(p.status, 2);
  EXPECT_NE(p.out.find("--export s.npz: is the --inputs being read"), std::string::npos) << p.out;
  EXPECT_EQ(slurp(dir + "/s.npz"), set);
  EXPECT_EQ(sh(dir, "table r.json -o t.md").status, 0);  // elsewhere is fine
  fs::remove_all(dir);
}

// A folder of .npy files is an input of its every file: a report over one
// of them, however spelled (a link, a hard link, "d/../d"), is refused and
// the file kept (once `run --inputs d -o d/g.npy` replaced g.npy, exit 0).
TEST(Output, AFileOfAnInputFolderIsNeverOverwritten) {
  const std::string dir = temp_dir();
  ASSERT_EQ(sh(dir, "inspect -a chunk=8 -a dim=8 --count 3 --export d").status, 0);
  ASSERT_EQ(sh(dir, "inspect -a chunk=8 -a dim=8 -a method=neumann --count 3 --export c --export-path emulated").status,
            0);
  const std::string g = slurp(dir + "/d/g.npy"), l = slurp(dir + "/c/L.npy");
  fs::create_symlink("d/g.npy", dir + "/link.npy");
  fs::create_hard_link(dir + "/d/beta.npy", dir + "/hard.npy");
  for (const std::string& cmd : {"run --inputs d -q -o d/g.npy", "run --inputs d -q -o d/../d/g.npy",
                                 "run --inputs d -q -o link.npy", "run --inputs d -q -o hard.npy",
                                 "score --inputs d --candidate c -q -o d/beta.npy",
                                 "score --inputs d --candidate c -q -o c/L.npy"}) {
    const Proc p = sh(dir, cmd);
    EXPECT_EQ(p.status, 2) << cmd << ": " << p.out;
    EXPECT_NE(p.out.find("is also an input"), std::string::npos) << cmd << ": " << p.out;
    EXPECT_EQ(lines(p.out), 1u) << p.out;
  }
  EXPECT_EQ(slurp(dir + "/d/g.npy"), g);
  EXPECT_EQ(slurp(dir + "/c/L.npy"), l);
  EXPECT_EQ(names_in(dir + "/d"), (std::set<std::string>{"beta.npy", "g.npy", "keys.npy"}));
  EXPECT_EQ(sh(dir, "run --inputs d -q -o d.json").status, 0);  // beside it is fine
  fs::remove_all(dir);
}

// A file name is any bytes: shown as text (\xNN for what is not UTF-8 or
// is a control character), one line, and in a report as valid JSON. An
// input so named is refused (a report's axes hold its name); an output is
// written (once exit 3, json type_error.316).
TEST(Output, NamesThatAreNotTextAreShownAsText) {
  const std::string dir = temp_dir();
  Proc p = sh(dir, kTiny + "-q -o 'r\xff.json'");
  ASSERT_EQ(p.status, 0) << p.out;
  const json r = json::parse(slurp(dir + "/r\xff.json"));
  EXPECT_EQ(r["meta"]["argv"].back(), "r\\xff.json");
  p = sh(dir, "check 'r\xff.json' --baseline 'r\xff.json' --format json");
  EXPECT_EQ(p.status, 0) << p.out;
  EXPECT_NO_THROW((void)json::parse(p.out)) << p.out;
  ASSERT_EQ(sh(dir, "inspect -a chunk=8 -a dim=8 --count 3 --export s.npz").status, 0);
  fs::copy_file(dir + "/s.npz", dir + "/bad\xff.npz");
  fs::copy_file(dir + "/s.npz", dir + "/new\nline.npz");
  for (const std::string& cmd : {"run --inputs 'bad\xff.npz' -q -o x.json", "inspect --inputs 'bad\xff.npz'",
                                 "run --inputs 'new\nline.npz' -q -o x.json", "table 'new\nline.json'",
                                 "run --inputs 'gone\n\xfe.npz' -q -o x.json"}) {
    p = sh(dir, cmd);
    EXPECT_EQ(p.status, 2) << cmd << ": " << p.out;
    EXPECT_EQ(lines(p.out), 1u) << cmd << ": " << p.out;
    EXPECT_TRUE(p.out.find("\\xff") != std::string::npos || p.out.find("\\x0a") != std::string::npos) << p.out;
  }
  EXPECT_FALSE(fs::exists(dir + "/x.json"));
  fs::remove_all(dir);
}

// A tensor set is written whole or not at all: killed at any moment of
// `inspect --export`, the file is the one before or the new one complete,
// and nothing else is left (once a 4 MB cut-off .npz over a good 198 MB one).
TEST(Output, AnExportKilledMidWriteLeavesTheFileBefore) {
  const std::string dir = temp_dir();
  ASSERT_EQ(sh(dir, "inspect -a chunk=8 -a dim=8 --count 2 --export s.npz").status, 0);
  const std::string before = slurp(dir + "/s.npz");
  const std::vector<std::string> args{"inspect", "-a", "chunk=64", "-a", "dim=128", "--count", "1500", "--export", "s.npz"};
  for (int delay_ms : {30, 120, 250, 400, 700}) {
    chunkinv::testing::Child c(args, dir, "export");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    c.signal(SIGKILL);
    c.wait();
    const std::string now = slurp(dir + "/s.npz");
    if (now != before) {
      const Proc p = sh(dir, "inspect --inputs s.npz --index 1499 --paths emulated");
      EXPECT_EQ(p.status, 0) << "killed after " << delay_ms << " ms: a partial file (" << now.size() << " bytes): " << p.out;
    }
    EXPECT_EQ(names_in(dir), (std::set<std::string>{"s.npz", "export.out", "export.err"})) << delay_ms << " ms";
  }
  fs::remove_all(dir);
}

TEST(Output, AWriteErrorOnStdoutIsExit2) {
  const std::string dir = temp_dir();
  ASSERT_EQ(sh(dir, kTiny + "-q -o r.json").status, 0);
  for (const std::string& cmd : std::vector<std::string>{"table r.json", kTiny, "check r.json --baseline r.json", "info",
                                "inspect --family floor -a chunk=8 -a dim=16 --paths emulated", "run --list-paths",
                                "--version", "--help"}) {
    const Proc p = sh(dir, cmd, "> /dev/full 2>&1");
    // stderr went to /dev/full too: the status says it.
    EXPECT_EQ(p.status, 2) << cmd;
    const Proc q = sh(dir, cmd, "2>&1 > /dev/full");
    EXPECT_EQ(q.status, 2) << cmd;
    EXPECT_NE(q.out.find("chunkinv: standard output: write failed"), std::string::npos) << cmd << ": " << q.out;
  }
  fs::remove_all(dir);
}

TEST(Cli, NumbersAreReadStrictly) {
  const std::string dir = temp_dir();
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases{
      {"--samples -5", "--samples -5: must be a whole number from 1 to 1000000000000000"},
      {"--samples 0", "--samples 0: must be a whole number from 1"},
      {"--samples 2.5", "--samples 2.5: must be a whole number"},
      {"--samples 1e16", "--samples 1e16: must be a whole number from 1 to 1000000000000000"},
      {"--samples 18446744073709551616", "--samples 18446744073709551616: must be"},
      {"--samples ten", "--samples ten: must be"},
      {"--batch -1", "--batch -1: must be a whole number from 1"},
      {"--batch 0", "--batch 0: must be"},
      {"--seed -1", "--seed -1: must be a whole number from 0 to 18446744073709551615"},
      {"--threads -2", "--threads -2: must be a whole number from 0 to 1024"},
      {"--threads 100000", "--threads 100000: must be"},
      {"--max-memory lots", "--max-memory lots: not a size"},
      {"--checkpoint-every -1", "--checkpoint-every -1: must be"},
      {"--format yaml", "unknown table format \"yaml\""},
  };
  for (const auto& c : cases) {
    const std::string samples = c.args.starts_with("--samples") ? "" : "--samples 3 ";
    const Proc p = sh(dir, "run -a chunk=8 -a dim=16 " + samples + c.args + " -q -o r.json");
    EXPECT_EQ(p.status, 2) << c.args << "\n" << p.out;
    EXPECT_NE(p.out.find(c.expect), std::string::npos) << c.args << "\n" << p.out;
    EXPECT_EQ(lines(p.out), 1u) << p.out;
  }
  for (const std::string args : {"bench --samples -1", "bench --repeat 0", "bench --cpu-samples 1.5", "bench --threads x",
                                 "inspect --seed -1", "inspect --index -3", "inspect --count 0 --export e",
                                 "inspect --count 5"}) {
    const Proc p = sh(dir, args);
    EXPECT_EQ(p.status, 2) << args << "\n" << p.out;
    EXPECT_EQ(lines(p.out), 1u) << p.out;
  }
  EXPECT_TRUE(fs::is_empty(dir)) << "no report, no temporary";
  // A power of ten is a whole number too.
  ASSERT_EQ(sh(dir, "run -a chunk=8 -a dim=16 --samples 1e1 --seed 7 -q -o r.json").status, 0);
  EXPECT_EQ(json::parse(slurp(dir + "/r.json"))["results"][0]["samples"], 10);
  fs::remove_all(dir);
}

// An empty value is no value: once `inspect --paths ''` showed every path,
// `run --samples ''` ran the default. Each is refused where it is parsed.
TEST(Cli, EmptyValuesAreRefused) {
  const std::string dir = temp_dir();
  for (const std::string args :
       {"inspect -a chunk=8 --paths '' --brief", "run -a chunk=8 --samples 2 --paths '' -q -o r.json",
        "run -a chunk=8 --samples '' -q -o r.json", "run -a chunk=8 --seed '' -q -o r.json", "run -a '' -q -o r.json",
        "run -a chunk=8 --samples 2 -q -o ''", "bench -a chunk=8 --paths ''", "search -a chunk=8 --path '' -o r.json",
        "seq --paths '' -o r.json", "table r.json -o ''"}) {
    const Proc p = sh(dir, args);
    EXPECT_EQ(p.status, 2) << args << "\n" << p.out;
    EXPECT_NE(p.out.find(": an empty value; give one, or leave the option out"), std::string::npos) << args << "\n" << p.out;
    EXPECT_EQ(lines(p.out), 1u) << p.out;
  }
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

// `table r.json r.json` once gave every row twice, the report column the
// same in both; one file given twice, however spelled, is refused. A copy
// is another report: its rows are told apart by the report column.
TEST(Cli, OneReportTwiceInATableIsRefused) {
  const std::string dir = temp_dir();
  ASSERT_EQ(sh(dir, kTiny + "-q -o r.json").status, 0);
  fs::create_symlink("r.json", dir + "/link.json");
  fs::copy_file(dir + "/r.json", dir + "/copy.json");
  for (const std::string args : {"table r.json r.json", "table r.json ./r.json", "table r.json link.json -o t.md"}) {
    const Proc p = sh(dir, args);
    EXPECT_EQ(p.status, 2) << args << "\n" << p.out;
    EXPECT_NE(p.out.find("give each report once"), std::string::npos) << args << "\n" << p.out;
    EXPECT_EQ(lines(p.out), 1u) << p.out;
  }
  EXPECT_FALSE(fs::exists(dir + "/t.md"));
  const Proc two = sh(dir, "table r.json copy.json", "2>/dev/null");
  EXPECT_EQ(two.status, 0);
  EXPECT_NE(two.out.find("| report"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("copy.json"), std::string::npos) << two.out;
  fs::remove_all(dir);
}

TEST(Cli, LimitsAreCheckedBeforeAllocatingAndSayWhatFits) {
  const std::string dir = temp_dir();
  const std::regex most("at most ([0-9]+) samples");
  std::smatch m;
  // Samples: with exact quantiles every sample's metrics are held until the
  // configuration is aggregated; sketch quantiles (the default past 10^6
  // samples) need the same memory for 10^9 samples as for 10^6.
  Proc p = sh(dir, "run -a chunk=16 --samples 1e9 --exact-quantiles --max-memory 800M -q -o r.json");
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_NE(p.out.find("--samples 1000000000: every sample's metric values need"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("800 MiB this process may use (--max-memory)"), std::string::npos) << p.out;
  ASSERT_TRUE(std::regex_search(p.out, m, most)) << p.out;
  const uint64_t samples = std::stoull(m[1]);
  EXPECT_GT(samples, 100000u);
  const std::string exact = " --exact-quantiles --max-memory 800M --dry-run";
  EXPECT_EQ(sh(dir, "run -a chunk=16 --samples " + std::to_string(samples) + exact).status, 0);
  EXPECT_EQ(sh(dir, "run -a chunk=16 --samples " + std::to_string(samples + 1) + exact).status, 2);
  p = sh(dir, "run -a chunk=16 --samples 1e9 --max-memory 800M --dry-run");
  EXPECT_EQ(p.status, 0) << p.out;
  EXPECT_NE(p.out.find("quantiles: sketch"), std::string::npos) << p.out;
  // The batch: at C=64, d=128 a sample and its outputs take hundreds of KiB.
  p = sh(dir, "run -a chunk=64 --batch 1000000 --samples 2000000 --max-memory 800M -q -o r.json");
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_NE(p.out.find("--batch 1000000: a batch"), std::string::npos) << p.out;
  ASSERT_TRUE(std::regex_search(p.out, m, std::regex("at most ([0-9]+) samples per batch"))) << p.out;
  const uint64_t batch = std::stoull(m[1]);
  EXPECT_EQ(sh(dir, "run -a chunk=64 --batch " + std::to_string(batch) + " --samples 2000000 --max-memory 800M --dry-run").status, 0);
  EXPECT_EQ(sh(dir, "run -a chunk=64 --batch " + std::to_string(batch + 1) + " --samples 2000000 --max-memory 800M --dry-run").status, 2);
  // Without --batch, the default shrinks to what fits.
  p = sh(dir, "run -a chunk=64 --samples 100000 --max-memory 800M --dry-run");
  EXPECT_EQ(p.status, 0) << p.out;
  ASSERT_TRUE(std::regex_search(p.out, m, std::regex("\\(batch ([0-9]+)\\)"))) << p.out;
  EXPECT_LT(std::stoull(m[1]), 4096u);
  // Under a real address-space limit, the limit is named (not under
  // AddressSanitizer, whose binary cannot start under one).
  if (!chunkinv::testing::kAddressSanitizer) {
    const auto u = chunkinv::testing::run_shell("cd '" + dir + "' && ulimit -v 800000 && " + chunkinv::testing::binary() +
                                                " run -a chunk=16 --samples 1e9 --exact-quantiles -q -o r.json 2>&1");
    EXPECT_EQ(u.status, 2) << u.out;
    EXPECT_NE(u.out.find("(ulimit -v)"), std::string::npos) << u.out;
  }
  // inspect --export holds every sample it writes.
  p = sh(dir, "inspect --family floor --export e.npz --count 1e8");
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_NE(p.out.find("--count 100000000: exporting holds every sample"), std::string::npos) << p.out;
  p = sh(dir, "inspect --family floor -a dim=16 --export e.npz --count 1e8 --max-memory 1M");
  ASSERT_TRUE(std::regex_search(p.out, m, most)) << p.out;
  const uint64_t count = std::stoull(m[1]);
  ASSERT_GT(count, 0u);
  EXPECT_EQ(sh(dir, "inspect --family floor -a dim=16 --export e.npz --max-memory 1M --count " + std::to_string(count)).status, 0);
  EXPECT_EQ(sh(dir, "inspect --family floor -a dim=16 --export f.npz --max-memory 1M --count " + std::to_string(count + 1)).status, 2);
  EXPECT_EQ(names_in(dir), std::set<std::string>{"e.npz"});
  // bench holds a timed run's samples at once.
  p = sh(dir, "bench --samples 1e9 --cpu-samples 1e9 --paths emulated");
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_NE(p.out.find("--cpu-samples 1000000000: a timed run of path emulated"), std::string::npos) << p.out;
  fs::remove_all(dir);
}

TEST(Cli, NothingToRunDryRunQuietVersionHelp) {
  const std::string dir = temp_dir();
  Proc p = sh(dir, "run -q -o r.json");
  EXPECT_EQ(p.status, 2);
  EXPECT_NE(p.out.find("run: nothing to run"), std::string::npos) << p.out;
  // --dry-run lists what a run would do and does none of it.
  p = sh(dir, "run " + std::string(CHUNKINV_SOURCE_DIR) + "/configs/quickstart.json -a 'method=[neumann,fwdsub_fp32]' --dry-run -o r.json");
  EXPECT_EQ(p.status, 0) << p.out;
  EXPECT_NE(p.out.find("quickstart: 5 configurations, 25 report entries, 100 samples each, seed 0, paths gold, emulated"),
            std::string::npos) << p.out;
  EXPECT_NE(p.out.find("  floor C=19 d=128 decay_floor=-5: gold/exact, gold/neumann, emulated/neumann, gold/fwdsub_fp32, "
                       "emulated/fwdsub_fp32\n"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("report: r.json, saved as it goes in r.json.ckpt"), std::string::npos) << p.out;
  EXPECT_TRUE(fs::is_empty(dir));
  // -q: nothing but errors, on either stream.
  p = sh(dir, kTiny + "-q -o r.json");
  EXPECT_EQ(p.status, 0);
  EXPECT_EQ(p.out, "");
  // Without -q and with stderr not a terminal: the table on stdout, no progress bar.
  p = sh(dir, kTiny + "-o s.json", "2>&1");
  EXPECT_NE(p.out.find("| Chunk"), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find('\r'), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("report written to s.json"), std::string::npos) << p.out;
  p = sh(dir, "--version");
  EXPECT_EQ(p.status, 0);
  EXPECT_TRUE(std::regex_match(p.out, std::regex("chunkinv [0-9]+\\.[0-9]+\\.[0-9]+ \\([^)]+\\)\n"))) << p.out;
  p = sh(dir, "--help");
  EXPECT_EQ(p.status, 0);
  for (const char* code : {"0 done", "1 check found", "2 bad input", "3 an internal error: a bug"})
    EXPECT_NE(p.out.find(code), std::string::npos) << p.out;
  fs::remove_all(dir);
}

// In a terminal, run draws a bar with its share done, samples per second and the time left.
TEST(Cli, ProgressBarInATerminal) {
  if (chunkinv::testing::run_shell("command -v script > /dev/null").status != 0) GTEST_SKIP() << "no script(1) for a terminal";
  const std::string dir = temp_dir();
  const auto r = chunkinv::testing::run_shell(
      "cd '" + dir + "' && script -qfec \"" + chunkinv::testing::binary() +
      " run -a family=model_like -a 'chunk=[16,32]' -a dim=64 --samples 3000 --batch 100 --paths gold,emulated -o r.json\" "
      "/dev/null");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(std::regex_search(
      r.out, std::regex("\r\033\\[K +[0-9]+% \\[=*>? *\\] [0-9.]+[kMGT]? samples/s  [^\r]*left  model_like C=32 d=64")))
      << r.out;
  const auto q = chunkinv::testing::run_shell("cd '" + dir + "' && script -qfec \"" + chunkinv::testing::binary() + " " +
                                              kTiny + "-q -o q.json\" /dev/null");
  EXPECT_EQ(q.out, "") << "-q: no bar either";
  fs::remove_all(dir);
}

// Completion, asked as bash asks it: subcommands, every option of every
// subcommand (from the binary's own --help), and the values of --paths,
// --format, --preset and -a.
TEST(Cli, ShellCompletionOffersSubcommandsOptionsAndValues) {
  const std::string script = std::string(CHUNKINV_SOURCE_DIR) + "/scripts/completion/chunkinv.bash";
  const std::string dir = temp_dir();
  auto complete = [&](const std::string& words) {  // the candidates for the last word of `chunkinv WORDS`
    const std::string cmd = "source '" + script + "'; COMP_WORDS=(" + chunkinv::testing::binary() + " " + words +
                            "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _chunkinv; printf '%s\\n' \"${COMPREPLY[@]}\"";
    std::ofstream(dir + "/c.sh") << cmd;
    const auto r = chunkinv::testing::run_shell("cd '" + dir + "' && bash c.sh 2>&1");
    std::set<std::string> got;
    std::istringstream in(r.out);
    for (std::string w; std::getline(in, w);) got.insert(w);
    return got;
  };
  auto has = [](const std::set<std::string>& s, const std::string& w) { return s.count(w) > 0; };
  const auto subs = complete("''");
  size_t checked = 0;
  for (const std::string cmd : {"run", "table", "check", "merge", "inspect", "info", "bench"}) {
    EXPECT_TRUE(has(subs, cmd)) << cmd;
    const auto opts = complete(cmd + " -");
    const std::string help = sh(dir, cmd + " --help").out;
    const std::regex opt("(^|[ ,])(--[a-z][a-z0-9-]*)");
    for (auto it = std::sregex_iterator(help.begin(), help.end(), opt); it != std::sregex_iterator(); ++it, ++checked)
      EXPECT_TRUE(has(opts, (*it)[2])) << cmd << " " << (*it)[2];
  }
  EXPECT_GT(checked, 40u);
  EXPECT_EQ(complete("run --re"), std::set<std::string>{"--resume"});
  const auto paths = complete("run --paths ''");
  EXPECT_TRUE(has(paths, "gold") && has(paths, "emulated") && has(paths, "all"));
  EXPECT_EQ(complete("table --format ''"), (std::set<std::string>{"md", "latex", "csv"}));
  EXPECT_EQ(complete("run --quantiles ''"), (std::set<std::string>{"auto", "exact", "sketch"}));
  EXPECT_EQ(complete("run --pipeline ''"), (std::set<std::string>{"auto", "host", "device"}));
  EXPECT_TRUE(has(complete("table -p ''"), "k3-exponent"));
  EXPECT_TRUE(has(complete("run -a ''"), "decay_floor="));
  EXPECT_EQ(complete("run -a family=mod"), std::set<std::string>{"family=model_like"});
  EXPECT_TRUE(has(complete("run -a method=''"), "method=fwdsub_fp32"));
  EXPECT_EQ(complete("run --metrics inv_f"), std::set<std::string>{"inv_finite"});
  EXPECT_TRUE(has(complete("run --metrics ''"), "inv_max_abs"));
  // The zsh function reads the same words; check its syntax where zsh is.
  if (chunkinv::testing::run_shell("command -v zsh > /dev/null").status == 0) {
    const auto z = chunkinv::testing::run_shell("zsh -n '" + std::string(CHUNKINV_SOURCE_DIR) + "/scripts/completion/_chunkinv' 2>&1");
    EXPECT_EQ(z.status, 0) << z.out;
  }
  fs::remove_all(dir);
}
