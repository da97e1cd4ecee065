// Method residual_neumann's parameters
// (-a method=residual_neumann:order=3:steps=8:format=int16:frac_bits=12),
// made once per Method (methods/params.hpp); the CPU reference and the GPU
// form read them.
#pragma once
#include <string_view>

#include "methods/params.hpp"

namespace chunkinv {

enum class ResidualFormat { kFp32, kBf16, kFp16, kInt16 };

struct ResidualNeumannParams {
  int order = 3;                                 // N: highest power of the truncated series
  int steps = 8;                                 // S: residual-correction steps
  int band = 4;                                  // X0 keeps i - j < band (0 on the axis: order + 1)
  ResidualFormat format = ResidualFormat::kFp32;  // the working arithmetic
  int frac_bits = 12;                            // int16: fraction bits f

  static ResidualNeumannParams parse(const MethodOptions& o) {
    ResidualNeumannParams p;
    p.order = int_param(o, "order");
    p.steps = int_param(o, "steps");
    p.band = int_param(o, "band");
    if (p.band == 0) p.band = p.order + 1;
    p.format = choice_param<ResidualFormat>(o, "format",
                                            {{"fp32", ResidualFormat::kFp32},
                                             {"bf16", ResidualFormat::kBf16},
                                             {"fp16", ResidualFormat::kFp16},
                                             {"int16", ResidualFormat::kInt16}});
    p.frac_bits = int_param(o, "frac_bits");
    return p;
  }
};

// The format's name on the axis.
inline std::string_view format_name(ResidualFormat f) {
  switch (f) {
    case ResidualFormat::kFp32: return "fp32";
    case ResidualFormat::kBf16: return "bf16";
    case ResidualFormat::kFp16: return "fp16";
    case ResidualFormat::kInt16: return "int16";
  }
  return "?";
}

}  // namespace chunkinv
