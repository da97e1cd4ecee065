// The table model, its three formatters, the presets and the table command.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
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

// Numbers in siunitx S columns (bare, aligned on the decimal marker, the
// table-format wide enough for each column); infinity, missing values and
// headers in braces; a share's interval in a column of its own. (Before
// the paper-ready layout numbers were \num{...} in plain r columns.)
TEST(TableFormat, LatexUsesBooktabsAndSiunitxColumns) {
  const std::string expected =
      "\\begin{tabular}{lS[table-format=1.2e-1]S[table-format=2]S[table-format=3.1]cr}\n"
      "\\toprule\n"
      "name & {error} & {count} & {finite} & 95\\% CI & power \\\\\n"
      "\\midrule\n"
      "a\\textbar{}b\\_c & 8.80e-7 & 15 & 94.0 & [87.5, 97.2] & $L^{16}$ \\\\\n"
      "x,\"y\" & {$\\infty$} & 0 & 100 &  & -- \\\\\n"
      "\\bottomrule\n"
      "\\end{tabular}\n";
  EXPECT_EQ(to_latex(small_table()), expected);
}

TEST(TableFormat, LatexTableFormatHoldsSignsAndExponents) {
  Table t;
  t.columns = {{"x", Align::kRight, ""}, {"axis", Align::kRight, ""}};
  t.rows.push_back({Cell::number(-532.4), Cell::of_text("-12")});
  t.rows.push_back({Cell::number(1.2345e-12), Cell::of_text("0.5")});
  t.rows.push_back({Cell::number(NAN), Cell::of_text("n/a")});
  const std::string tex = to_latex(t);
  // -532, 1.23e-12: a sign, 3 integer and 2 decimal digits, a two-digit
  // negative exponent. The axis column holds text that is not a number: r.
  EXPECT_NE(tex.find("\\begin{tabular}{S[table-format=-3.2e-2]r}"), std::string::npos) << tex;
  EXPECT_NE(tex.find("{NaN} & n/a"), std::string::npos) << tex;
}

TEST(TableFormat, LatexCaptionAndLabelMakeAFloat) {
  Table t = small_table();
  t.caption = "Errors at $C = 16$";
  t.label = "tab:errors";
  const std::string tex = to_latex(t);
  EXPECT_EQ(tex.rfind("\\begin{table}[tbp]\n\\centering\n\\caption{Errors at $C = 16$}\n\\label{tab:errors}\n"
                      "\\begin{tabular}",
                      0),
            0u)
      << tex;
  const std::string end = "\\bottomrule\n\\end{tabular}\n\\end{table}\n";
  EXPECT_EQ(tex.substr(tex.size() - end.size()), end);
}

TEST(TableFormat, CsvQuotesPerRfc4180AndKeepsFullPrecision) {
  const std::string expected =
      "name,error,count,finite,finite low,finite high,power\n"
      "a|b_c,8.8e-07,15,0.94,0.875,0.972,16\n"
      "\"x,\"\"y\"\"\",inf,0,1,,,\n";
  EXPECT_EQ(to_csv(small_table()), expected);
}

// A newline, a CR or a tab (an axis value of a report edited by hand, a
// file's name) or a byte that is not UTF-8 once split a Markdown row in
// two; every format now shows them as \xNN (core/text's printable), text
// as it is.
TEST(TableFormat, ControlCharactersAndBytesThatAreNotTextAreEscapedInEveryFormat) {
  Table t;
  t.columns = {{"name\nx", Align::kLeft, ""}, {"error", Align::kRight, ""}};
  t.rows.push_back({Cell::of_text("new\nline|\r"), Cell::number(1)});
  t.rows.push_back({Cell::of_text("bad\xff\tname é"), Cell::number(2)});
  const std::string md = to_markdown(t);
  EXPECT_EQ(std::count(md.begin(), md.end(), '\n'), 4) << md;
  EXPECT_NE(md.find("| new\\x0aline\\|\\x0d "), std::string::npos) << md;
  EXPECT_NE(md.find("| bad\\xff\\x09name é "), std::string::npos) << md;
  EXPECT_NE(md.find("| name\\x0ax "), std::string::npos) << md;
  const std::string csv = to_csv(t);
  EXPECT_EQ(csv, "name\\x0ax,error\nnew\\x0aline|\\x0d,1\nbad\\xff\\x09name é,2\n");
  const std::string tex = to_latex(t);
  EXPECT_NE(tex.find("new\\textbackslash{}x0aline\\textbar{}\\textbackslash{}x0d"), std::string::npos) << tex;
  EXPECT_EQ(tex.find('\xff'), std::string::npos) << tex;
  EXPECT_EQ(tex.find('\t'), std::string::npos) << tex;
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
  EXPECT_NE(to_latex(stress).find("17 & $L^{16}$ & 48.6"), std::string::npos) << to_latex(stress);

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
                                                  "p90", "p99", "p999", "p999999", "min", "max", "finite_count",
                                                  "wilson_low", "wilson_high"}));
  // 3 gold entries x 4 metrics + 3 emulated entries x 13 metrics.
  EXPECT_EQ(t.rows.size(), 3u * 4u + 3u * 13u);
}

