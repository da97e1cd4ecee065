// Method neumann_series's parameters
// (-a method=neumann_series:form=product:rounds=2:accum=fp32), made once per
// Method (methods/params.hpp).
#pragma once
#include "methods/params.hpp"
#include "methods/precision.hpp"

namespace chunkinv {

struct NeumannSeriesParams {
  bool product = false;                       // form: series (false) or product (true)
  int inv_iters = 0;                          // series: number of terms N (0: C, every term)
  int rounds = 0;                             // product: number of factors (0: ceil(log2 C))
  prec::Arith arith = prec::Arith::kFP16Mma;  // accum: fp16 or bf16 on mma.sync, or fp32

  static NeumannSeriesParams parse(const MethodOptions& o) {
    using prec::Arith;
    return {choice_param<bool>(o, "form", {{"series", false}, {"product", true}}), int_param(o, "inv_iters"),
            int_param(o, "rounds"),
            choice_param<Arith>(o, "accum", {{"fp16", Arith::kFP16Mma}, {"bf16", Arith::kBF16Mma}, {"fp32", Arith::kFP32}})};
  }
};

}  // namespace chunkinv
