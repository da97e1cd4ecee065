#include "paths/emulated/emulated.hpp"

#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "arith/decay.hpp"
#include "arith/tensor_core.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "paths/path.hpp"

namespace chunkinv::emulated {
namespace {

constexpr double kLog2e = 1.4426950408889634074;  // log2(e), nearest double

int padded(int n) { return (n + 15) / 16 * 16; }

}  // namespace

void decays(const Sample& s, std::vector<double>& decay, std::vector<double>& inv_decay) {
  const int w = s.gate_width();
  decay.resize(static_cast<size_t>(s.chunk) * w);
  inv_decay.resize(decay.size());
  for (int k = 0; k < w; ++k) {
    float g2_sum = 0.0f;  // G2: running FP32 sum, per channel for per-channel gates
    for (int t = 0; t < s.chunk; ++t) {
      const float g2 = static_cast<float>(s.gate(t, k) * kLog2e);  // FP64 product, rounded once
      g2_sum += g2;
      decay[static_cast<size_t>(t) * w + k] = ex2_approx_ftz_bf16(g2_sum);
      inv_decay[static_cast<size_t>(t) * w + k] = ex2_approx_ftz_bf16(-g2_sum);
    }
  }
}

Mat kernel_l(const Sample& s, const std::vector<double>& decay, const std::vector<double>& inv_decay,
             LStorage storage) {
  const int c = s.chunk, dp = padded(s.dim), w = s.gate_width();
  const size_t wd = static_cast<size_t>(w);
  if (decay.size() != static_cast<size_t>(c) * wd || inv_decay.size() != decay.size())
    throw std::logic_error("emulated::kernel_l: decays do not match the sample's gating");
  // BF16 scaled keys, zero-padded along d (zero products change nothing).
  Mat kd = Mat::Zero(c, dp), ki = Mat::Zero(c, dp);
  for (int i = 0; i < c; ++i)
    for (int k = 0; k < s.dim; ++k) {
      const size_t e = static_cast<size_t>(i) * wd + (w == 1 ? 0 : k);
      kd(i, k) = bf16(s.key(i, k) * decay[e]);
      ki(i, k) = bf16(s.key(i, k) * inv_decay[e]);
    }
  // kd ki^T below the diagonal: an FP32 accumulator chained over d, one k-block at a time.
  Mat l = tc::lower_products_bf16_f32(kd, ki);
  for (int i = 1; i < c; ++i) {
    const double beta16 = fp16(s.beta[i]), beta32 = fp32(s.beta[i]);
    for (int j = 0; j < i; ++j) l(i, j) = storage == LStorage::kFp16 ? fp16(fp16(l(i, j)) * beta16) : fp32(l(i, j) * beta32);
  }
  return l;
}

namespace {

class EmulatedPath final : public CpuPath {
  LForm form_l(const Sample& s, const GoldOutput&, LStorage storage) const override {
    LForm l;
    decays(s, l.decay, l.inv_decay);
    l.L = kernel_l(s, l.decay, l.inv_decay, storage);
    return l;
  }
};

std::string arithmetic() {
  return "CPU model of the kernel: G2 running FP32 sum of fp32(g*log2 e); decays "
         "bf16(ex2.approx.ftz.f32) as bf16 of the correctly rounded FP32 exp2 with FTZ plus a "
         "table of measured exceptions; BF16 scaled keys; L by a model of Hopper mma.sync "
         "m16n8k16 BF16->FP32 (products aligned to the largest nominal exponent, truncated at "
         "2^(emax-25), exact sum, FP32 truncation) chained over d, rounded to FP16, strict "
         "lower, times fp16(beta) (FlashKDA v1; for flashkda_v2 kept in FP32 and times FP32 beta); "
         "per-channel gates: G2 and the decays per channel; the methods' CPU references invert it";
}

std::string fidelity() {
  const int n = decay_exception_count();
  return n > 0 ? fmt::format("decays: correctly rounded FP32 exp2 (FTZ) with a table of {} exceptions measured "
                             "on the H200; tensor-core model: nominal-exponent alignment, 25 bits, measured "
                             "bit-exact on the H200 (2026-11-29: 2,560,000 BF16->FP32 and 2,560,000 FP16->FP16 "
                             "mma elements; the kernel path identical on every sample compared); "
                             "docs/paths-compared.md",
                             n)
               : "decays: correctly rounded FP32 exp2 (FTZ) WITHOUT the table of measured ex2.approx "
                 "exceptions: bf16 decays may differ from the kernel's for a few inputs; "
                 "docs/paths-compared.md";
}

std::string available() { return ""; }

std::unique_ptr<Path> make(const PathOptions&) { return std::make_unique<EmulatedPath>(); }

}  // namespace

}  // namespace chunkinv::emulated

namespace chunkinv {
extern const PathSpec kEmulatedPath{.name = "emulated",
                                    .device = Device::kCpu,
                                    .arithmetic = emulated::arithmetic,
                                    .fidelity = emulated::fidelity,
                                    .unavailable = emulated::available,
                                    .supports = supports_every_method,
                                    .check_options = takes_no_options,
                                    .make = emulated::make};
}  // namespace chunkinv
