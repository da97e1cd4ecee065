// The table model, its three formatters, the presets and the table command.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/error.hpp"
#include "report/table.hpp"
#include "report/report_fixtures.hpp"

namespace chunkinv {
namespace {

using testing::EntrySpec;
using testing::make_entry;
using testing::make_gold_entry;
using testing::run_chunkinv;
using testing::TempDir;
using testing::write_report;
using testing::write_text;

TEST(TableNumbers, ThreeSignificantDigitsLikeTheArticle) {
  EXPECT_EQ(format_sig3(8.80e-7), "8.80e-7");
  EXPECT_EQ(format_sig3(1.2345e-6), "1.23e-6");
  EXPECT_EQ(format_sig3(-6.51e-8), "-6.51e-8");
  EXPECT_EQ(format_sig3(7.55e-2), "7.55e-2");
  EXPECT_EQ(format_sig3(1.33), "1.33");
  EXPECT_EQ(format_sig3(19.6), "19.6");
  EXPECT_EQ(format_sig3(532.4), "532");
  EXPECT_EQ(format_sig3(5870), "5.87e3");
  EXPECT_EQ(format_sig3(9.996), "10.0");   // rounding moves the exponent
  EXPECT_EQ(format_sig3(999.7), "1.00e3");
  EXPECT_EQ(format_sig3(0.0), "0");
  EXPECT_EQ(format_sig3(INFINITY), "inf");
  EXPECT_EQ(format_sig3(-INFINITY), "-inf");
  EXPECT_EQ(format_sig3(NAN), "nan");
}

TEST(TableNumbers, PercentNeverClaimsAllOrNoneWhenItIsNot) {
  EXPECT_EQ(format_percent(1.0), "100");
  EXPECT_EQ(format_percent(0.0), "0");
  EXPECT_EQ(format_percent(0.94), "94.0");
  EXPECT_EQ(format_percent(2.0 / 3.0), "66.7");
  EXPECT_EQ(format_percent(0.0563), "5.63");
  EXPECT_EQ(format_percent(0.9996), "99.96");
  EXPECT_EQ(format_percent(0.999999), "99.9999");
  EXPECT_EQ(format_percent(1e-6), "0.000100");
}

TEST(TableNumbers, FullPrecisionReadsBack) {
  const double v = 1.0920864080970822e-06;
  EXPECT_EQ(std::stod(format_full(v)), v);
  EXPECT_EQ(format_full(INFINITY), "inf");
}

// One small table with every kind of cell and characters each format must escape.
Table small_table() {
  Table t;
  t.columns = {{"name", Align::kLeft, ""},
               {"error", Align::kRight, ""},
               {"count", Align::kRight, ""},
               {"finite", Align::kRight, ""},
               {"power", Align::kRight, ""}};
  t.rows.push_back({Cell::of_text("a|b_c"), Cell::number(8.8e-7), Cell::count(15), Cell::share(0.94, 0.875, 0.972),
                    Cell::power(16)});
  t.rows.push_back({Cell::of_text("x,\"y\""), Cell::number(INFINITY), Cell::count(0), Cell::share(1.0), Cell::empty()});
  return t;
}

TEST(TableFormat, Markdown) {
  const std::string expected =
      "| name   |   error | count |             finite | power |\n"
      "|:-------|--------:|------:|-------------------:|------:|\n"
      "| a\\|b_c | 8.80e-7 |    15 | 94.0% [87.5, 97.2] |  L^16 |\n"
      "| x,\"y\"  |     inf |     0 |               100% |     - |\n";
  EXPECT_EQ(to_markdown(small_table()), expected);
}

TEST(TableFormat, LatexUsesBooktabsAndSiunitx) {
  const std::string expected =
      "\\begin{tabular}{lrrrr}\n"
      "\\toprule\n"
      "name & error & count & finite & power \\\\\n"
      "\\midrule\n"
      "a\\textbar{}b\\_c & \\num{8.80e-7} & \\num{15} & 94.0\\% [87.5, 97.2] & $L^{16}$ \\\\\n"
      "x,\"y\" & $\\infty$ & \\num{0} & 100\\% & -- \\\\\n"
      "\\bottomrule\n"
      "\\end{tabular}\n";
  EXPECT_EQ(to_latex(small_table()), expected);
}

TEST(TableFormat, CsvQuotesPerRfc4180AndKeepsFullPrecision) {
  const std::string expected =
      "name,error,count,finite,finite low,finite high,power\n"
      "a|b_c,8.8e-07,15,0.94,0.875,0.972,16\n"
      "\"x,\"\"y\"\"\",inf,0,1,,,\n";
  EXPECT_EQ(to_csv(small_table()), expected);
}

TEST(TableFormat, ParseFormatNamesTheNearest) {
  EXPECT_EQ(parse_table_format("md"), TableFormat::kMarkdown);
  EXPECT_EQ(parse_table_format("latex"), TableFormat::kLatex);
  EXPECT_EQ(parse_table_format("csv"), TableFormat::kCsv);
  try {
    parse_table_format("latx");
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("\"latex\""), std::string::npos) << e.what();
  }
}

std::vector<std::string> headers(const Table& t) {
  std::vector<std::string> h;
  for (const auto& c : t.columns) h.push_back(c.header);
  return h;
}

// The article's exponent-boundary table, from one report holding gold and emulated.
Report floor_report() {
  Report r;
  for (int c : {16, 8, 19}) {
    r.results.push_back(make_gold_entry("floor", c));
    EntrySpec s;
    s.chunk = c;
    if (c == 8) s.inv_total_median = 8.80e-7;
    if (c == 19) {
      s.inv_finite = 0;
      s.decay_zeros = 2;
    }
    r.results.push_back(make_entry(s));
  }
  return r;
}

TEST(TablePresets, ExponentBoundaryHasTheArticleColumns) {
  const Table t = build_table({{"r.json", floor_report()}}, "k3-exponent");
  EXPECT_EQ(headers(t), (std::vector<std::string>{"Chunk C", "inverse finite", "decay = 0", "reciprocal = inf",
                                                  "INV total", "INV power"}));
  // The gold path is the reference and has no row; chunks ascend.
  const std::string md = to_markdown(t);
  EXPECT_NE(md.find("|       8 |           100% |         0 |                0 |   8.80e-7 |   8.51e-8 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("|      19 |             0% |         2 |                2 |       inf |   8.51e-8 |"),
            std::string::npos)
      << md;
  EXPECT_LT(md.find("|       8 |"), md.find("|      16 |"));
  EXPECT_EQ(t.rows.size(), 3u);
}

TEST(TablePresets, StressAndModelHaveTheArticleColumns) {
  Report r;
  EntrySpec s;
  s.family = "weak_decay_correlated";
  s.chunk = 17;
  s.power_exponent = 16;
  s.power_max = 24.3;
  r.results.push_back(make_entry(s));
  const Table stress = build_table({{"r.json", r}}, "k3-stress");
  EXPECT_EQ(headers(stress), (std::vector<std::string>{"Chunk C", "Highest power formed", "Max power magnitude",
                                                       "INV total", "INV power", "Finite"}));
  EXPECT_NE(to_latex(stress).find("\\num{17} & $L^{16}$ & \\num{48.6}"), std::string::npos) << to_latex(stress);

  const Table model = build_table({{"r.json", r}}, "k3-model");
  EXPECT_EQ(headers(model),
            (std::vector<std::string>{"Chunk C", "Finite", "INV total", "INV power", "Max power magnitude"}));
}

TEST(TablePresets, SummaryShowsTheWilsonIntervalAndP99) {
  Report r;
  EntrySpec s;
  s.samples = 100;
  s.inv_finite = 94;
  r.results.push_back(make_entry(s));
  const Table t = build_table({{"r.json", r}}, "summary");
  EXPECT_EQ(headers(t), (std::vector<std::string>{"Chunk C", "Samples", "Finite [95% CI]", "L median",
                                                  "INV total median", "INV total p99", "Method only median",
                                                  "INV power median", "INV power p99"}));
  const std::string md = to_markdown(t);
  // 94/100 with its 95% Wilson interval [87.5%, 97.2%].
  EXPECT_NE(md.find("94.0% [87.5, 97.2]"), std::string::npos) << md;
}

TEST(TablePresets, SeveralReportsGroupByFamilyAndPath) {
  Report emulated, kernel;
  for (int c : {16, 8}) {
    EntrySpec s;
    s.chunk = c;
    emulated.results.push_back(make_entry(s));
    s.path = "kernel";
    kernel.results.push_back(make_entry(s));
    EntrySpec m = s;
    m.family = "model_like";
    kernel.results.push_back(make_entry(m));
  }
  const Table t = build_table({{"emulated.json", emulated}, {"kernel.json", kernel}}, "k3-model");
  EXPECT_EQ(headers(t), (std::vector<std::string>{"family", "path", "Chunk C", "Finite", "INV total", "INV power",
                                                  "Max power magnitude"}));
  std::vector<std::string> order;
  for (const auto& row : t.rows) order.push_back(row[0].text + "/" + row[1].text + "/" + format_sig3(row[2].value));
  EXPECT_EQ(order, (std::vector<std::string>{"floor/emulated/8.00", "floor/emulated/16.0", "floor/kernel/8.00",
                                             "floor/kernel/16.0", "model_like/kernel/8.00", "model_like/kernel/16.0"}));
}

TEST(TablePresets, TheSameConfigurationFromTwoReportsIsLabelled) {
  Report a, b;
  a.results.push_back(make_entry(EntrySpec{}));
  b.results.push_back(make_entry(EntrySpec{}));
  const Table t = build_table({{"before.json", a}, {"after.json", b}}, "k3-exponent");
  EXPECT_EQ(t.columns.front().header, "report");
  EXPECT_EQ(t.rows.at(0).at(0).text, "before.json");
  EXPECT_EQ(t.rows.at(1).at(0).text, "after.json");
}

TEST(TablePresets, FullShowsEveryStatisticOfEveryMetric) {
  const Table t = build_table({{"r.json", floor_report()}}, "full");
  EXPECT_EQ(headers(t), (std::vector<std::string>{"path", "Chunk C", "metric", "samples", "median", "mean", "p10",
                                                  "p90", "p99", "min", "max", "finite_count", "wilson_low",
                                                  "wilson_high"}));
  // 3 gold entries x 4 metrics + 3 emulated entries x 13 metrics.
  EXPECT_EQ(t.rows.size(), 3u * 4u + 3u * 13u);
}

TEST(TablePresets, UnknownPresetNamesTheNearest) {
  try {
    build_table({}, "k3-stres");
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean \"k3-stress\""), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- the binary

TEST(TableCommand, WritesEachFormat) {
  TempDir dir;
  const std::string report = write_report(dir, "floor.json", floor_report());
  auto md = run_chunkinv("table '" + report + "' --preset k3-exponent --format md", dir);
  EXPECT_EQ(md.status, 0) << md.errors;
  EXPECT_EQ(md.output, to_markdown(build_table({{report, floor_report()}}, "k3-exponent")));

  auto tex = run_chunkinv("table '" + report + "' --preset k3-exponent --format latex", dir);
  EXPECT_EQ(tex.status, 0) << tex.errors;
  EXPECT_NE(tex.output.find("\\toprule"), std::string::npos);
  EXPECT_NE(tex.output.find("$\\infty$"), std::string::npos);

  const std::string out = dir.file("t.csv");
  auto csv = run_chunkinv("table '" + report + "' --preset k3-exponent --format csv -o '" + out + "'", dir);
  EXPECT_EQ(csv.status, 0) << csv.errors;
  EXPECT_EQ(csv.output, "");
  std::ifstream in(out);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "Chunk C,inverse finite,decay = 0,reciprocal = inf,INV total,INV power");
}

// A real run laid out as the article's first table: at decay_floor -5 the
// decays leave the BF16 range at C=19 (2 zeros, 2 infinite reciprocals, no
// finite inverse) while C=16 is clean (SPEC §5).
TEST(TableCommand, RunThenTableReproducesTheExponentBoundary) {
  TempDir dir;
  const std::string report = dir.file("run.json");
  const auto run = run_chunkinv("run -a family=floor -a 'chunk=[16,19]' -a decay_floor=-5 --samples 20 "
                                "--paths gold,emulated -q -o '" + report + "'",
                                dir);
  ASSERT_EQ(run.status, 0) << run.errors;
  const auto csv = run_chunkinv("table '" + report + "' --preset k3-exponent --format csv", dir);
  ASSERT_EQ(csv.status, 0) << csv.errors;
  // Rows of CSV fields, the header first.
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(csv.output);
  for (std::string line; std::getline(lines, line);) {
    rows.emplace_back();
    std::istringstream fields(line);
    for (std::string f; std::getline(fields, f, ',');) rows.back().push_back(f);
  }
  ASSERT_EQ(rows.size(), 3u) << csv.output;
  ASSERT_EQ(rows[1].size(), 6u);
  ASSERT_EQ(rows[2].size(), 6u);
  // Chunk C, inverse finite, decay = 0, reciprocal = inf, INV total.
  EXPECT_EQ(std::vector<std::string>(rows[1].begin(), rows[1].begin() + 4), (std::vector<std::string>{"16", "1", "0", "0"}));
  EXPECT_EQ(std::vector<std::string>(rows[2].begin(), rows[2].begin() + 5),
            (std::vector<std::string>{"19", "0", "2", "2", "inf"}));
}

TEST(TableCommand, UnknownPresetExitsTwoWithTheNearestName) {
  TempDir dir;
  const std::string report = write_report(dir, "floor.json", floor_report());
  auto r = run_chunkinv("table '" + report + "' --preset k3-modle", dir);
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.errors.find("did you mean \"k3-model\""), std::string::npos) << r.errors;
  EXPECT_EQ(r.output, "");
}

TEST(TableCommand, UnreadableReportExitsTwo) {
  TempDir dir;
  auto missing = run_chunkinv("table '" + dir.file("nope.json") + "'", dir);
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.errors.find("nope.json"), std::string::npos) << missing.errors;