// A method comparison: `methods` in the order a run gives them, on `paths`
// (the gold's own entry and its methods too) at chunks 16 and 8; the first
// method loses every inverse at C = 16.
Report methods_report(const std::vector<std::string>& methods, const std::vector<std::string>& paths) {
  Report r;
  for (int c : {16, 8}) {
    ReportEntry g = make_gold_entry("floor", c);
    g.axes["method"] = "exact";
    r.results.push_back(g);
    for (const auto& path : paths) {
      for (size_t m = 0; m < methods.size(); ++m) {
        EntrySpec s;
        s.path = path;
        s.chunk = c;
        s.inv_total_median = 1.0e-6 * static_cast<double>(m + 1);
        if (m == 0 && c == 16) s.inv_finite = 0;
        ReportEntry e = make_entry(s);
        e.axes["method"] = methods[m];
        r.results.push_back(e);
      }
    }
  }
  return r;
}

TEST(TablePresets, MethodsPutTheMethodsOfAConfigurationInAdjacentRows) {
  const Report r = methods_report({"neumann", "flashkda_v2", "blockwise"}, {"gold", "emulated"});
  const Table t = build_table({{"r.json", r}}, "methods");
  // The method after the chunk, whether or not it varies; no gold rows.
  EXPECT_EQ(headers(t), (std::vector<std::string>{"Chunk C", "method", "INV total median", "INV total p99",
                                                  "INV total p99.9", "Finite", "INV power median", "INV power p99.9"}));
  std::vector<std::string> order;
  for (const auto& row : t.rows) order.push_back(std::to_string(static_cast<int>(row[0].value)) + "/" + row[1].text);
  // Chunks ascending, the methods of each in the order the run gave them (not by name).
  EXPECT_EQ(order, (std::vector<std::string>{"8/neumann", "8/flashkda_v2", "8/blockwise", "16/neumann",
                                             "16/flashkda_v2", "16/blockwise"}));
  const std::string md = to_markdown(t);
  // 100 samples: p99.9 needs 1000, so its cell is the mark (docs/tables.md).
  EXPECT_NE(md.find("|      16 | neumann     |              inf |           inf |          n<1000 |     0% |          8.51e-8 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("|       8 | flashkda_v2 |          2.00e-6 |"), std::string::npos) << md;
}

// ---------------------------------------------------------------- layouts

// One report with `paths` side by side at chunks 8 and 16 (and 32 for the first).
Report paths_report(const std::vector<std::string>& paths, const std::vector<uint64_t>& samples = {}) {
  Report r;
  for (size_t p = 0; p < paths.size(); ++p) {
    for (int c : {8, 16, 32}) {
      if (c == 32 && p > 0) continue;
      EntrySpec s;
      s.path = paths[p];
      s.chunk = c;
      if (p < samples.size()) s.samples = s.inv_finite = samples[p];
      ReportEntry e = make_entry(s);
      e.axes["method"] = "neumann";
      r.results.push_back(e);
    }
  }
  return r;
}

std::vector<std::string> groups(const Table& t) {
  std::vector<std::string> g;
  for (const auto& c : t.columns) g.push_back(c.group);
  return g;
}

TEST(TableLayouts, LatexPutsEachPathInAColumnGroupWithItsSampleCount) {
  const Table t = build_table({{"r.json", paths_report({"emulated", "kernel"})}}, "k3-exponent",
                              TableLayout::kColumnGroups);
  // One row per configuration: chunks 8, 16, 32; kernel has no 32.
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(headers(t), (std::vector<std::string>{"Chunk C", "inverse finite", "decay = 0", "reciprocal = inf",
                                                  "INV total", "INV power", "inverse finite", "decay = 0",
                                                  "reciprocal = inf", "INV total", "INV power"}));
  EXPECT_EQ(groups(t), (std::vector<std::string>{"", "emulated", "emulated", "emulated", "emulated", "emulated",
                                                 "kernel", "kernel", "kernel", "kernel", "kernel"}));
  const std::string tex = to_latex(t);
  EXPECT_NE(tex.find("& \\multicolumn{5}{c}{emulated, $n = 100$} & \\multicolumn{5}{c}{kernel, $n = 100$} \\\\\n"
                     "\\cmidrule(lr){2-6}\\cmidrule(lr){7-11}\n"),
            std::string::npos)
      << tex;
  // The statistic under each title; the axis's header on the last line.
  EXPECT_NE(tex.find("{Chunk $C$} & {\\%} & {max} & {max} & {median} & {median} & {\\%}"), std::string::npos) << tex;
  EXPECT_NE(tex.find("\n32 & 100 & 0 & 0 & 1.23e-6 & 8.51e-8 & {--} & {--} & {--} & {--} & {--} \\\\\n"),
            std::string::npos)
      << tex;
  // Markdown keeps one row per path (the article's layout).
  const Table rows = build_table({{"r.json", paths_report({"emulated", "kernel"})}}, "k3-exponent");
  EXPECT_EQ(rows.rows.size(), 5u);
  EXPECT_EQ(rows.columns.at(0).header, "path");
}

TEST(TableLayouts, MethodsAreColumnGroupsToo) {
  Report r;
  for (const char* method : {"neumann", "fwdsub_fp32"}) {
    ReportEntry e = make_entry(EntrySpec{});
    e.axes["method"] = method;
    r.results.push_back(e);
  }
  const Table t = build_table({{"r.json", r}}, "k3-model", TableLayout::kColumnGroups);
  EXPECT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.columns.at(1).group, "emulated / neumann");
  EXPECT_EQ(t.columns.back().group, "emulated / fwdsub_fp32");
}

TEST(TableLayouts, MethodsAreRowsAndPathsColumnGroupsInTheMethodsPreset) {
  const Report r = methods_report({"neumann", "flashkda_v2"}, {"emulated", "kernel"});
  const Table t = build_table({{"r.json", r}}, "methods", TableLayout::kColumnGroups);
  ASSERT_EQ(t.rows.size(), 4u);
  EXPECT_EQ(groups(t), (std::vector<std::string>{"", "", "emulated", "emulated", "emulated", "emulated", "emulated",
                                                 "emulated", "kernel", "kernel", "kernel", "kernel", "kernel", "kernel"}));
  const std::string tex = to_latex(t);
  EXPECT_NE(tex.find("& & \\multicolumn{6}{c}{emulated, $n = 100$} & \\multicolumn{6}{c}{kernel, $n = 100$} \\\\\n"),
            std::string::npos)
      << tex;
  EXPECT_NE(tex.find("{Chunk $C$} & method & {median} & {p99} & {p99.9} & {\\%} & {median} & {p99.9} & {median}"),
            std::string::npos)
      << tex;
  // Not a number: infinity in braces, as every preset writes it.
  EXPECT_NE(tex.find("\n16 & neumann & {$\\infty$} & {$\\infty$} & {$n<1000$} & 0 & 8.51e-8 &"), std::string::npos) << tex;
  EXPECT_NE(tex.find("\n16 & flashkda\\_v2 & 2.00e-6 &"), std::string::npos) << tex;

  // CSV: tidy as every preset, the rows in the methods' order.
  const std::string csv = to_csv(build_table({{"r.json", r}}, "methods", TableLayout::kTidy));
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "family,chunk,dim,path,method,decay_floor,samples,inv_total_rel_rmse_median,inv_total_rel_rmse_p99,"
            "inv_total_rel_rmse_p999,inv_finite_mean,inv_gold_l_rel_rmse_median,inv_gold_l_rel_rmse_p999");
  EXPECT_NE(csv.find("\nfloor,8,128,emulated,neumann,-5,100,"), std::string::npos) << csv;
  EXPECT_LT(csv.find("floor,8,128,emulated,neumann"), csv.find("floor,8,128,emulated,flashkda_v2"));
  EXPECT_NE(csv.find("floor,16,128,emulated,neumann,-5,100,inf,inf,,0,"), std::string::npos) << csv;
}

