// Method `neumann`: the FP16 Neumann product form of FlashKDA v1 and the
// article (SPEC §2 "kernel" step 6) with the tensor-core FP16-accumulate
// model of arith/tensor_core: INV = I - L, then with P = L, while 2p < C:
// P = P*P, INV = INV + INV*P (FP16 adds). Beyond C = 16 every product is
// tiled 16x16x16 as the kernel does, so C is zero-padded to a multiple of
// 16 (exact: padded rows and columns of a strictly lower matrix stay zero).
// Registered twice: as `neumann` and as `flashkda_v1` (FlashKDA v1's name).
#include <cmath>

#include "arith/tensor_core.hpp"
#include "core/fp.hpp"
#include "methods/method.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

const MetricInfo kDiagnostics[] = {
    {"highest_power", MetricKind::kValue, "exponent of the highest power formed (L^highest_power)"},
    {"power_max", MetricKind::kValue, "max |entry| over L and every power formed; inf if any is non-finite"},
};

using prec::max_abs;

InverseRun invert_neumann(const Mat& l_in, const Method&, bool keep) {
  const Mat l = l_in.unaryExpr([](double v) { return fp16(v); });  // the method's input format
  const int c = static_cast<int>(l.rows()), cp = (c + 15) / 16 * 16;
  Mat p = Mat::Zero(cp, cp);
  p.topLeftCorner(c, c) = l;
  // INV = I - L in FP16: exact (0 - 0 = +0 above the diagonal).
  Mat inv = Mat::Zero(cp, cp);
  for (int i = 0; i < cp; ++i)
    for (int j = 0; j < cp; ++j) inv(i, j) = (i == j) ? 1.0 : (p(i, j) == 0.0 ? 0.0 : -p(i, j));
  InverseRun run;
  int highest = 1;
  double power_max = max_abs(l);
  if (keep) run.intermediates.push_back({"L", l});
  while (2 * highest < c) {
    p = tc::matmul_f16(p, p);
    highest *= 2;
    power_max = std::fmax(power_max, max_abs(p));
    if (keep) run.intermediates.push_back({"L^" + std::to_string(highest), p.topLeftCorner(c, c)});
    const Mat t = tc::matmul_f16(inv, p);
    for (Eigen::Index k = 0; k < inv.size(); ++k) inv.data()[k] = fp16(inv.data()[k] + t.data()[k]);
  }
  run.inv = inv.topLeftCorner(c, c);
  run.diagnostics = {static_cast<double>(highest), power_max};
  return run;
}

}  // namespace

extern const MethodSpec kNeumannMethod{
    .name = "neumann",
    .arithmetic = "FP16 Neumann product form: INV = I - fp16(L); with P = L, while 2p < C: P = mma_f16(P, P), INV = "
                  "INV + mma_f16(INV, P) (FP16 adds); mma_f16 = Hopper mma.sync m16n8k16 with FP16 accumulation, "
                  "tiled 16x16x16 with the chunk zero-padded to a multiple of 16",
    .diagnostics = kDiagnostics,
    .invert = invert_neumann,
    .on_device_pipeline = true,
};

// FlashKDA v1's K1 inverse under its own name, beside `flashkda_v2`
// (`-a method=flashkda_v1,flashkda_v2` compares the two shipped versions):
// the same arithmetic, function and diagnostics as `neumann`.
extern const MethodSpec kFlashkdaV1Method{
    .name = "flashkda_v1",
    .arithmetic = "FlashKDA v1's K1 inverse (neumann_inv_fused_1warp), identical to `neumann`: the FP16 Neumann "
                  "product form INV = I - fp16(L); with P = L, while 2p < C: P = mma_f16(P, P), INV = INV + "
                  "mma_f16(INV, P) (FP16 adds), tiled 16x16x16 with the chunk zero-padded to a multiple of 16",
    .diagnostics = kDiagnostics,
    .invert = invert_neumann,
};

}  // namespace chunkinv
