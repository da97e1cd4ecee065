// What a user meets first, run as the user runs it (the binary, through
// popen): the worst samples and the `inspect` command of each, which runs
// as printed; `inspect --brief` fits a screen and `--candidate` shows where
// a scored kernel's errors sit; tables explain their columns and mark a
// quantile of too few samples; a pivot; `check` for CI (JUnit, GitHub
// annotations, --update, -q); `-q` prints nothing anywhere; one default
// family; an axis list written without brackets is shown how.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>

#include "report/report.hpp"
#include "support/shell.hpp"

using namespace chunkinv;
using chunkinv::testing::binary;
using chunkinv::testing::run_chunkinv_in;
using chunkinv::testing::run_shell;
using chunkinv::testing::slurp;

namespace {

std::string dir_for(const std::string& what) { return chunkinv::testing::test_dir("users-" + what); }

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// The lines of `text` that are inspect commands, with the binary for "chunkinv".
std::vector<std::string> inspect_commands(const std::string& text) {
  std::vector<std::string> out;
  static const std::regex cmd(R"(\n    chunkinv (inspect [^\n]*))");
  for (std::sregex_iterator it(text.begin(), text.end(), cmd), end; it != end; ++it)
    out.push_back(binary() + " " + (*it)[1].str());
  return out;
}

}  // namespace

TEST(Users, RunWorstListsTheSamplesAndTheirCommandsRun) {
  const std::string d = dir_for("run");
  auto r = run_chunkinv_in(d, "run -a family=floor -a 'chunk=[16,19]' -a dim=32 --samples 30 --paths gold,emulated "
                              "--worst 2 -o r.json", "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("floor chunk=19 decay_floor=-5 dim=32 method=neumann, path emulated (30 samples): the 2 worst by inv_total_rel_rmse"),
            std::string::npos) << r.out;
  const auto cmds = inspect_commands(r.out);
  ASSERT_EQ(cmds.size(), 8u) << "two per entry with inv_total_rel_rmse (gold/neumann, emulated/neumann at two chunks)\n" << r.out;
  // At C = 19 every inverse overflows: its worst are samples 0 and 1 (ties by index).
  EXPECT_NE(r.out.find("--paths emulated --seed 0 --sample 0 --brief"), std::string::npos) << r.out;
  const Report rep = read_report(d + "/r.json");
  size_t with = 0;
  for (const auto& e : rep.results) with += e.worst.has_value();
  EXPECT_EQ(with, 4u);
  // The command runs as printed and shows that sample.
  const auto shown = run_shell("cd '" + d + "' && " + cmds.back() + " 2>&1");
  EXPECT_EQ(shown.status, 0) << shown.out;
  EXPECT_NE(shown.out.find("emulated / neumann: inv_total_rel_rmse"), std::string::npos) << shown.out;
  // table --worst reads the list back; -q prints nothing.
  const auto t = run_chunkinv_in(d, "table r.json --worst 2");
  EXPECT_EQ(t.status, 0) << t.out;
  EXPECT_EQ(inspect_commands(t.out), cmds);
  EXPECT_EQ(run_chunkinv_in(d, "run -a family=floor -a chunk=8 -a dim=16 --samples 5 --worst 2 -q").out, "");
  const auto none = run_chunkinv_in(d, "run -a family=floor -a chunk=8 -a dim=16 --samples 5 -q -o plain.json && " +
                                           binary() + " table plain.json --worst 2");
  EXPECT_EQ(none.status, 2) << none.out;
  EXPECT_NE(none.out.find("--per-sample"), std::string::npos) << none.out;
  const auto dev = run_chunkinv_in(d, "run -a chunk=8 --samples 5 --worst 2 --pipeline device -q");
  EXPECT_EQ(dev.status, 2) << dev.out;
}

