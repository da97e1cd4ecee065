// The arithmetic the inverse methods share: how a matrix product and a sum
// are rounded in each working precision. One routine per rule, so that every
// method that says "FP32", "TF32" or "BF16 on tensor cores" means the same.
//
//   kFP32     operands FP32; every product-sum an FP32 fused multiply-add,
//             k ascending from +0: acc = fmaf(a[i][k], b[k][j], acc). This is
//             Triton's `input_precision="ieee"` dot (a chain of FMAs) and
//             what CUDA makes of a plain loop. Sums of two matrices: FP32.
//   kTF32     operands rounded to TF32 first (10 fraction bits, round to
//             nearest even: the rounding of PTX `cvt.rn.tf32.f32`, chosen
//             because it is unbiased and does not depend on how a kernel
//             feeds its registers; a tensor core fed raw FP32 bits truncates
//             instead, which this does not model). The product of two TF32
//             values is exact in FP32, so the FMA chain above is the FP32
//             accumulation of exact products. Sums: FP32.
//   kBF16Seq  operands rounded to BF16 (nearest even); products exact; FP32
//             FMA chain as above. For a kernel that is not on NVIDIA tensor
//             cores (tt-metal's Tensix) but keeps its intermediates in BF16.
//   kBF16Mma  operands rounded to BF16, then Hopper mma.sync BF16 -> FP32
//             (tc::matmul_bf16_f32, bit-exact model); k zero-padded to a
//             multiple of 16 (exact: zero products do not move the model's
//             alignment exponent). Sums: FP32.
//   kFP16Mma  operands rounded to FP16, then mma.sync FP16 -> FP16
//             (tc::matmul_f16). Sums: FP16 adds.
//
// A method stores its intermediates in `storage(arith)` (FP32, or FP16 for
// kFP16Mma) and rounds operands with `operand(arith)` just before a product.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "core/fp.hpp"
#include "core/matrix.hpp"

namespace chunkinv::prec {

enum class Arith { kFP32, kTF32, kBF16Seq, kBF16Mma, kFP16Mma };

inline constexpr Format kTF32{10, -126, 0x1.FFCp127};

// Rounds one value to the operand format of `a` (FP32, TF32, BF16 or FP16).
double operand(double x, Arith a);
// Rounds one value to the storage format of `a` (FP32, or FP16 for kFP16Mma).
double storage(double x, Arith a);
Mat round_operand(const Mat& m, Arith a);
Mat round_storage(const Mat& m, Arith a);
Mat round_to(const Mat& m, Format f);
// A method's input L in the format of `a`: FP32 for kFP32 and kTF32 (TF32 is
// an operand rounding only), BF16 for the BF16 forms, FP16 for kFP16Mma.
Mat round_input(const Mat& l, Arith a);

// a (m x k) times b (k x n) in the arithmetic of `arith`; the operands are
// rounded to its operand format first, the result is in its storage format.
Mat matmul(const Mat& a, const Mat& b, Arith arith);
// a + b (and a - b), entry by entry, each rounded once to the storage format.
Mat add(const Mat& a, const Mat& b, Arith arith);
Mat sub(const Mat& a, const Mat& b, Arith arith);

// The FP32 chain of one dot product, k ascending from +0, one rounding per
// step (fmaf). Exposed for methods that form single dots (substitutions).
float fma_chain(const float* a, const float* b, int n, int b_stride);

// (I + A)^-1 of the b x b diagonal block of `a` at (r0, r0), whose entries
// are FP32 values, by the column-oriented substitution of cuDNN's blockwise
// inverse and FlashKDA v2 (SPEC §2): for s = 0..b-2, for every row r > s,
// X[r][p] = fmaf(-A[r][s], X[s][p], X[r][p]) for p < s (one FP32 FMA, rounded
// once), then X[r][s] = -A[r][s]; X[r][r] = 1, zeros above. FP32 result.
Mat column_substitution_inverse(const Mat& a, int r0, int b);

// max |entry|; +inf as soon as one entry is non-finite (NaN included).
double max_abs(const Mat& m);

// Zero-pads a C x C matrix to n x n (n >= C); exact for a strictly lower L.
Mat pad(const Mat& m, int n);

// The name of an arithmetic for a method's `arithmetic` text and docs.
std::string_view name(Arith a);

// The `precision` parameter of the tt-metal variants (doubling,
// paterson_stockmeyer, horner): Tensix is not an NVIDIA tensor core, so its
// BF16 form is operands rounded to BF16 with an FP32 FMA chain.
inline constexpr std::string_view kTtPrecisionChoices[] = {"fp32", "tf32", "bf16"};
inline constexpr std::string_view kTtPrecisionHelp =
    "matrix products: fp32 (FMA chain), tf32 (TF32 operands) or bf16 (BF16 operands), all with FP32 "
    "accumulation and FP32 sums";
Arith tt_arith(const std::string& precision);

}  // namespace chunkinv::prec