TEST(TableLayouts, GroupsWiderThanTheLimitFallBackToRows) {
  // summary: 8 columns and an interval per path; two paths are 18 > 12 columns.
  const Table t = build_table({{"r.json", paths_report({"emulated", "kernel"})}}, "summary",
                              TableLayout::kColumnGroups);
  EXPECT_EQ(t.rows.size(), 5u);
  EXPECT_EQ(t.columns.at(0).header, "path");
  // summary has a column of sample counts: no count over the columns.
  EXPECT_EQ(t.columns.back().samples, 0u);
  EXPECT_EQ(to_latex(t).find("$n = "), std::string::npos) << to_latex(t);
  EXPECT_NE(to_latex(t).find("& {$n$} &"), std::string::npos) << to_latex(t);
}

TEST(TableLayouts, OnePathHeadsItsColumnsInLatex) {
  const Table t = build_table({{"r.json", floor_report()}}, "k3-exponent", TableLayout::kColumnGroups);
  EXPECT_EQ(t.rows.size(), 3u);
  EXPECT_NE(to_latex(t).find("& \\multicolumn{5}{c}{emulated, $n = 100$} \\\\\n\\cmidrule(lr){2-6}\n"),
            std::string::npos)
      << to_latex(t);
}

TEST(TableLayouts, AVaryingSampleCountGetsAColumnOfItsOwn) {
  Report r = paths_report({"emulated", "kernel"}, {100, 1000});
  r.results.at(0).samples = 50;  // emulated at C=8
  r.results.at(0).metrics["inv_finite"] = testing::flag_stats(50, 50);
  const Table t = build_table({{"r.json", r}}, "k3-model", TableLayout::kColumnGroups);
  EXPECT_EQ(headers(t), (std::vector<std::string>{"Chunk C", "Samples", "Finite", "INV total", "INV power",
                                                  "Max power magnitude", "Finite", "INV total", "INV power",
                                                  "Max power magnitude"}));
  EXPECT_EQ(t.columns.at(1).group, "emulated");
  EXPECT_EQ(t.columns.at(2).samples, 0u);
  EXPECT_EQ(t.columns.at(6).samples, 1000u);
  const std::string tex = to_latex(t);
  EXPECT_NE(tex.find("\\multicolumn{5}{c}{emulated} & \\multicolumn{4}{c}{kernel, $n = 1000$}"), std::string::npos)
      << tex;
  EXPECT_NE(tex.find("\n8 & 50 & 100 &"), std::string::npos) << tex;
}

