// The pipeline's work per sample, stage by stage (driver/pipeline_work.hpp).
// Each count follows the code that runs the stage, on a sample whose L and
// inverses are finite (the fast programs take every sample, the NaN rule
// skips no product); docs/roofline.md has the same formulas in words, with
// what is left out. The shapes the code chooses by C (tiles, threads, the
// gold's tensor cores, X by columns) are read from the code's own
// functions, so the counts follow them.
#include "driver/pipeline_work.hpp"

#include <algorithm>
#include <numbers>
#include <stdexcept>
#include <string>

#include "metrics/device_metrics.hpp"
#include "metrics/device_metrics_blocks.hpp"
#include "paths/gpu_paths.hpp"

namespace chunkinv {

StageWork& StageWork::operator+=(const StageWork& o) {
  fp64 += o.fp64;
  fp64_mma += o.fp64_mma;
  fp16_mma += o.fp16_mma;
  fp32 += o.fp32;
  bytes += o.bytes;
  return *this;
}

namespace {

static_assert(PipelineWorkShape{}.kernel_version == gpu::kDefaultKernelVersion);

using Kind = DeviceDraw::Kind;

// ---- What one operation costs, in FP64 FLOPs (docs/roofline.md, "Counting") ----
//
// The build keeps --fmad=false, so a * b + c in the code is a DMUL and a
// DADD (2 FLOPs) unless it asks for the fused form by name (the gold's
// __fma_rn, 2 FLOPs too). Conversions, roundings to an integer (nearbyint),
// comparisons and bit tests are not FLOPs; a product by 1.0 or -1.0 is no
// instruction (dropped, or folded into the next add's sign).

// A correctly rounded FP64 division (and 1.0 / y): nvcc's sequence on
// sm_90, MUFU.RCP64H (the SFU, not counted), two Newton steps, the
// quotient and its correction: 7 DFMA and 1 DMUL.
constexpr double kDiv = 7 * 2 + 1;
// A correctly rounded FP64 square root: MUFU.RSQ64H, then 5 DFMA and 3 DMUL.
constexpr double kSqrt = 5 * 2 + 3;
// detmath::hd::exp (core/detmath_hd.hpp): x / ln 2 (a division), r = (x -
// n ln2_hi) - n ln2_lo (2 products, 2 subtractions), the degree-14 Horner
// series (14 products, 14 adds), and ldexp, which CUDA forms as four
// products by powers of two (its PTX).
constexpr double kExp = kDiv + 4 + 28 + 4;
// detmath::hd::log: m * 2 (an add, m + m, formed either way: a select), s
// = (m - 1) / (m + 1) (2 adds, a division), s * s, the degree-13 Horner
// series in s^2 (13 products, 13 adds), s * poly, and e ln2_hi + (e ln2_lo
// + 2 sum) (2 products, 3 adds).
constexpr double kLog = 1 + 2 + kDiv + 1 + 26 + 1 + 5;
// detmath::hd::sigmoid: 1 / (1 + exp(-x)) (the negation goes into exp's
// divisor), the reciprocal counted as a division.
constexpr double kSigmoid = kExp + 1 + kDiv;
// philox::polar_attempt: two coordinates (x + 0.5) 2^-52 - 1 (an add, a
// product, a subtraction each) and s = u u + v v (2 products, an add).
constexpr double kAttempt = 6 + 3;
// Attempts a pair takes on average: the unit disc's share of the square is pi / 4.
constexpr double kAttemptsPerPair = 4 / std::numbers::pi;
// philox::polar_transform: s = u u + v v, log s, -2 log s, / s, sqrt, u f and v f.
constexpr double kTransform = 3 + kLog + 1 + kDiv + kSqrt + 2;
// One Marsaglia pair of normals (philox::normal_pair, or key_rows' attempts then transforms).
constexpr double kNormalPair = kAttemptsPerPair * kAttempt + kTransform;

// FLOPs of one tensor-core instruction, the whole tile as issued.
constexpr double kMmaM16n8k16 = 2.0 * 16 * 8 * 16;  // mma.m16n8k16, FP16 or BF16 operands
constexpr double kDmmaM8n8k4 = 2.0 * 8 * 8 * 4;     // mma.m8n8k4.f64

// ---- Shapes and sums over the matrices ----

double packed(int C) { return double(C) * (C + 1) / 2; }  // entries on and below the diagonal
double pairs(int C) { return double(C) * (C - 1) / 2; }   // entries strictly below it

// Entries of a per-sample FP64 value row: evaluate()'s and evaluate_reference()'s.
constexpr double kEntryValues = gpu::kNeumannMetricCount;
constexpr double kReferenceValues = gpu::kReferenceMetricCount;

// FP64 FLOPs of rows [from, C) of one column of fp64::unit_lower_solve_column_from
// (panels of 4, sums from row `first`, a multiple of 4): each row i sums
// x_k (0.0 + l_ik) for k in [first, i) (an add, a product and an add a
// term); a row whose panel p starts after `first` also adds its panel sum
// (acc * -1 + x_i: a negated add) and, in a full panel (p + 4 <= C), adds
// its even and odd accumulators.
double solve_column_flops(int C, int first, int from) {
  double f = 0;
  for (int i = from; i < C; ++i) {
    const int p = i & ~3;
    f += 3.0 * (i - first);
    if (p > first) f += 1 + (p + 4 <= C ? 1 : 0);
  }
  return f;
}

// The inverse residual's pass (gpu::blocks::residual_pass) by the fast
// rules: row block I's 8 x 8 tiles (I, J), J <= I, each the mma.m8n8k4 of
// k = 8J .. min(8I + 8, C) in steps of 4; a lane forms its A fragment's
// entry (i, k) of I + L with an add where k <= i < C (a select elsewhere);
// then each entry of the lower triangle: r - y, its square, and the add to
// the sum (its reference sum is C, not formed). The fast programs' form up
// to C = 32 (residual_tiles) does the same three there, its add among the
// slab's sums'.
StageWork residual_pass_work(int C) {
  StageWork w;
  const int B = (C + 7) / 8;
  for (int I = 0; I < B; ++I)
    for (int J = 0; J <= I; ++J)
      for (int k0 = 8 * J; k0 < std::min(8 * I + 8, C); k0 += 4) {
        w.fp64_mma += kDmmaM8n8k4;
        for (int g = 0; g < 8; ++g)
          for (int h = 0; h < 4; ++h) {
            const int i = 8 * I + g, k = k0 + h;
            if (i < C && k <= i) w.fp64 += 1;
          }
      }
  w.fp64 += 3 * packed(C);
  return w;
}

// Squarings of the Neumann series: P = P * P while 2p < C (p = 1, 2, 4, ...).
int squarings(int C) {
  int s = 0;
  for (int p = 1; 2 * p < C; p *= 2) ++s;
  return s;
}

int padded_chunk(const PipelineWorkShape& s) {
  const int c16 = (s.chunk + 15) / 16 * 16;
  return s.pad > c16 ? s.pad : c16;
}

void validate(const PipelineWorkShape& s) {
  auto no = [](const std::string& why) { throw std::invalid_argument("pipeline work: " + why); };
  if (s.chunk < 2 || s.chunk > 64) no("chunk " + std::to_string(s.chunk) + " outside 2..64");
  if (s.dim < 16 || s.dim % 16 != 0) no("dim " + std::to_string(s.dim) + " is not a positive multiple of 16");
  if (s.gate_width != 1 && s.gate_width != s.dim)
    no("gate width " + std::to_string(s.gate_width) + " is neither 1 nor dim " + std::to_string(s.dim));
  if (s.family == Kind::kWeakDecayCorrelated && s.gate_width != 1) no("weak_decay_correlated has per-token gates");
  if (s.kernel_version != 1 && s.kernel_version != 2) no("kernel version " + std::to_string(s.kernel_version));
  if (s.pad != 0 && (s.pad % 16 != 0 || s.pad > 64)) no("pad " + std::to_string(s.pad) + " is not 16, 32, 48 or 64");
  if (s.gold_run && !s.gold_l_fp16) no("the run on the gold L reads fp16(gold L), which the gold does not write");
  if (s.gold_entry.present && !s.gold_run) no("the gold path's entry is the run on the gold L, which is left out");
  if (s.folded_values < 0) no("folded values " + std::to_string(s.folded_values) + " < 0");
}

// ---- The stages ----

// inputs/device_families.cu: key_rows (the keys and per-channel gates) and
// token_values (beta and per-token gates), written to the input set.
StageWork inputs_work(const PipelineWorkShape& s) {
  const double C = s.chunk, d = s.dim, gw = s.gate_width;
  const bool weak = s.family == Kind::kWeakDecayCorrelated, channel = s.gate_width != 1;
  const double row_pairs = (s.dim + 1) / 2;        // normal pairs covering a row's d columns
  const double token_pairs = (s.chunk + 1) / 2;    // token_values' threads: two tokens each
  StageWork w;
  // Key rows (one a sample for weak_decay_correlated, written to its C rows):
  // the row's normal pairs, its norm (d products, d adds), one square
  // root, one reciprocal and d products by it (Bf16Divider).
  w.fp64 += (weak ? 1 : C) * (row_pairs * kNormalPair + 2 * d + kSqrt + kDiv + d);
  // model_like's per-channel gates: normals of their own stream, floor * sigmoid(z) (floor's: copies).
  if (channel && s.family == Kind::kModelLike) w.fp64 += C * (row_pairs * kNormalPair + d * (kSigmoid + 1));
  if (!weak) {
    // beta = sigmoid(z): a pair of normals and both sigmoids a thread (an odd C's last thread too).
    w.fp64 += token_pairs * (kNormalPair + 2 * kSigmoid);
    // model_like's per-token gates: another pair, two sigmoids and their products by the floor.
    if (!channel && s.family == Kind::kModelLike) w.fp64 += token_pairs * (kNormalPair + 2 * (kSigmoid + 1));
  }
  // Written: keys (BF16), g, beta, fp16(beta). Nothing is read.
  w.bytes = C * d * 2 + C * gw * 8 + C * 8 + C * 2;
  return w;
}

// metrics/device_gold_program.hpp (gold_program, with the reference's fast
// rules in its tail), launched by gpu::gold_on_device.
StageWork gold_work(const PipelineWorkShape& s) {
  namespace b = gpu::blocks;
  const int C = s.chunk, d = s.dim;
  const bool channel = s.gate_width != 1;
  const double Cd = C, dd = d, gw = s.gate_width, csq = Cd * Cd;
  StageWork w;
  // G cumulated in token order: C adds (per channel: C adds each).
  w.fp64 += channel ? Cd * dd : Cd;
  if (channel) {
    // Each pair's dot over k: k_i k_j exp(min(G_i - G_j, 0)) added (a
    // subtraction, an exp, two products, an add a channel).
    w.fp64 += pairs(C) * dd * (1 + kExp + 2 + 1);
  } else if (!b::gold_tensor_cores(C)) {
    // The FP64 units' 2 x 2 tiles: every thread of the block issues its
    // tiles' 4 FMAs and its diagonal pair's one a channel, pairs nobody
    // reads included (the loop has no branch): 2 FLOPs each.
    w.fp64 += 2.0 * b::block_threads(C) * (4 * b::tiles_per_thread(C) + 1) * dd;
  } else {
    // The Gram matrix on tensor cores: one m8n8k4 a tile of the lower
    // triangle of 8 x 8 tiles and 4 channels (channels padded with zeros
    // to a multiple of 4 in each step of kKeyTile).
    double steps = 0;
    for (int k0 = 0; k0 < d; k0 += b::kKeyTile) steps += (std::min(d - k0, b::kKeyTile) + 3) / 4;
    w.fp64_mma += kDmmaM8n8k4 * b::dmma_tiles(C) * steps;
  }
  // L_ij = beta_i dot exp(min(G_i - G_j, 0)) (a subtraction, an exp, two
  // products); per channel beta_i dot (a product).
  w.fp64 += pairs(C) * (channel ? 1 : 1 + kExp + 2);
  // The solve of I + L, two threads a column: each column from row
  // x_first(c); with X by columns (C > 32) its rows from x_kept(c) on.
  for (int c = 0; c < C; ++c) w.fp64 += solve_column_flops(C, b::x_first(c), b::gold_columns(C) ? b::x_kept(c) : 0);
  // The reference's fast rules: the residual's pass over L and X.
  if (s.reference) {
    const StageWork r = residual_pass_work(C);
    w.fp64 += r.fp64;
    w.fp64_mma += r.fp64_mma;
  }
  // Read: keys, g, beta. Written: the gold L and inverse, fp16(gold L), the reference's values.
  w.bytes = Cd * dd * 2 + Cd * gw * 8 + Cd * 8 + csq * 8 * 2;
  if (s.gold_l_fp16) w.bytes += csq * 2;
  if (s.reference) w.bytes += kReferenceValues * 8;
  return w;
}

// FP32-pipe operations of one Neumann run (paths/kernel/kernel*.cu
// neumann): INV = I - P, then INV = INV + INV P at each squaring, on every
// entry of the padded CP x CP matrix (FP16, one operation an entry).
double neumann_fp32(int cp, int s) { return double(cp) * cp * (1 + s); }
// Tensor-core FLOPs of one Neumann run: each squaring P * P and each
// update INV P is (CP / 16) x (CP / 8) output tiles of CP / 16 m16n8k16
// each, every tile formed (the first pass squares only, the last updates only).
double neumann_mma(int cp, int s) {
  const double r = cp / 16;
  return kMmaM16n8k16 * 4 * s * r * r * r;
}

// paths/kernel/kernel_v2.cu (or kernel.cu, version 1): the whole samples'
// tasks, then the runs on fp16(gold L) (gold_run).
StageWork kernel_work(const PipelineWorkShape& s) {
  const int C = s.chunk, d = s.dim, cp = padded_chunk(s), sq = squarings(C);
  const bool channel = s.gate_width != 1;
  const double Cd = C, dd = d, gw = s.gate_width, csq = Cd * Cd, r = cp / 16;
  StageWork w;
  // The decays: g log2(e) in FP64 (__dmul_rn), G2 summed in FP32, ex2 on the SFU (not counted).
  w.fp64 += Cd * gw;
  w.fp32 += Cd * gw;
  // Keys scaled by the BF16 decays (mul.rn.bf16): per channel kd and ki in
  // place (2 C d); version 1 likewise for per-token gates; version 2 scales
  // each fragment as it is loaded, A (CP x d over the task's warps) and B
  // (warp w's w + 1 column blocks of 16 x d).
  if (channel || s.kernel_version == 1) w.fp32 += 2 * Cd * dd;
  else w.fp32 += cp * dd + r * (r + 1) / 2 * 16 * dd;
  // L = kd ki^T: the row blocks' tiles on and below the diagonal, d / 16
  // m16n8k16 each (BF16 in, FP32 sums), then fp16(L_ij) fp16(beta_i) below the diagonal.
  w.fp16_mma += kMmaM16n8k16 * r * (r + 1) * (dd / 16);
  w.fp32 += pairs(C);
  // The Neumann series on the kernel's L.
  w.fp16_mma += neumann_mma(cp, sq);
  w.fp32 += neumann_fp32(cp, sq);
  // Read: keys, g, fp16(beta). Written: decays, inverse decays, L, INV, highest power and power maximum.
  w.bytes += Cd * dd * 2 + Cd * gw * 8 + Cd * 2 + 2 * Cd * gw * 2 + 2 * csq * 2 + 4 + 4;
  if (s.gold_run) {
    // The run on fp16(gold L): the same series, no keys.
    w.fp16_mma += neumann_mma(cp, sq);
    w.fp32 += neumann_fp32(cp, sq);
    // Read fp16(gold L); written its INV, highest power and power maximum.
    w.bytes += csq * 2 + csq * 2 + 4 + 4;
  }
  return w;
}

// One entry's fast program (metrics/device_fast_programs.hpp,
// metrics_fast_program): the kernel path's (its L and INV, and the run on
// the gold L where there is one) or the gold path's (its L the gold L, its
// INV the run on the gold L).
StageWork entry_work(const PipelineWorkShape& s, bool kernel) {
  const PipelineWorkShape::Entry& e = kernel ? s.kernel_entry : s.gold_entry;
  StageWork w;
  if (!e.present) return w;
  const int C = s.chunk;
  const double csq = double(C) * C, P = packed(C);
  const bool run = kernel ? s.gold_run : true;  // the gold path's INV is the run
  // The exact inverse of I + kernel L (solve_column_packed), for inv_method_only:
  // each column from row c & ~31, its rows above c solved too.
  if (kernel && e.method_only)
    for (int c = 0; c < C; ++c) w.fp64 += solve_column_flops(C, c & ~31, c & ~31);
  // A slab's terms, each entry of the lower triangle, and each sum formed
  // adding its term (metrics_fast_program: the sums the values read, each
  // once): the kernel entry's l_rel_rmse, inv_total and inv_method_only a
  // difference, its square and a reference's square, and two adds (5); its
  // inv_gold_l a difference, its square and an add (3: its reference sum is
  // inv_total's). The gold path's entry forms only the gold L's squares for
  // l_rel_rmse (2: its error sum is +0) and inv_total's sums (5): its
  // inv_method_only and inv_gold_l sums are those. The residual: its pass
  // over the gold L and INV, its adds there.
  if (kernel) w.fp64 += P * ((e.l_rel_rmse ? 5 : 0) + 5 + (e.method_only ? 5 : 0) + (run ? 3 : 0));
  else w.fp64 += P * ((e.l_rel_rmse ? 2 : 0) + 5);
  if (e.residual) {
    const StageWork r = residual_pass_work(C);
    w.fp64 += r.fp64;
    w.fp64_mma += r.fp64_mma;
  }
  // Read, each once: the path's L (for l_rel_rmse, method_only or l_finite;
  // the gold path's is the gold L), the gold L (l_rel_rmse, residual), the
  // gold inverse, INV, the run on the gold L (the gold path's INV itself),
  // the decays and the diagnostics; written the entry's values.
  const bool read_l = e.l_rel_rmse || e.method_only || e.l_finite, read_gold_l = e.l_rel_rmse || e.residual;
  w.bytes += csq * 8 + csq * 2 + kEntryValues * 8;  // gold inverse, INV, values
  if (kernel) {
    w.bytes += 2 * double(C) * s.gate_width * 2;  // decays and inverse decays (count_decays)
    if (read_l) w.bytes += csq * 2;              // the kernel's L, FP16
    if (read_gold_l) w.bytes += csq * 8;
    if (run) w.bytes += csq * 2;                 // the run on the gold L
    w.bytes += 8 + (run ? 8 : 0);                // highest power and power maximum of both runs
    // Above C = 32 inv_method_only is a program of its own (method_fast_program):
    // it reads the kernel's L and INV again, FP16.
    if (e.method_only && gpu::blocks::fast_defers_method(C)) w.bytes += csq * 2 * 2;
  } else {
    if (read_l || read_gold_l) w.bytes += csq * 8;  // the gold L, as the path's L and as the gold's
    w.bytes += 8;                                   // the run's highest power and power maximum
  }
  return w;
}

// The two entries at once (pair_fast_program): every value of both,
// whatever the entries ask for (it reads none of their flags).
StageWork pair_work(const PipelineWorkShape& s) {
  StageWork w;
  if (!s.kernel_entry.present || !s.gold_entry.present) return w;
  const int C = s.chunk;
  const double csq = double(C) * C, P = packed(C);
  // The exact inverse of I + kernel L, as the kernel entry's.
  for (int c = 0; c < C; ++c) w.fp64 += solve_column_flops(C, c & ~31, c & ~31);
  // A slab's terms: the kernel L's error squared (2), the gold L's and
  // gold inverse's squares (1 each, shared), INV's error (2), INV's error
  // against the exact inverse and that inverse's square (3), the run's
  // error (2, shared by the gold path's three inverse values); then the
  // seven of the kPairSums sums that are not a residual's add their terms.
  // Both residuals' passes (their adds counted there), over the gold L with
  // INV and with the run.
  w.fp64 += P * (2 + 1 + 1 + 2 + 3 + 2 + (gpu::blocks::kPairSums - 2));
  const StageWork r = residual_pass_work(C);
  w.fp64 += 2 * r.fp64;
  w.fp64_mma += 2 * r.fp64_mma;
  // Read once: the decays, the kernel's L, the gold L and inverse, INV, the
  // run, the diagnostics of both runs; written both entries' values.
  w.bytes = 2 * double(C) * s.gate_width * 2 + csq * (2 + 8 + 8 + 2 + 2) + 16 + 2 * kEntryValues * 8;
  return w;
}

// metrics/device_sketch.cu's fold_kernel: each value read once. Its
// atomics (one a distinct bucket and scale of a warp) are left out.
StageWork fold_work(const PipelineWorkShape& s) {
  StageWork w;
  w.bytes = 8.0 * s.folded_values;
  return w;
}

}  // namespace

StageWork stage_work(const std::string& stage, const PipelineWorkShape& shape) {
  validate(shape);
  if (stage == "inputs") return inputs_work(shape);
  if (stage == "gold") return gold_work(shape);
  if (stage == "kernel") return kernel_work(shape);
  if (stage == "metrics(kernel, gold)") return pair_work(shape);
  if (stage == "metrics(kernel)") return entry_work(shape, true);
  if (stage == "metrics(gold)") return entry_work(shape, false);
  if (stage == "fold") return fold_work(shape);
  throw std::invalid_argument("pipeline work: no stage \"" + stage +
                              "\" (inputs, gold, kernel, metrics(kernel, gold), metrics(kernel), metrics(gold), fold)");
}

}  // namespace chunkinv
