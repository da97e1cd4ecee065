// A CPU model of Hopper's mma.sync m16n8k16 arithmetic, bit for bit
// (SPEC §2 "emulated"; microsoft/MMA-Sim; Khattak & Mikaitis 2025).
//
// One output element d = c + sum_{k<16} a_k b_k: every product is exact; the
// products and c are aligned to the largest nominal exponent emax among them
// (a product's is the sum of its factors' exponents) and each is truncated
// toward zero at 2^(emax - 25) (with FP16 accumulation emax is held at or
// above kFp16AlignFloor); the truncated terms are
// summed exactly; the sum is truncated to FP32 (BF16 inputs, FP32
// accumulator) or rounded to nearest even to FP16 (FP16 accumulator), where
// a result of zero is +0. NaN inputs, inf*0 and inf-inf give NaN.
//
// Values are passed as doubles holding exact BF16/FP16/FP32 values.
#pragma once
#include "core/matrix.hpp"

namespace chunkinv::tc {

inline constexpr int kAlignBits = 25;  // fraction bits kept below emax (measured, SPEC §2)

enum class Accum { kFP32, kFP16 };

// With FP16 accumulation the alignment exponent is never below
// kFp16AlignFloor: terms of tinier sums are truncated at 2^(kFp16AlignFloor -
// 25) (measured on the H200: docs/notes/fidelity.md).
inline constexpr int kFp16AlignFloor = -21;
// One k-block: c + sum_{k<16} a[k] * b[k * b_stride].
double dot16(const double* a, const double* b, int b_stride, double c, Accum acc);
// The same with the alignment exponent held at or above align_floor (the
// measurement of kFp16AlignFloor tries candidates).
double dot16_aligned(const double* a, const double* b, int b_stride, double c, Accum acc, int align_floor);

// Matrix products as the kernel issues them: A (m x k) times B (k x n), k a
// multiple of 16; each output tile starts from a zero C operand
// and chains its k-blocks in increasing order through C.
// BF16 x BF16 -> FP32 accumulation (the L product).
Mat matmul_bf16_f32(const Mat& a, const Mat& b);
// FP16 x FP16 -> FP16 accumulation (the Neumann products).
Mat matmul_f16(const Mat& a, const Mat& b);
// Element (i, j), j < i, of a b^T with BF16 x BF16 -> FP32 accumulation: row
// i of a and row j of b (as many columns, a multiple of 16) chained over
// their k-blocks as matmul_bf16_f32 does; zero on and above the diagonal
// (the kernel's L product, whose upper part it never uses).
Mat lower_products_bf16_f32(const Mat& a, const Mat& b);

}  // namespace chunkinv::tc