TEST(Users, ScoreWorstPointsAtTheCandidateAndInspectShowsItsErrors) {
  const std::string d = dir_for("score");
  auto r = run_chunkinv_in(d, "inspect --family model_like -a chunk=16 -a dim=32 --count 12 --export x.npz "
                              "--export-path emulated");
  ASSERT_EQ(r.status, 0) << r.out;
  r = run_chunkinv_in(d, "score --inputs x.npz --candidate x.npz -q -o s.json");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "") << "score -q prints nothing but errors";
  r = run_chunkinv_in(d, "score --inputs x.npz --candidate x.npz --worst 3 --by l_rel_rmse", "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  auto cmds = inspect_commands(r.out);
  ASSERT_EQ(cmds.size(), 6u) << "three of the gold's neumann, three of the candidate's\n" << r.out;
  cmds.erase(std::remove_if(cmds.begin(), cmds.end(), [](const std::string& c) { return c.find("--candidate") == std::string::npos; }),
             cmds.end());
  ASSERT_EQ(cmds.size(), 3u) << r.out;
  EXPECT_NE(cmds[0].find("inspect --inputs x.npz --candidate x.npz -a chunk=16"), std::string::npos) << cmds[0];
  const auto shown = run_shell("cd '" + d + "' && " + cmds[0] + " 2>&1");
  ASSERT_EQ(shown.status, 0) << shown.out;
  EXPECT_NE(shown.out.find("candidate / neumann:"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("INV against the gold: RMS(gold)"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find("per band of 4 rows (down) x 4 columns (across)"), std::string::npos) << shown.out;
  EXPECT_LE(lines(shown.out), 40u) << shown.out;
  EXPECT_EQ(run_chunkinv_in(d, "inspect --candidate x.npz").status, 2);
}

TEST(Users, InspectBriefFitsAScreenAndTheDefaultFamilyIsRuns) {
  const std::string d = dir_for("inspect");
  const auto full = run_chunkinv_in(d, "inspect -a chunk=32 --paths emulated", "2>/dev/null");
  const auto brief = run_chunkinv_in(d, "inspect -a chunk=32 --paths emulated --brief", "2>/dev/null");
  ASSERT_EQ(brief.status, 0) << brief.out;
  EXPECT_GT(lines(full.out), 200u);
  EXPECT_LE(lines(brief.out), 40u) << brief.out;
  EXPECT_NE(brief.out.find("\"family\":\"floor\""), std::string::npos) << "run's default family: " << brief.out;
  const auto json = run_chunkinv_in(d, "inspect -a chunk=8 --paths emulated --format json", "2>/dev/null");
  EXPECT_EQ(nlohmann::json::parse(json.out)["sample"]["axes"]["family"], "floor");
  EXPECT_EQ(run_chunkinv_in(d, "inspect --brief --format json").status, 2);
}

TEST(Users, AxisListWithoutBracketsShowsTheSyntax) {
  const auto r = run_chunkinv_in(dir_for("axis"), "run -a chunk=16,32 --samples 2");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("-a 'chunk=[16,32]'"), std::string::npos) << r.out;
  EXPECT_EQ(lines(r.out), 1u) << r.out;
}

TEST(Users, TablesExplainTheirColumnsAndPivot) {
  const std::string d = dir_for("table");
  ASSERT_EQ(run_chunkinv_in(d, "run -a family=floor -a 'chunk=[8,16]' -a dim=16 --samples 50 -q -o r.json").status, 0);
  const auto plain = run_chunkinv_in(d, "table r.json");
  EXPECT_EQ(plain.out.find("- INV total median:"), std::string::npos) << "no legend where stdout is no terminal";
  // 50 samples: p99 needs 100, so it is a mark, explained in the legend.
  EXPECT_NE(plain.out.find("n<100"), std::string::npos) << plain.out;
  const auto legend = run_chunkinv_in(d, "table r.json --legend");
  for (const char* line : {"- Chunk C: the chunk size C", "- INV total median: median over the samples of inv_total_rel_rmse",
                           "- INV power p99: 99th percentile over the samples of inv_gold_l_rel_rmse",
                           "- n<100, n<1000, ...: a quantile of fewer samples", "- path gold: a method on the FP64 gold L"})
    EXPECT_NE(legend.out.find(line), std::string::npos) << line << "\n" << legend.out;
  EXPECT_EQ(run_chunkinv_in(d, "table r.json --legend --no-legend").status, 2);
  const auto pivot = run_chunkinv_in(d, "table r.json --preset k3-model --columns chunk --legend");
  ASSERT_EQ(pivot.status, 0) << pivot.out;
  EXPECT_NE(pivot.out.find("| chunk=8: Finite | chunk=8: INV total |"), std::string::npos) << pivot.out;
  EXPECT_NE(pivot.out.find("chunk=16: INV power"), std::string::npos) << pivot.out;
  EXPECT_NE(pivot.out.find("- chunk=8, chunk=16: each group of columns"), std::string::npos) << pivot.out;
  EXPECT_EQ(lines(pivot.out.substr(0, pivot.out.find("\n\n") + 1)), 3u) << "header, rule, one row\n" << pivot.out;
  const auto bad = run_chunkinv_in(d, "table r.json --columns nosuch");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.out.find("--columns nosuch: no row of the table has that axis"), std::string::npos) << bad.out;
  EXPECT_EQ(run_chunkinv_in(d, "table r.json -q").out, "");
}

