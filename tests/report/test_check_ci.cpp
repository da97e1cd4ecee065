// check's outputs for CI systems: the JUnit XML has one testcase per figure
// and a failure exactly where a figure counts as worse, every text escaped
// for XML; GitHub's workflow commands escape what would end a line.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "report/compare.hpp"

using namespace chunkinv;

namespace {

CheckResult two_figures() {
  CheckResult r;
  Comparison same;
  same.axes = {{"family", "file"}, {"inputs", "a<b&\"c\".npz"}, {"path", "emulated"}, {"method", "neumann"}};
  same.configuration = "file inputs=a<b&\"c\".npz";
  same.path = "emulated";
  same.metric = "inv_total_rel_rmse";
  same.statistic = "median";
  same.has_baseline = same.has_new = true;
  same.baseline = same.fresh = 1e-3;
  Comparison worse = same;
  worse.statistic = "p99";
  worse.fresh = 2e-3;
  worse.verdict = Verdict::kWorse;
  worse.worse = true;
  worse.rule = "<= +50.0%\nand 100%";
  r.figures = {same, worse};
  r.failing = 1;
  r.worse = 1;
  r.same = 1;
  r.configurations = 1;
  return r;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST(CheckCi, JunitHasATestcasePerFigureAndAFailurePerWorseOne) {
  const std::string xml = check_junit(two_figures(), "base.json", "new.json");
  EXPECT_EQ(count(xml, "<testcase "), 2u) << xml;
  EXPECT_EQ(count(xml, "<failure "), 1u) << xml;
  EXPECT_NE(xml.find("<testsuites tests=\"2\" failures=\"1\">"), std::string::npos) << xml;
  EXPECT_NE(xml.find("name=\"chunkinv check new.json against base.json\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("classname=\"file inputs=a&lt;b&amp;&quot;c&quot;.npz emulated\""), std::string::npos) << xml;
  EXPECT_NE(xml.find("<failure type=\"WORSE\" message=\"WORSE: baseline 1.00e-3, new 2.00e-3 (&lt;= +50.0%\nand 100%)\"/>"),
            std::string::npos) << xml;
  EXPECT_EQ(xml.find("<b&"), std::string::npos) << "nothing unescaped";
}

TEST(CheckCi, GithubAnnotatesEachWorseFigureOnOneLine) {
  const std::string gh = check_github(two_figures(), "base.json", "new.json");
  EXPECT_EQ(count(gh, "::error title=chunkinv check::"), 1u) << gh;
  EXPECT_EQ(count(gh, "::notice title=chunkinv check::"), 1u) << gh;
  EXPECT_EQ(count(gh, "\n"), 2u) << "one line each: " << gh;
  EXPECT_NE(gh.find("inv_total_rel_rmse.p99 WORSE: baseline 1.00e-3, new 2.00e-3 (<= +50.0%25%0Aand 100%25)"),
            std::string::npos) << gh;
}
