// Method fla_solve_tril's parameters (-a method=fla_solve_tril:precision=tf32),
// made once per Method (methods/params.hpp); the CPU reference and the GPU
// form read them.
#pragma once
#include "methods/params.hpp"

namespace chunkinv {

struct FlaSolveTrilParams {
  bool tf32 = false;  // precision: the merge's dot inputs, ieee (FP32 FMA chain) or tf32

  static FlaSolveTrilParams parse(const MethodOptions& o) {
    return {choice_param<bool>(o, "precision", {{"ieee", false}, {"tf32", true}})};
  }
};

}  // namespace chunkinv