TEST(Users, CheckSpeaksJunitAndGithubAndRefreshesABaseline) {
  const std::string d = dir_for("check");
  ASSERT_EQ(run_chunkinv_in(d, "run -a family=floor -a 'chunk=[8,19]' -a dim=16 --samples 20 -q -o base.json").status, 0);
  ASSERT_EQ(run_chunkinv_in(d, "run -a family=floor -a 'chunk=[8,19]' -a dim=16 --samples 20 --seed 1 -q -o new.json").status, 0);
  auto r = run_chunkinv_in(d, "check new.json --baseline base.json --junit j.xml -q");
  EXPECT_EQ(r.out, "") << "-q: the exit status says it";
  const int status = r.status;
  EXPECT_TRUE(status == 0 || status == 1) << status;
  const std::string xml = slurp(d + "/j.xml");
  EXPECT_EQ(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"", 0), 0u) << xml;
  EXPECT_NE(xml.find("<testcase classname=\"floor chunk=8 decay_floor=-5 dim=16 method=neumann emulated\" name=\"floor "
                     "chunk=8 decay_floor=-5 dim=16 method=neumann emulated: inv_total_rel_rmse.median\""),
            std::string::npos) << xml;
  EXPECT_EQ(xml.find("<failure") != std::string::npos, status == 1) << xml;
  r = run_chunkinv_in(d, "check new.json --baseline base.json --format github");
  EXPECT_NE(r.out.find("::notice title=chunkinv check::check: "), std::string::npos) << r.out;
  r = run_shell("cd '" + d + "' && GITHUB_ACTIONS=true " + binary() + " check new.json --baseline base.json 2>&1");
  EXPECT_NE(r.out.find("| configuration"), std::string::npos);
  EXPECT_NE(r.out.find("::notice title=chunkinv check::"), std::string::npos) << r.out;
  // --update: the new report becomes the baseline byte for byte, exit 0; then the check is clean.
  r = run_chunkinv_in(d, "check new.json --baseline base.json --update -q");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(slurp(d + "/base.json"), slurp(d + "/new.json"));
  EXPECT_EQ(run_chunkinv_in(d, "check new.json --baseline base.json --exact -q").status, 0);
}

TEST(Users, MergedShardsKeepTheWholeRunsWorstSamples) {
  const std::string d = dir_for("shards");
  const std::string run = "run -a family=model_like -a chunk=32 -a dim=16 -a decay_floor=-8 --samples 60 --paths gold,emulated "
                          "--worst 4 -q ";
  ASSERT_EQ(run_chunkinv_in(d, run + "-o whole.json").status, 0);
  ASSERT_EQ(run_chunkinv_in(d, run + "--shard 1/3 -o s1.json").status, 0);
  ASSERT_EQ(run_chunkinv_in(d, run + "--shard 2/3 -o s2.json").status, 0);
  ASSERT_EQ(run_chunkinv_in(d, run + "--shard 3/3 --threads 1 -o s3.json").status, 0);
  const auto m = run_chunkinv_in(d, "merge s3.json s1.json s2.json -o merged.json -q");
  ASSERT_EQ(m.status, 0) << m.out;
  const Report whole = read_report(d + "/whole.json"), merged = read_report(d + "/merged.json");
  ASSERT_EQ(whole.results.size(), merged.results.size());
  size_t lists = 0;
  for (size_t e = 0; e < whole.results.size(); ++e) {
    ASSERT_EQ(whole.results[e].worst.has_value(), merged.results[e].worst.has_value());
    if (!whole.results[e].worst) continue;
    ++lists;
    EXPECT_EQ(worst_to_json(*whole.results[e].worst), worst_to_json(*merged.results[e].worst)) << e;
  }
  EXPECT_EQ(lists, 2u);
  const auto mixed = run_chunkinv_in(d, "run -a family=model_like -a chunk=32 -a dim=16 -a decay_floor=-8 --samples 60 "
                                        "--paths gold,emulated -q --shard 1/3 -o plain1.json && " +
                                            binary() + " merge plain1.json s2.json s3.json -o x.json");
  EXPECT_EQ(mixed.status, 2) << "shards with and without worst samples: " << mixed.out;
}