TEST(TableLayouts, TidyCsvHasEveryAxisAndSnakeCaseNames) {
  Report r = paths_report({"emulated", "kernel"});
  const std::string csv = to_csv(build_table({{"r.json", r}}, "summary", TableLayout::kTidy));
  std::istringstream lines(csv);
  std::string header, first;
  std::getline(lines, header);
  std::getline(lines, first);
  // Axes in the schema's order, every one (dim does not vary), the sample
  // count once, then metric_statistic; the Wilson interval as two columns.
  EXPECT_EQ(header,
            "family,chunk,dim,path,method,decay_floor,samples,inv_finite_mean,inv_finite_wilson_low,"
            "inv_finite_wilson_high,l_rel_rmse_median,inv_total_rel_rmse_median,inv_total_rel_rmse_p99,"
            "inv_method_only_rel_rmse_median,inv_gold_l_rel_rmse_median,inv_gold_l_rel_rmse_p99");
  EXPECT_EQ(first.rfind("floor,8,128,emulated,neumann,-5,100,1,0.963", 0), 0u) << first;
  // One row per configuration x path x method.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 5);

  // Several reports: the report is a column.
  const std::string two = to_csv(build_table({{"a.json", r}, {"b.json", r}}, "k3-model", TableLayout::kTidy));
  EXPECT_EQ(two.substr(0, two.find('\n')),
            "family,chunk,dim,path,method,decay_floor,report,samples,inv_finite_mean,inv_total_rel_rmse_median,"
            "inv_gold_l_rel_rmse_median,gold_l_power_max_max");
}

TEST(TableLayouts, TidyFullHasOneRowPerMetric) {
  const Table t = build_table({{"r.json", floor_report()}}, "full", TableLayout::kTidy);
  EXPECT_EQ(headers(t), (std::vector<std::string>{"family", "chunk", "dim", "path", "decay_floor", "metric",
                                                  "samples", "median", "mean", "p10", "p90", "p99", "p999",
                                                  "p999999", "min", "max", "finite_count", "wilson_low",
                                                  "wilson_high"}));
  EXPECT_EQ(t.rows.size(), 3u * 4u + 3u * 13u);
}

TEST(TableLayouts, EachFormatHasItsLayout) {
  EXPECT_EQ(layout_for(TableFormat::kMarkdown), TableLayout::kRows);
  EXPECT_EQ(layout_for(TableFormat::kLatex), TableLayout::kColumnGroups);
  EXPECT_EQ(layout_for(TableFormat::kCsv), TableLayout::kTidy);
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
  // CSV is tidy (every axis a column, snake_case names), no longer the
  // Markdown headers with commas between them.
  EXPECT_EQ(first,
            "family,chunk,dim,path,method,decay_floor,samples,inv_finite_mean,decay_zeros_max,inv_decay_nonfinite_max,"
            "inv_total_rel_rmse_median,inv_gold_l_rel_rmse_median");

  auto fl = run_chunkinv("table '" + report + "' --preset k3-exponent --format latex --caption 'The boundary' "
                         "--label tab:boundary",
                         dir);
  EXPECT_EQ(fl.status, 0) << fl.errors;
  EXPECT_NE(fl.output.find("\\caption{The boundary}\n\\label{tab:boundary}\n"), std::string::npos) << fl.output;
  auto md_caption = run_chunkinv("table '" + report + "' --caption 'The boundary'", dir);
  EXPECT_EQ(md_caption.status, 2);
  EXPECT_NE(md_caption.errors.find("--format latex"), std::string::npos) << md_caption.errors;
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
  // Rows of CSV fields by column name (the tidy CSV has every axis too).
  std::vector<std::map<std::string, std::string>> rows;
  std::vector<std::string> names;
  std::istringstream lines(csv.output);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> fields;
    std::istringstream in(line);
    for (std::string f; std::getline(in, f, ',');) fields.push_back(f);
    if (names.empty()) {
      names = fields;
      continue;
    }
    ASSERT_EQ(fields.size(), names.size()) << line;
    rows.emplace_back();
    for (size_t j = 0; j < names.size(); ++j) rows.back()[names[j]] = fields[j];
  }
  ASSERT_EQ(rows.size(), 2u) << csv.output;
  // Chunk C, path, method, inverse finite, decay = 0, reciprocal = inf, INV total.
  const std::vector<std::string> wanted = {"chunk", "path", "method", "inv_finite_mean", "decay_zeros_max",
                                           "inv_decay_nonfinite_max", "inv_total_rel_rmse_median"};
  const auto pick = [&](const std::map<std::string, std::string>& row, size_t n) {
    std::vector<std::string> v;
    for (size_t j = 0; j < n; ++j) v.push_back(row.at(wanted[j]));
    return v;
  };
  EXPECT_EQ(pick(rows[0], 6), (std::vector<std::string>{"16", "emulated", "neumann", "1", "0", "0"}));
  EXPECT_EQ(pick(rows[1], 7), (std::vector<std::string>{"19", "emulated", "neumann", "0", "2", "2", "inf"}));
}

