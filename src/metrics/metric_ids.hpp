// The chunk's metrics by id. A (path, method) entry's values are the generic
// metrics in this order, then the method's diagnostics, then their gold-L
// twins (method_metrics); the gold's own entry has the reference metrics
// (reference_metrics). metrics.cpp declares every metric with its id and
// checks the order at compile time; the device programs
// (metrics/device_metrics_blocks.hpp) write a sample's row by these ids, and
// the device pipeline reads the row back by them.
#pragma once

namespace chunkinv::metric_id {

enum Generic : int {
  kDecayZeros,
  kInvDecayNonfinite,
  kLFinite,
  kInvFinite,
  kLRelRmse,
  kInvTotalRelRmse,
  kInvMethodOnlyRelRmse,
  kInvGoldLRelRmse,
  kInverseResidual,
  kGenericCount
};

// neumann's row: its diagnostics (methods/neumann/reference.cpp) and their
// gold-L twins after the generic metrics.
enum Neumann : int { kHighestPower = kGenericCount, kPowerMax, kGoldLHighestPower, kGoldLPowerMax, kNeumannCount };

enum Reference : int { kRefLFinite, kRefInvFinite, kRefInverseResidual, kRefInvMaxAbs, kReferenceCount };

}  // namespace chunkinv::metric_id
