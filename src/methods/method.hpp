// Inverse methods (SPEC §6-7): how (I + L)^-1 is computed from an L that a
// path formed. Each method's CPU form here is its slow, obvious reference;
// a GPU form, where one exists, lives beside the path that runs it and is
// validated against this one.
//
// The registry (methods/registry.cpp) has one line per method. Nothing
// outside the registries compares a method's name as a string: code asks a
// MethodSpec for what it needs.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/matrix.hpp"
#include "model/metric_info.hpp"
#include "model/outputs.hpp"

namespace chunkinv {

struct MethodSpec {
  std::string_view name;        // the value of the `method` axis
  std::string_view arithmetic;  // in words, for the report's meta
  // The method's own per-sample diagnostics (beside the generic metrics);
  // InverseRun::diagnostics holds one value per entry, in this order.
  std::span<const MetricInfo> diagnostics;
  // The CPU reference: the method on a strict-lower L (any chunk 2..64).
  // The method rounds L to its own input format first (FP16 for Neumann,
  // FP32 for the substitutions); keep asks for the intermediates.
  InverseRun (*invert)(const Mat& l, bool keep);
  // The FP64 triangular solve of the gold: no rounding anywhere.
  bool exact = false;
};

// Every method, in registry order.
std::span<const MethodSpec* const> methods();
std::vector<std::string> method_names();
// Throws UsageError naming the unknown method with the nearest one suggested.
const MethodSpec& find_method(std::string_view name);
// The method an axis-less configuration or an old report means.
const MethodSpec& default_method();  // neumann
const MethodSpec& exact_method();    // the gold's own inverse

// (I + L)^-1 by unit-lower triangular solve in FP64 (L strictly lower).
Mat unit_lower_inverse(const Mat& l);

}  // namespace chunkinv
