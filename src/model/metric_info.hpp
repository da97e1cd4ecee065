// What a per-sample metric is: its name (part of the interface: the same in
// code, JSON and tables), how its values aggregate, and what it measures.
#pragma once

namespace chunkinv {

enum class MetricKind {
  kCount,  // a non-negative integer count (worst sample = max)
  kFlag,   // 0/1; its mean is a share, reported with a Wilson interval
  kError,  // a relative error, +inf when the approximation is non-finite
  kValue,  // any other non-negative value (power magnitude, exponent)
};

struct MetricInfo {
  const char* name;
  MetricKind kind;
  const char* help;
};

}  // namespace chunkinv
