#include "paths/emulated/emulated.hpp"

#include <cmath>

#include "core/fp.hpp"
#include "core/thread_pool.hpp"
#include "paths/emulated/decay.hpp"
#include "paths/emulated/tensor_core.hpp"

namespace chunkinv::emulated {
namespace {

constexpr double kLog2e = 1.4426950408889634074;  // log2(e), nearest double

int padded(int n) { return (n + 15) / 16 * 16; }

// max |entry|, +inf if any entry is non-finite (NaN included).
double max_abs(const Mat& m) {
  double r = 0.0;
  for (Eigen::Index i = 0; i < m.size(); ++i) {
    const double v = m.data()[i];
    if (!std::isfinite(v)) return INFINITY;
    r = std::fmax(r, std::fabs(v));
  }
  return r;
}

}  // namespace

void decays(const Sample& s, std::vector<double>& decay, std::vector<double>& inv_decay) {
  decay.resize(s.chunk);
  inv_decay.resize(s.chunk);
  float g2_sum = 0.0f;  // G2: running FP32 sum
  for (int t = 0; t < s.chunk; ++t) {
    const float g2 = static_cast<float>(s.g[t] * kLog2e);  // FP64 product, rounded once
    g2_sum += g2;
    decay[t] = ex2_approx_ftz_bf16(g2_sum);
    inv_decay[t] = ex2_approx_ftz_bf16(-g2_sum);
  }
}

Mat kernel_l(const Sample& s, const std::vector<double>& decay, const std::vector<double>& inv_decay) {
  const int c = s.chunk, dp = padded(s.dim);
  // BF16 scaled keys, zero-padded along d (zero products change nothing).
  Mat kd = Mat::Zero(c, dp), ki = Mat::Zero(c, dp);
  for (int i = 0; i < c; ++i)
    for (int k = 0; k < s.dim; ++k) {
      kd(i, k) = bf16(s.key(i, k) * decay[i]);
      ki(i, k) = bf16(s.key(i, k) * inv_decay[i]);
    }
  Mat l = Mat::Zero(c, c);
  for (int i = 1; i < c; ++i) {
    const double beta16 = fp16(s.beta[i]);
    for (int j = 0; j < i; ++j) {
      double acc = 0.0;  // FP32 accumulator chained over d, one k-block at a time
      for (int blk = 0; blk < dp / 16; ++blk) {
        acc = tc::dot16(kd.data() + static_cast<size_t>(i) * dp + blk * 16,
                        ki.data() + static_cast<size_t>(j) * dp + blk * 16, 1, acc, tc::Accum::kFP32);
      }
      l(i, j) = fp16(fp16(acc) * beta16);
    }
  }
  return l;
}

NeumannRun neumann(const Mat& l, bool keep_powers) {
  const int c = static_cast<int>(l.rows()), cp = padded(c);
  Mat p = Mat::Zero(cp, cp);
  p.topLeftCorner(c, c) = l;
  // INV = I - L in FP16: exact (0 - 0 = +0 above the diagonal).
  Mat inv = Mat::Zero(cp, cp);
  for (int i = 0; i < cp; ++i)
    for (int j = 0; j < cp; ++j) inv(i, j) = (i == j) ? 1.0 : (p(i, j) == 0.0 ? 0.0 : -p(i, j));
  NeumannRun run;
  run.highest_power = 1;
  run.power_max = max_abs(l);
  if (keep_powers) run.powers.push_back(l);
  while (2 * run.highest_power < c) {
    p = tc::matmul_f16(p, p);
    run.highest_power *= 2;
    run.power_max = std::fmax(run.power_max, max_abs(p));
    if (keep_powers) run.powers.push_back(p.topLeftCorner(c, c));
    const Mat t = tc::matmul_f16(inv, p);
    for (Eigen::Index k = 0; k < inv.size(); ++k) inv.data()[k] = fp16(inv.data()[k] + t.data()[k]);
  }
  run.inv = inv.topLeftCorner(c, c);
  return run;
}

PathOutput run(const Sample& s, const GoldOutput& gold, bool keep_powers) {
  PathOutput out;
  decays(s, out.decay, out.inv_decay);
  out.L = kernel_l(s, out.decay, out.inv_decay);
  out.run = neumann(out.L, keep_powers);
  Mat l16 = gold.L.unaryExpr([](double v) { return fp16(v); });
  out.stable = neumann(l16, keep_powers);
  return out;
}

namespace {

class EmulatedPath : public Path {
 public:
  std::string name() const override { return "emulated"; }
  std::string arithmetic() const override {
    return "CPU model of the kernel: G2 running FP32 sum of fp32(g*log2 e); decays "
           "bf16(ex2.approx.ftz.f32) as bf16 of the correctly rounded FP32 exp2 with FTZ plus a "
           "table of measured exceptions; BF16 scaled keys; L by a model of Hopper mma.sync "
           "m16n8k16 BF16->FP32 (products aligned to the largest exponent, truncated at "
           "2^(emax-25), exact sum, FP32 truncation) chained over d, rounded to FP16, strict "
           "lower, times fp16(beta); Neumann product form with the FP16-accumulate model "
           "(round to nearest even) tiled 16x16x16 and FP16 adds";
  }
  void run_batch(std::span<const Sample> samples, std::span<const GoldOutput> gold, std::span<PathOutput> out,
                 ThreadPool& pool, bool keep_powers) override {
    pool.parallel_for(samples.size(), [&](size_t i) { out[i] = run(samples[i], gold[i], keep_powers); });
  }
};

}  // namespace

std::unique_ptr<Path> make_path() { return std::make_unique<EmulatedPath>(); }

}  // namespace chunkinv::emulated
