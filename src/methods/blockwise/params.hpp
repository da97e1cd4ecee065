// Method blockwise's parameters (-a method=blockwise:block=16:precision=fp32),
// made once per Method (methods/params.hpp); the CPU reference and the GPU
// form read them.
#pragma once
#include "methods/params.hpp"
#include "methods/precision.hpp"

namespace chunkinv {

struct BlockwiseParams {
  int block = 8;                              // b: the diagonal blocks, 8 or 16
  prec::Arith arith = prec::Arith::kBF16Mma;  // precision: bf16 (mma.sync), fp32 (FMA chain) or tf32

  static BlockwiseParams parse(const MethodOptions& o) {
    using prec::Arith;
    return {int_param(o, "block"),
            choice_param<Arith>(o, "precision", {{"bf16", Arith::kBF16Mma}, {"fp32", Arith::kFP32}, {"tf32", Arith::kTF32}})};
  }
};

}  // namespace chunkinv
