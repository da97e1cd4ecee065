// The gold (SPEC §2) and the per-sample metrics (SPEC §3) on the GPU, with
// the bits of the CPU's compute_gold, evaluate() and evaluate_reference().
// Everything here reads and writes device buffers; the caller allocates
// them and orders the calls on its stream. Matrices are C x C row-major per
// sample, sample after sample (the data order of Mat, and the order in which
// the kernel path writes its FP16 matrices).
//
// How the bits are kept: compute_gold's loops with detmath's exp (one source
// for both, core/detmath_hd.hpp); Eigen's solve and product orders as plain
// loops (metrics/fp64_order.hpp, checked against Eigen by
// tests/metrics/test_gold_order.cpp); one block of threads per sample runs
// the program of metrics/device_metrics_blocks.hpp, which the tests also run
// on the CPU. Every FP64 sum keeps the CPU's serial order: what runs in
// parallel is independent sums (pairs (i, j) of L, columns of the inverse,
// entries of a product, and the different metrics of a sample).
//
// Not covered: samples with FlashKDA raw inputs (the gold activates them
// first; compute_gold stays on the CPU for those), and chunks above 64.
#pragma once
#include <cstddef>
#include <cstdint>

#include "metrics/metric_ids.hpp"

#ifdef CHUNKINV_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace chunkinv::gpu {

#ifdef CHUNKINV_HAVE_CUDA
using MetricsStream = cudaStream_t;
#else
using MetricsStream = void*;
#endif

inline constexpr int kMaxMetricsChunk = 64;
// Values per sample: method_metrics(neumann) (the generic metrics,
// highest_power, power_max and their gold-L twins), and reference_metrics(),
// each at its id (metrics/metric_ids.hpp).
inline constexpr int kNeumannMetricCount = metric_id::kNeumannCount;
inline constexpr int kReferenceMetricCount = metric_id::kReferenceCount;

struct GoldOnDevice {
  int n = 0;                         // samples
  int chunk = 0, dim = 0;            // C (2..64, the chunks of every family), d
  int gate_width = 1;                // values of g per token: 1 (per-token gates) or d (per-channel)
  const uint16_t* keys = nullptr;    // n x C x d, BF16 bits
  const double* g = nullptr;         // n x C x gate_width, the log-decays as the Sample holds them
  const double* beta = nullptr;      // n x C
  double* gold_l = nullptr;          // out: n x C x C, zero on and above the diagonal
  double* gold_inv = nullptr;        // out: n x C x C, (I + L)^-1
  uint16_t* gold_l_fp16 = nullptr;   // out, optional: fp16 bits of every entry, as the kernel path packs its gold_l input
  double* reference = nullptr;       // out, optional: evaluate_reference(gold) too, n x kReferenceMetricCount
};

// compute_gold(sample) for n samples without raw inputs (and, with
// a.reference, reference_metrics_on_device's values of the same gold, from
// the gold's own shared memory).
void gold_on_device(const GoldOnDevice& a, MetricsStream stream);

// One (path, method = neumann) entry's outputs on the device, as the kernel
// path's run_batch holds them before it unpacks them into PathOutputs.
struct PathOnDevice {
  int decays = 0;                       // decays per sample: C (per-token) or C x d (per-channel); 0 for none
  const uint16_t* decay = nullptr;      // n x decays, BF16 bits; null: the path forms no decays (counts 0)
  const uint16_t* inv_decay = nullptr;  // n x decays, BF16 bits
  const uint16_t* l_fp16 = nullptr;     // n x C x C, the path's L, FP16 bits; or
  const double* l_f64 = nullptr;        //   the path's L in FP64 (the gold path: pass the gold L itself)
  const uint16_t* inv = nullptr;        // n x C x C, the method on the path's L, FP16 bits
  const uint16_t* gold_l_inv = nullptr; // n x C x C, the method on the gold L, FP16 bits; null: no such run (NaN, as the CPU gives)
  // Diagnostics per sample (the kernel path's per-task arrays: tasks [0, n)
  // are the runs on the path's L, [n, 2n) those on the gold L); null: NaN.
  const int* highest_power = nullptr;         // n, the run on the path's L
  const float* power_max = nullptr;           // n
  const int* gold_l_highest_power = nullptr;  // n, the run on the gold L
  const float* gold_l_power_max = nullptr;    // n
  // Which of the costlier values the fast metrics compute (run --metrics);
  // those left out are NaN there (the full program, for the samples the
  // fast one leaves, computes every value): l_rel_rmse, inv_method_only
  // (the exact inverse of I + path L) and inverse_residual; and l_finite,
  // whose test is the only other reason to read the path's L. The fast
  // program reads the path's L only for l_rel_rmse, inv_method_only or
  // l_finite, and the gold L only for l_rel_rmse or inverse_residual.
  bool l_rel_rmse = true, method_only = true, residual = true, l_finite = true;
};

// The gold of the same samples (gold_on_device's outputs, or compute_gold's
// uploaded): L strictly lower, as compute_gold leaves it.
struct GoldRead {
  int n = 0, chunk = 0;
  const double* gold_l = nullptr;    // n x C x C
  const double* gold_inv = nullptr;  // n x C x C
};

// evaluate(neumann, gold, path) per sample into out[n x kNeumannMetricCount], sample-major.
void metrics_on_device(const GoldRead& gold, const PathOnDevice& path, double* out, MetricsStream stream);
// metrics_on_device for two entries of the same samples at once, sharing
// their operands and the sums they have in common: the kernel path's
// (kernel: its own L and INV, and the run on the gold L) and the gold
// path's (gold_path: l_f64 the gold L, inv and gold_l_inv both the run on
// the gold L that kernel.gold_l_inv holds). The same values as two calls.
void metrics_pair_on_device(const GoldRead& gold, const PathOnDevice& kernel, const PathOnDevice& gold_path,
                            double* out_kernel, double* out_gold, MetricsStream stream);
// Whether the pair is faster than two calls at chunk C: up to C = 16. Above,
// its larger blocks leave fewer of them to an SM, and each waits on both
// entries' serial sums (H200, ns a sample, the pair in run 40 against two
// calls in runs 39 and 41: C = 16 15.8 against 18.6, C = 32 97.8 against
// 92.5, C = 64 437.5 against 399.6).
inline bool pair_pays(int chunk) { return chunk <= 16; }
// evaluate_reference(gold) per sample into out[n x kReferenceMetricCount].
void reference_metrics_on_device(const GoldRead& gold, double* out, MetricsStream stream);

}  // namespace chunkinv::gpu
