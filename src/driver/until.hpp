// Stop rules for rare events (run --until, --until-ci): a configuration's
// samples go on, in index order, until the rule holds for every entry of
// it but the gold's own, or until the cap (--samples). The rule is checked
// after every sample, so where a run stops depends on the seed alone, never
// on threads, batches or a resume.
#pragma once
#include <cstdint>
#include <string>

namespace chunkinv {

struct StopRule {
  enum class Kind {
    kFailures,       // METRIC.failures>=N: at least N samples with the 0/1 metric 0
    kSuccesses,      // METRIC.successes>=N: at least N with it 1
    kRelativeWidth,  // METRIC:W: the 95% Wilson interval narrower than W times the rarer share
  };
  std::string metric;  // a 0/1 metric (l_finite, inv_finite), by today's name
  Kind kind = Kind::kFailures;
  uint64_t count = 0;
  double width = 0;
  std::string text;  // the option and rule as given, for the report

  // Whether `ones` samples with the metric 1 out of `n` satisfy the rule.
  // The relative width (high - low) / min(p, 1 - p) is the same for the
  // share and for its complement; it is never met while either count is 0.
  bool met(uint64_t ones, uint64_t n) const;
};

// "inv_finite.failures>=100" (--until) and "inv_finite:0.1" (--until-ci);
// UsageError naming the option, the text and the form expected.
StopRule parse_until(const std::string& text);
StopRule parse_until_ci(const std::string& text);

}  // namespace chunkinv
