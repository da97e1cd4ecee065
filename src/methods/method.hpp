// Inverse methods (SPEC §6-7): how (I + L)^-1 is computed from an L that a
// path formed. A method is one folder, src/methods/<name>/: its CPU form
// (reference.cpp), the slow, obvious reference, and its GPU form (gpu.cu),
// where one exists, validated against it.
//
// The registry (methods/registry.cpp) has one line per method. Nothing
// outside the registries compares a method's name as a string: code asks a
// MethodSpec for what it needs.
#pragma once
#include <any>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/matrix.hpp"
#include "model/metric_info.hpp"
#include "model/outputs.hpp"

namespace chunkinv {

// A method's parameter, given on the axis after its name:
// `-a method=blockwise:block=8:precision=tf32`.
struct MethodParam {
  std::string_view name;
  std::string_view default_value;
  std::span<const std::string_view> choices;  // the allowed values; empty: an integer in [lo, hi]
  int lo = 0, hi = 0;
  std::string_view help;
};

// Every parameter's value (defaults filled in), by name: the text form, for
// labels and reports. The method itself reads its typed parameters
// (src/methods/<name>/params.hpp, made once by parse_method).
using MethodOptions = std::map<std::string, std::string>;

struct Method;
namespace gpu {
struct GpuInverse;  // methods/gpu_form.hpp
}

// The L a kernel-arithmetic path (emulated, kernel) hands the method: FlashKDA
// v1 rounds the mma's FP32 result to FP16 and multiplies by fp16(beta) in
// FP16; v2 keeps it in FP32 and multiplies by beta in FP32 (SPEC §2).
// Every other path forms one L whatever the method.
enum class LStorage { kFp16, kFp32 };

struct MethodSpec {
  std::string_view name;        // the method's name on the `method` axis
  std::string_view arithmetic;  // in words, for the report's meta
  // The method's own per-sample diagnostics (beside the generic metrics);
  // InverseRun::diagnostics holds one value per entry, in this order.
  std::span<const MetricInfo> diagnostics;
  // The CPU reference: the method on a strict-lower L (any chunk 2..64).
  // The method rounds L to its own input format first (FP16 for Neumann,
  // FP32 for the substitutions); keep asks for the intermediates. The
  // method's typed parameters are method.params<P>().
  InverseRun (*invert)(const Mat& l, const Method& method, bool keep);
  // The FP64 triangular solve of the gold: no rounding anywhere.
  bool exact = false;
  std::span<const MethodParam> params = {};
  LStorage l_storage = LStorage::kFp16;
  // The typed parameters from the checked text (parse_as<P>, P::parse in
  // <name>/params.hpp); null for a method without parameters.
  std::any (*parse)(const MethodOptions& options) = nullptr;
  // The method's GPU form on the `kernel` path (<name>/gpu_form.cpp), or null.
  const gpu::GpuInverse* gpu_form = nullptr;
  // Whether the GPU pipeline (driver/device_pipeline) runs it, at its
  // default parameters.
  bool on_device_pipeline = false;
};

// MethodSpec::parse of a method whose parameters are P.
template <class P>
std::any parse_as(const MethodOptions& options) {
  return P::parse(options);
}

// A method as the axis names it: its spec and its parameters' values.
struct Method {
  const MethodSpec* spec = nullptr;
  MethodOptions options;  // every parameter, defaults filled in
  std::any typed;         // spec->parse(options), made once with the options
  // The axis value: the name, then each parameter that is not at its
  // default, in name order ("blockwise:block=8"); equal methods, equal labels.
  std::string label() const;
  // The typed parameters; P is the method's own (<name>/params.hpp).
  template <class P>
  const P& params() const {
    return std::any_cast<const P&>(typed);
  }
  InverseRun invert(const Mat& l, bool keep) const { return spec->invert(l, *this, keep); }
  bool operator==(const Method& o) const { return spec == o.spec && options == o.options; }
};

// Every method, in registry order.
std::span<const MethodSpec* const> methods();
std::vector<std::string> method_names();
// Throws UsageError naming the unknown method with the nearest one suggested.
const MethodSpec& find_method(std::string_view name);
// "name" or "name:param=value:...": UsageError naming an unknown method,
// parameter or value, with what is allowed.
Method parse_method(std::string_view text);
// A method at its defaults.
Method method_of(const MethodSpec& spec);
// The method an axis-less configuration or an old report means.
const MethodSpec& default_method();  // neumann
const MethodSpec& exact_method();    // the gold's own inverse

// (I + L)^-1 by unit-lower triangular solve in FP64 (L strictly lower).
Mat unit_lower_inverse(const Mat& l);

}  // namespace chunkinv