  const std::string foreign = write_text(dir, "foreign.json", "{\"schema\": \"something/else\", \"results\": []}");
  auto bad = run_chunkinv("table '" + foreign + "'", dir);
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.errors.find("schema"), std::string::npos) << bad.errors;
}

}  // namespace
}  // namespace chunkinv

namespace chunkinv {
namespace {

// scripts/plot.py renders a report (with per-sample histograms) to a PNG, and
// refuses a foreign file with exit status 2. Skipped without matplotlib.
TEST(PlotScript, RendersAReportAndRejectsABadOne) {
  std::string python;
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    const std::string probe = std::string(candidate) + " -c 'import matplotlib, numpy' >/dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) {
      python = candidate;
      break;
    }
  }
  if (python.empty()) GTEST_SKIP() << "no python3 with matplotlib and numpy";
  testing::TempDir dir;
  Report r;
  for (int c : {8, 16, 19}) {
    testing::EntrySpec s;
    s.chunk = c;
    if (c == 19) s.inv_finite = 0;
    ReportEntry e = testing::make_entry(s);
    e.per_sample["inv_total_rel_rmse"] = std::vector<double>(10, c == 19 ? INFINITY : 1e-6 * c);
    r.results.push_back(e);
    r.results.push_back(testing::make_gold_entry("floor", c));
  }
  const std::string report = testing::write_report(dir, "r.json", r);
  const std::string png = dir.file("r.png");
  const std::string script = std::string(CHUNKINV_SOURCE_DIR) + "/scripts/plot.py";
  ASSERT_EQ(std::system((python + " '" + script + "' '" + report + "' -o '" + png + "'").c_str()), 0);
  std::ifstream in(png, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");

  const std::string bad = testing::write_text(dir, "bad.json", "{\"schema\": \"other\"}");
  const int st = std::system((python + " '" + script + "' '" + bad + "' -o '" + png + "' 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(st), 2);
}

}  // namespace
}  // namespace chunkinv