// A Markdown table, cell by cell (the header, the rule, then the rows).
std::vector<std::vector<std::string>> markdown_cells(const std::string& md) {
  std::vector<std::vector<std::string>> cells;
  std::istringstream lines(md);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> row;
    std::istringstream in(line.substr(1));
    for (std::string f; std::getline(in, f, '|');) {
      f.erase(0, f.find_first_not_of(' '));
      f.erase(f.find_last_not_of(' ') + 1);
      row.push_back(f);
    }
    cells.push_back(row);
  }
  return cells;
}

// The method comparison on a real run: at decay_floor -5 no inverse is
// finite at C = 32 (SPEC §5), whatever the method, and its median prints as
// the article's presets print it.
TEST(TableCommand, MethodsPresetComparesTheMethodsOfARun) {
  TempDir dir;
  const std::string report = dir.file("methods.json");
  const auto run = run_chunkinv("run -a family=floor -a 'chunk=[16,32]' -a decay_floor=-5 --samples 50 "
                                "--paths gold,emulated -a 'method=[neumann,flashkda_v2]' -q -o '" + report + "'",
                                dir);
  ASSERT_EQ(run.status, 0) << run.errors;
  const auto md = run_chunkinv("table '" + report + "' --preset methods", dir);
  ASSERT_EQ(md.status, 0) << md.errors;
  const auto cells = markdown_cells(md.output);
  ASSERT_EQ(cells.size(), 2u + 4u) << md.output;  // header, rule, 2 chunks x 2 methods
  EXPECT_EQ(cells[0], (std::vector<std::string>{"Chunk C", "method", "INV total median", "INV total p99",
                                                "INV total p99.9", "Finite", "INV power median", "INV power p99.9"}));
  std::vector<std::string> order;
  for (size_t i = 2; i < cells.size(); ++i) order.push_back(cells[i][0] + "/" + cells[i][1]);
  EXPECT_EQ(order, (std::vector<std::string>{"16/neumann", "16/flashkda_v2", "32/neumann", "32/flashkda_v2"}));
  for (size_t i = 2; i < 4; ++i) EXPECT_EQ(cells[i][5], "100%") << md.output;
  // FP16 Neumann and the FP32 substitution with BF16 merges differ on the exact L.
  EXPECT_NE(cells[2][6], cells[3][6]) << md.output;
  for (size_t i = 4; i < 6; ++i) {
    EXPECT_EQ(cells[i][2], "inf") << md.output;
    // 50 samples: p99 and p99.9 are marks, not numbers.
    EXPECT_EQ(cells[i][3], "n<100") << md.output;
    EXPECT_EQ(cells[i][4], "n<1000") << md.output;
    EXPECT_EQ(cells[i][5], "0%") << md.output;
    EXPECT_NE(cells[i][6], "inf") << md.output;  // on the exact L every method is finite
  }
  // The same cells in the article's table (method, chunk, ..., INV total): "inf" there too.
  const auto k3 = run_chunkinv("table '" + report + "' --preset k3-exponent", dir);
  ASSERT_EQ(k3.status, 0) << k3.errors;
  const auto article = markdown_cells(k3.output);
  ASSERT_EQ(article.at(0).at(5), "INV total") << k3.output;
  size_t infinite = 0;
  for (size_t i = 2; i < article.size(); ++i) {
    if (article[i][1] != "32") continue;
    EXPECT_EQ(article[i][5], cells[4][2]) << k3.output;
    ++infinite;
  }
  EXPECT_EQ(infinite, 2u) << k3.output;

  const auto tex = run_chunkinv("table '" + report + "' --preset methods --format latex", dir);
  ASSERT_EQ(tex.status, 0) << tex.errors;
  EXPECT_NE(tex.output.find("\\multicolumn{6}{c}{emulated, $n = 50$}"), std::string::npos) << tex.output;
  EXPECT_NE(tex.output.find("\n32 & neumann & {$\\infty$} & {$n<100$} & {$n<1000$} & 0 & "), std::string::npos) << tex.output;
  const auto csv = run_chunkinv("table '" + report + "' --preset methods --format csv", dir);
  ASSERT_EQ(csv.status, 0) << csv.errors;
  EXPECT_NE(csv.output.find("\nfloor,32,128,emulated,neumann,-5,50,inf,,,0,"), std::string::npos) << csv.output;
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

// scripts/plot.py, run through its shebang (/usr/bin/python3, Debian's
// python3-matplotlib). Skipped where that Python lacks matplotlib, except in
// CI (CI=true, set by .ci/run), where scripts/test.sh installs it first
// (scripts/python-setup.sh --deps) and a missing one fails.
bool plot_python_ready() {
  if (std::system("/usr/bin/python3 -c 'import matplotlib, numpy' >/dev/null 2>&1") == 0) return true;
  const char* ci = std::getenv("CI");
  if (ci && std::string(ci) == "true") {
    ADD_FAILURE() << "CI: /usr/bin/python3 has no matplotlib/numpy (scripts/test.sh installs python3-matplotlib)";
  }
  return false;
}

std::string plot_command(const std::string& args) {
  return "'" + std::string(CHUNKINV_SOURCE_DIR) + "/scripts/plot.py' " + args;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A PNG's width in pixels, from its IHDR chunk.
uint32_t png_width(const std::string& png) {
  if (png.size() < 24 || png.substr(1, 3) != "PNG") return 0;
  uint32_t w = 0;
  for (int k = 16; k < 20; ++k) w = (w << 8) | static_cast<unsigned char>(png[k]);
  return w;
}

// A decay-floor sweep at two chunk sizes with two methods: at C=32 and
// decay_floor -8 no inverse is finite, at -5 some are not.
Report sweep_report() {
  Report r;
  for (int c : {16, 32}) {
    for (int floor : {-8, -5, -2}) {
      for (const char* method : {"neumann", "fwdsub_fp32"}) {
        testing::EntrySpec s;
        s.chunk = c;
        s.inv_finite = c == 32 && floor == -8 ? 0 : c == 32 && floor == -5 ? 70 : 100;
        ReportEntry e = testing::make_entry(s);
        e.axes["decay_floor"] = floor;
        e.axes["method"] = method;
        r.results.push_back(e);
      }
      ReportEntry g = testing::make_gold_entry("floor", c);
      g.axes["decay_floor"] = floor;
      g.axes["method"] = "exact";
      r.results.push_back(g);
    }
  }
  return r;
}

TEST(PlotScript, DrawsAnyAxisOnXWithNonFiniteCountsApart) {
  if (!plot_python_ready()) GTEST_SKIP() << "/usr/bin/python3 has no matplotlib and numpy";
  testing::TempDir dir;
  const std::string report = testing::write_report(dir, "sweep.json", sweep_report());
  const std::string svg = dir.file("sweep.svg");
  const auto r = testing::run_shell(plot_command("'" + report + "' -o '" + svg + "' --x decay_floor --facet chunk 2>&1"));
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string text = read_file(svg);
  // Text stays text in the SVG: the facets, the axis, the series (path and
  // method), the strip of non-finite counts ("all" 100 at -8, 30 at -5),
  // the sample count and the interval in the legend.
  for (const char* want : {"decay floor", "emulated / neumann", "emulated / fwdsub_fp32", "non-finite", ">all<",
                           ">30<", "95% Wilson interval", "p10–p90"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want;
  }
  EXPECT_NE(text.find("<svg"), std::string::npos);

  // One- and two-column widths: 3.5 in and 7.16 in.
  const std::string png = dir.file("sweep.png");
  ASSERT_EQ(testing::run_shell(plot_command("'" + report + "' -o '" + png + "' --dpi 100 --x decay_floor")).status, 0);
  EXPECT_EQ(png_width(read_file(png)), 350u);
  ASSERT_EQ(testing::run_shell(plot_command("'" + report + "' -o '" + png + "' --dpi 100 --width double")).status, 0);
  EXPECT_EQ(png_width(read_file(png)), 716u);

  // Methods on x, one path; a PDF.
  const std::string pdf = dir.file("methods.pdf");
  ASSERT_EQ(testing::run_shell(plot_command("'" + report + "' -o '" + pdf + "' --x method --facet chunk "
                                            "--where decay_floor=-2 --metric inv_gold_l_rel_rmse"))
                .status,
            0);
  EXPECT_EQ(read_file(pdf).substr(0, 5), "%PDF-");
}

TEST(PlotScript, RefusesABadReportAnUnknownAxisAndAnUnknownMetric) {
  if (!plot_python_ready()) GTEST_SKIP() << "/usr/bin/python3 has no matplotlib and numpy";
  testing::TempDir dir;
  const std::string report = testing::write_report(dir, "sweep.json", sweep_report());
  const std::string png = dir.file("out.png");
  const std::string bad = testing::write_text(dir, "bad.json", "{\"schema\": \"other\"}");
  auto r = testing::run_shell(plot_command("'" + bad + "' -o '" + png + "' 2>&1"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("schema"), std::string::npos) << r.out;
  r = testing::run_shell(plot_command("'" + report + "' -o '" + png + "' --x decay_flor 2>&1"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("did you mean \"decay_floor\""), std::string::npos) << r.out;
  r = testing::run_shell(plot_command("'" + report + "' -o '" + png + "' --metric inv_totl_rel_rmse 2>&1"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("did you mean \"inv_total_rel_rmse\""), std::string::npos) << r.out;
  r = testing::run_shell(plot_command("'" + report + "' -o '" + dir.file("out.jpg") + "' 2>&1"));
  EXPECT_EQ(r.status, 2);
  EXPECT_FALSE(std::ifstream(png).good());
}


// A method comparison at two families and two chunks, on the gold's L and the
// emulated path's; neumann loses every emulated inverse at C = 32 and 30 of
// 100 on model_like at C = 16.
Report method_sweep_report() {
  Report r;
  for (const char* family : {"floor", "model_like"}) {
    for (int c : {16, 32}) {
      ReportEntry g = testing::make_gold_entry(family, c);
      g.axes["method"] = "exact";
      r.results.push_back(g);
      for (const char* path : {"gold", "emulated"}) {
        for (const char* method : {"neumann", "fwdsub_fp32", "flashkda_v2"}) {
          testing::EntrySpec s;
          s.family = family;
          s.chunk = c;
          s.path = path;
          const bool neumann = std::string(method) == "neumann", emulated = std::string(path) == "emulated";
          s.inv_total_median = neumann ? 2.0e-6 : std::string(method) == "fwdsub_fp32" ? 1.0e-6 : 3.0e-6;
          if (neumann && emulated) s.inv_finite = c == 32 ? 0 : std::string(family) == "model_like" ? 70 : 100;
          ReportEntry e = testing::make_entry(s);
          e.axes["method"] = method;
          r.results.push_back(e);
        }
      }
    }
  }
  return r;
}

// `chunkinv bench --format json` output for the entries of `report` on
// `paths` whose method is in `us` (and the gold's own, which every bench of
// the gold lists): each configuration's methods timed in one run (so they
// share its time), at `us` microseconds per sample for each method.
std::string bench_json(const Report& report, const std::map<std::string, double>& us,
                       const std::set<std::string>& paths = {"emulated"}) {
  nlohmann::json results = nlohmann::json::array();
  for (const auto& e : report.results) {
    const std::string path = e.axes["path"], method = e.axes["method"];
    const bool own = path == "gold" && method == "exact";
    if (!paths.count(path) || (!us.count(method) && !own)) continue;
    const double ms = (own ? 5.0 : us.at(method)) * 256 / 1000.0;
    results.push_back({{"axes", e.axes}, {"path_option", path}, {"samples", 256}, {"path_ms", ms},
                       {"compute_ms", nullptr}, {"end_to_end_ms", 2 * ms}});
  }
  return nlohmann::json{{"samples", 65536}, {"cpu_samples", 256}, {"threads", 2}, {"results", results}}.dump(1);
}

TEST(PlotScript, MethodsAgainstCostWithTheParetoFrontAndNonFiniteCountsApart) {
  if (!plot_python_ready()) GTEST_SKIP() << "/usr/bin/python3 has no matplotlib and numpy";
  testing::TempDir dir;
  const Report sweep = method_sweep_report();
  const std::string report = testing::write_report(dir, "methods.json", sweep);

  // Without a cost, x is the method: a panel per family and chunk, a row per
  // path (the gold's own entry not drawn), the counts of non-finite samples apart.
  const std::string svg = dir.file("methods.svg");
  auto r = testing::run_shell(plot_command("--methods '" + report + "' -o '" + svg + "' 2>&1"));
  ASSERT_EQ(r.status, 0) << r.out;
  std::string text = read_file(svg);
  for (const char* want : {"neumann", "fwdsub_fp32", "flashkda_v2", "floor, ", "model_like, ", "non-finite", ">all<",
                           ">30<", "median, line up to p99.9 of", "emulated", "gold", ">method<"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want;
  }
  EXPECT_EQ(text.find("exact"), std::string::npos);
  EXPECT_EQ(text.find("Pareto"), std::string::npos);  // no cost, no front

  // Each method benched on its own, on both paths: a cost per method, and
  // the front (the gold's own entry, in every file, is not a conflict).
  std::vector<std::string> costs;
  const std::map<std::string, double> us_of{{"neumann", 40}, {"fwdsub_fp32", 20}, {"flashkda_v2", 30}};
  for (const auto& [method, us] : us_of) {
    costs.push_back(testing::write_text(dir, "bench-" + method + ".json",
                                        bench_json(sweep, {{method, us}}, {"gold", "emulated"})));
  }
  r = testing::run_shell(plot_command("--methods '" + report + "' -o '" + svg + "' --cost '" + costs[0] + "' --cost '" +
                                      costs[1] + "' --cost '" + costs[2] + "' --where family=floor 2>&1"));
  ASSERT_EQ(r.status, 0) << r.out;
  text = read_file(svg);
  for (const char* want : {"time per sample", "Pareto front of the medians", "gold, emulated: CPU wall time",
                           "2 threads", ">all<"}) {
    EXPECT_NE(text.find(want), std::string::npos) << want;
  }
  EXPECT_EQ(text.find("Not a cost per method"), std::string::npos);
  EXPECT_EQ(text.find("no bench row"), std::string::npos);

  // All methods in one bench run share its time: the figure says so. The
  // gold was not benched: its row is left out and named.
  const std::string shared = testing::write_text(
      dir, "bench.json", bench_json(sweep, {{"neumann", 30}, {"fwdsub_fp32", 30}, {"flashkda_v2", 30}}));
  const std::string png = dir.file("methods.png");
  r = testing::run_shell(plot_command("--methods '" + report + "' -o '" + svg + "' --cost '" + shared + "' 2>&1"));
  ASSERT_EQ(r.status, 0) << r.out;
  text = read_file(svg);
  EXPECT_NE(text.find("Not a cost per method: bench timed up to 3 methods"), std::string::npos);
  EXPECT_NE(text.find("no bench row: gold / neumann"), std::string::npos);
  // Today's bench times each method in runs of its own and says so: one file
  // holds a cost per method.
  nlohmann::json apart = nlohmann::json::parse(
      bench_json(sweep, {{"neumann", 40}, {"fwdsub_fp32", 20}, {"flashkda_v2", 30}}, {"gold", "emulated"}));
  apart["methods_timed_apart"] = true;
  const std::string apart_file = testing::write_text(dir, "bench-apart.json", apart.dump(1));
  r = testing::run_shell(plot_command("--methods '" + report + "' -o '" + svg + "' --cost '" + apart_file + "' 2>&1"));
  ASSERT_EQ(r.status, 0) << r.out;
  text = read_file(svg);
  EXPECT_EQ(text.find("Not a cost per method"), std::string::npos);
  EXPECT_NE(text.find("Pareto front of the medians"), std::string::npos);
  // Four panels: the default (auto) is the text width; one column when asked.
  ASSERT_EQ(testing::run_shell(plot_command("--methods '" + report + "' -o '" + png + "' --dpi 100")).status, 0);
  EXPECT_EQ(png_width(read_file(png)), 716u);
  ASSERT_EQ(testing::run_shell(plot_command("--methods '" + report + "' -o '" + png + "' --dpi 100 --width single --cost '" +
                                            shared + "'")).status,
            0);
  EXPECT_EQ(png_width(read_file(png)), 350u);
  ASSERT_EQ(testing::run_shell(plot_command("--methods '" + report + "' -o '" + png + "' --dpi 100 --width double"))
                .status,
            0);
  EXPECT_EQ(png_width(read_file(png)), 716u);

  // The front: each point has a lower error than every cheaper one (ties in
  // cost: the lower error only).
  r = testing::run_shell("cd '" + std::string(CHUNKINV_SOURCE_DIR) + "/scripts' && /usr/bin/python3 -B -c "
                         "'import plot; print(plot.pareto_front("
                         "[(3, 1e-6), (1, 5e-6), (2, 5e-6), (1, 4e-6), (4, 2e-6), (5, 5e-7)]))'");
  EXPECT_EQ(r.out, "[(1, 4e-06), (3, 1e-06), (5, 5e-07)]\n");
}

TEST(PlotScript, MethodsRefuseABenchThatIsNotOneOrMatchesNothing) {
  if (!plot_python_ready()) GTEST_SKIP() << "/usr/bin/python3 has no matplotlib and numpy";
  testing::TempDir dir;
  const Report sweep = method_sweep_report();
  const std::string report = testing::write_report(dir, "methods.json", sweep);
  const std::string png = dir.file("out.png");
  auto r = testing::run_shell(plot_command("--methods '" + report + "' -o '" + png + "' --cost '" + report + "' 2>&1"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("not the JSON of chunkinv bench"), std::string::npos) << r.out;
  Report other;
  ReportEntry e = testing::make_entry(testing::EntrySpec{});
  e.axes["method"] = "neumann";
  e.axes["dim"] = 64;
  other.results.push_back(e);
  const std::string bench = testing::write_text(dir, "bench.json", bench_json(other, {{"neumann", 10}}));
  r = testing::run_shell(plot_command("--methods '" + report + "' -o '" + png + "' --cost '" + bench + "' 2>&1"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("no bench row has the configuration"), std::string::npos) << r.out;
  r = testing::run_shell(plot_command("--methods '" + report + "' -o '" + png + "' --metric inv_totl_rel_rmse 2>&1"));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("did you mean \"inv_total_rel_rmse\""), std::string::npos) << r.out;
  EXPECT_FALSE(std::ifstream(png).good());
}

}  // namespace
}  // namespace chunkinv
