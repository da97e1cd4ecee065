// Method doubling's parameters (-a method=doubling:precision=bf16), made once per
// Method (methods/params.hpp).
#pragma once
#include "methods/params.hpp"
#include "methods/precision.hpp"

namespace chunkinv {

struct DoublingParams {
  prec::Arith arith = prec::Arith::kFP32;  // precision: fp32, tf32 or bf16 operands (prec::tt_arith)

  static DoublingParams parse(const MethodOptions& o) { return {prec::tt_arith(param_text(o, "precision"))}; }
};

}  // namespace chunkinv
