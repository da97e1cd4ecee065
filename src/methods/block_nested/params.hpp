// Method block_nested's parameters (-a method=block_nested:precision=bf16), made once per
// Method (methods/params.hpp).
#pragma once
#include "methods/params.hpp"
#include "methods/precision.hpp"

namespace chunkinv {

struct BlockNestedParams {
  prec::Arith arith = prec::Arith::kFP32;  // precision: fp32, tf32 or bf16 operands (prec::tt_arith)

  static BlockNestedParams parse(const MethodOptions& o) { return {prec::tt_arith(param_text(o, "precision"))}; }
};

}  // namespace chunkinv
