// Method paterson_stockmeyer's parameters (-a method=paterson_stockmeyer:s=4:precision=bf16),
// made once per Method (methods/params.hpp).
#pragma once
#include "methods/params.hpp"
#include "methods/precision.hpp"

namespace chunkinv {

struct PatersonStockmeyerParams {
  int s = 4;                               // baby steps: N..N^s formed, G = N^s the giant step
  prec::Arith arith = prec::Arith::kFP32;  // precision: fp32, tf32 or bf16 operands (prec::tt_arith)

  static PatersonStockmeyerParams parse(const MethodOptions& o) {
    return {int_param(o, "s"), prec::tt_arith(param_text(o, "precision"))};
  }
};

}  // namespace chunkinv
