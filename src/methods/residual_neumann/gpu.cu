// Method residual_neumann on the `kernel` path: its GPU form (methods/gpu_form.hpp).
// The reference is the CPU form (methods/residual_neumann.cpp); the two are
// compared bit for bit on the same L (inverse and diagnostics).
//
// Covers format=fp32 and format=int16 (every order, steps, band, frac_bits,
// C = 2..64); bf16 and fp16 are refused (methods/gpu_forms.cpp).
//
// One task per warp (C <= 16, four tasks a block) or per block (4 warps for
// C <= 32, 8 warps above), its matrices in shared memory as FP32 values (for
// int16 the exact value q 2^-f): L (the method's rounded L), X0, X and one
// work matrix T. Every matrix product is C x C x C with the CPU's chain per
// output element, over the whole matrices (no structure is assumed, so
// NaN/inf and signed zeros travel as on the CPU); the threads of the task take
// independent output elements, and element-wise sums are done by the thread
// that formed the element. Steps, as the CPU form:
//   T = -L, X0 = I + T; for n = 2..N: P' = P (-L) (T and X alternate as P),
//   X0 = X0 + P'; mask X0; X = X0; residual_before;
//   S times: T = (I - X) - L X (per element), then X = X + X0 T (per element);
//   residual_after.
// fp32: products acc = fmaf(a[i][k], b[k][j], acc), k ascending from +0
// (fma.rn.f32); sums add/sub.rn.f32 (the CPU's double sum of two FP32 values
// rounded once to FP32 is the same number). int16: the CPU's double
// arithmetic, operation for operation (mul/add/div.rn.f64, rint = nearbyint),
// the products' integers summed exactly in int64. The residual diagnostics:
// s = x(i,j); s += l(i,k) x(k,j) for k ascending, mul.rn.f64 then add.rn.f64.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "gpu/check.cuh"
#include "methods/gpu_form.hpp"
#include "methods/residual_neumann/params.hpp"

namespace chunkinv::gpu {
namespace {

constexpr int kTasksPerBlock = 4;  // one-warp tasks (C <= 16)
constexpr int kMaxWarps = 8;

struct RnArgs {
  long long tasks = 0;
  int C = 0;
  int order = 3, steps = 8, band = 4, f = 12;
  const double* l = nullptr;
  float* inv = nullptr;
  double* diag = nullptr;
  int ndiag = 0;
};

// One warp's share of the diagnostics, for the block's reduction.
struct Partial {
  double before, after;
  float work;
  int sat;
};

// |x| as prec::max_abs counts it: +inf for a non-finite x.
__device__ inline float mag(float x) { return isfinite(x) ? fabsf(x) : INFINITY; }

template <int kWarps>
__device__ inline void group_sync() {
  if constexpr (kWarps == 1) __syncwarp();
  else __syncthreads();
}

// The INT16 engine (Engine in residual_neumann.cpp), in the CPU's double
// operations. Values are held as the float of q 2^-f (exact: |q| <= 2^15).
struct Fixed {
  double scale;     // 2^f
  double unscale;   // 2^-f (ldexp(x, -f) = x * 2^-f exactly: no underflow here)
  float scale_f;    // 2^f
  int sat = 0;      // saturations counted by this thread

  __device__ explicit Fixed(int f)
      : scale(double(1 << f)), unscale(1.0 / double(1 << f)), scale_f(float(1 << f)) {}

  __device__ double clamp(double q) {
    if (isnan(q)) {
      ++sat;
      return 0.0;
    }
    if (q > 32767.0) {
      ++sat;
      return 32767.0;
    }
    if (q < -32768.0) {
      ++sat;
      return -32768.0;
    }
    return q;
  }
  // sat(nearbyint(l * 2^f)) / 2^f
  __device__ float input(double l) { return float(__ddiv_rn(clamp(rint(__dmul_rn(l, scale))), scale)); }
  // sat((a + sign b) 2^f) / 2^f
  __device__ float add(float a, float b, double sign) {
    const double u = __dmul_rn(__dadd_rn(double(a), __dmul_rn(sign, double(b))), scale);
    return float(__ddiv_rn(clamp(u), scale));
  }
  // q of a value (exact integer).
  __device__ int q(float v) const { return __float2int_rz(__fmul_rn(v, scale_f)); }
  // Row `a` (C values) times column j of b (row-major C x C); kNegB: of
  // neg = sat(0 + (-1) b) instead, whose q is -q(b) with -(-32768) -> 32767.
  template <bool kNegB>
  __device__ float dot(const float* a, const float* b, int C, int j) {
    long long acc = 0;
    for (int k = 0; k < C; ++k) {
      int qb = q(b[k * C + j]);
      if constexpr (kNegB) qb = qb == -32768 ? 32767 : -qb;
      acc += static_cast<long long>(q(a[k]) * qb);  // |product| <= 2^30
    }
    // sat(nearbyint(ldexp(acc, -f))) / 2^f; acc < 2^53 in magnitude: exact in double.
    return float(__ddiv_rn(clamp(rint(__dmul_rn(__ll2double_rn(acc), unscale))), scale));
  }
};

// The FP32 chain of one output element: k ascending from +0, one fma each.
template <bool kNegB>
__device__ inline float dot32(const float* a, const float* b, int C, int j) {
  float acc = 0.0f;
  for (int k = 0; k < C; ++k) {
    const float bk = kNegB ? -b[k * C + j] : b[k * C + j];
    acc = __fmaf_rn(a[k], bk, acc);
  }
  return acc;
}

// This thread's part of max |I - (I + L) X| in FP64 (residual_max).
__device__ inline double residual_part(const float* L, const float* X, int C, int tid, int threads) {
  double r = 0.0;
  for (int e = tid; e < C * C; e += threads) {
    const int i = e / C, j = e - i * C;
    double s = double(X[e]);
    for (int k = 0; k < C; ++k) s = __dadd_rn(s, __dmul_rn(double(L[i * C + k]), double(X[k * C + j])));
    const double d = __dsub_rn(i == j ? 1.0 : 0.0, s);
    r = isfinite(d) ? fmax(r, fabs(d)) : INFINITY;
  }
  return r;
}

template <int kWarps, bool kInt16>
__global__ void __launch_bounds__(kWarps == 1 ? 32 * kTasksPerBlock : 32 * kWarps)
    residual_neumann_kernel(RnArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  constexpr int G = 32 * kWarps;  // threads of one task
  const int C = a.C, CC = C * C;
  int tid;
  long long task;
  float* base;
  if constexpr (kWarps == 1) {
    const int warp = threadIdx.x >> 5;
    tid = threadIdx.x & 31;
    task = static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + warp;
    if (task >= a.tasks) return;
    base = reinterpret_cast<float*>(smem) + size_t(warp) * 4 * CC;
  } else {
    tid = threadIdx.x;
    task = blockIdx.x;
    base = reinterpret_cast<float*>(smem);
  }
  float* L = base;
  float* X0 = L + CC;
  float* X = X0 + CC;
  float* T = X + CC;
  Fixed fx(a.f);
  float work = 0.0f;

  // L in the method's input format (work_max starts with max |L|).
  const double* gl = a.l + static_cast<size_t>(task) * CC;
  for (int e = tid; e < CC; e += G) {
    const float v = kInt16 ? fx.input(gl[e]) : __double2float_rn(gl[e]);
    L[e] = v;
    work = fmaxf(work, mag(v));
  }
  group_sync<kWarps>();

  // neg = -L (int16: sat(0 - L), counted once here), X0 = I + neg.
  for (int e = tid; e < CC; e += G) {
    const int i = e / C, j = e - i * C;
    const float id = i == j ? 1.0f : 0.0f;
    float neg, x0;
    if constexpr (kInt16) {
      neg = fx.add(0.0f, L[e], -1.0);
      x0 = fx.add(id, neg, 1.0);
    } else {
      neg = -L[e];
      x0 = __fadd_rn(id, neg);
    }
    T[e] = neg;
    X0[e] = x0;
    work = fmaxf(work, mag(x0));
  }
  group_sync<kWarps>();

  // Powers P = P (-L), n = 2..N, summed into X0 as they come.
  float* P = T;
  float* Q = X;
  for (int n = 2; n <= a.order; ++n) {
    for (int e = tid; e < CC; e += G) {
      const int i = e / C, j = e - i * C;
      float p, x0;
      if constexpr (kInt16) {
        p = fx.dot<true>(P + i * C, L, C, j);
        x0 = fx.add(X0[e], p, 1.0);
      } else {
        p = dot32<true>(P + i * C, L, C, j);
        x0 = __fadd_rn(X0[e], p);
      }
      Q[e] = p;
      X0[e] = x0;
      work = fmaxf(work, fmaxf(mag(p), mag(x0)));
    }
    group_sync<kWarps>();
    float* t = P;
    P = Q;
    Q = t;
  }

  // The diagonal mask, then X = X0.
  for (int e = tid; e < CC; e += G) {
    const int i = e / C, j = e - i * C;
    if (i - j >= a.band) X0[e] = 0.0f;
    X[e] = X0[e];
  }
  group_sync<kWarps>();
  const double before = residual_part(L, X0, C, tid, G);  // reads L, X0 only: the steps leave them alone

  for (int s = 0; s < a.steps; ++s) {
    // T = R = (I - X) - L X.
    for (int e = tid; e < CC; e += G) {
      const int i = e / C, j = e - i * C;
      const float id = i == j ? 1.0f : 0.0f;
      float lx, r;
      if constexpr (kInt16) {
        lx = fx.dot<false>(L + i * C, X, C, j);
        r = fx.add(fx.add(id, X[e], -1.0), lx, -1.0);
      } else {
        lx = dot32<false>(L + i * C, X, C, j);
        r = __fsub_rn(__fsub_rn(id, X[e]), lx);
      }
      T[e] = r;
      work = fmaxf(work, fmaxf(mag(lx), mag(r)));
    }
    group_sync<kWarps>();
    // X = X + X0 R.
    for (int e = tid; e < CC; e += G) {
      const int i = e / C, j = e - i * C;
      float corr, x;
      if constexpr (kInt16) {
        corr = fx.dot<false>(X0 + i * C, T, C, j);
        x = fx.add(X[e], corr, 1.0);
      } else {
        corr = dot32<false>(X0 + i * C, T, C, j);
        x = __fadd_rn(X[e], corr);
      }
      X[e] = x;
      work = fmaxf(work, fmaxf(mag(corr), mag(x)));
    }
    group_sync<kWarps>();
  }
  const double after = residual_part(L, X, C, tid, G);

  float* inv = a.inv + static_cast<size_t>(task) * CC;
  for (int e = tid; e < CC; e += G) inv[e] = X[e];

  // Diagnostics: maxima (never NaN here) and the saturation count.
  Partial p{before, after, work, fx.sat};
  for (int o = 16; o > 0; o >>= 1) {
    p.before = fmax(p.before, __shfl_xor_sync(0xffffffffu, p.before, o));
    p.after = fmax(p.after, __shfl_xor_sync(0xffffffffu, p.after, o));
    p.work = fmaxf(p.work, __shfl_xor_sync(0xffffffffu, p.work, o));
    p.sat += __shfl_xor_sync(0xffffffffu, p.sat, o);
  }
  if constexpr (kWarps > 1) {
    Partial* part = reinterpret_cast<Partial*>(base + 4 * CC);
    if ((tid & 31) == 0) part[tid >> 5] = p;
    __syncthreads();
    if (tid != 0) return;
    long long sat = 0;
    for (int w = 0; w < kWarps; ++w) {
      p.before = fmax(p.before, part[w].before);
      p.after = fmax(p.after, part[w].after);
      p.work = fmaxf(p.work, part[w].work);
      sat += part[w].sat;
    }
    double* d = a.diag + static_cast<size_t>(task) * a.ndiag;
    d[0] = p.before;
    d[1] = p.after;
    d[2] = double(p.work);
    d[3] = double(sat);
  } else {
    if (tid != 0) return;
    double* d = a.diag + static_cast<size_t>(task) * a.ndiag;
    d[0] = p.before;
    d[1] = p.after;
    d[2] = double(p.work);
    d[3] = double(p.sat);
  }
}

template <int kWarps, bool kInt16>
void launch_t(const RnArgs& args, cudaStream_t st) {
  const size_t per_task = 4 * size_t(args.C) * args.C * sizeof(float);
  size_t smem;
  long long grid;
  int threads;
  if constexpr (kWarps == 1) {
    smem = kTasksPerBlock * per_task;
    threads = 32 * kTasksPerBlock;
    grid = (args.tasks + kTasksPerBlock - 1) / kTasksPerBlock;
  } else {
    smem = per_task + kWarps * sizeof(Partial);
    threads = 32 * kWarps;
    grid = args.tasks;
  }
  if constexpr (kWarps == kMaxWarps) {
    // C = 64: 64 KiB of matrices, above the default 48 KiB of dynamic shared memory.
    static const bool raised = [] {
      CUDA_CHECK(cudaFuncSetAttribute(residual_neumann_kernel<kWarps, kInt16>,
                                      cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(4 * 64 * 64 * sizeof(float) + kMaxWarps * sizeof(Partial))));
      return true;
    }();
    (void)raised;
  }
  residual_neumann_kernel<kWarps, kInt16><<<unsigned(grid), threads, smem, st>>>(args);
  CUDA_CHECK_LAUNCH();
}

template <bool kInt16>
void launch_format(const RnArgs& args, cudaStream_t st) {
  if (args.C <= 16) launch_t<1, kInt16>(args, st);
  else if (args.C <= 32) launch_t<4, kInt16>(args, st);
  else launch_t<kMaxWarps, kInt16>(args, st);
}

}  // namespace

void launch_residual_neumann(const InverseLaunch& a) {
  if (a.tasks <= 0) return;
  if (a.chunk < 2 || a.chunk > 64) throw std::logic_error("launch_residual_neumann: chunk outside 2..64");
  if (a.ndiag != 4) throw std::logic_error("launch_residual_neumann: expects 4 diagnostics");
  const ResidualNeumannParams& p = a.method->params<ResidualNeumannParams>();
  const bool int16 = p.format == ResidualFormat::kInt16;
  if (!int16 && p.format != ResidualFormat::kFp32)
    throw std::logic_error("launch_residual_neumann: format " + std::string(format_name(p.format)) + " not covered");
  RnArgs args;
  args.tasks = a.tasks;
  args.C = a.chunk;
  args.order = p.order;
  args.steps = p.steps;
  args.band = p.band;  // 0 on the axis is order + 1 here already
  args.f = p.frac_bits;
  if (args.f < 1 || args.f > 14) throw std::logic_error("launch_residual_neumann: frac_bits outside 1..14");
  args.l = a.l;
  args.inv = a.inv;
  args.diag = a.diag;
  args.ndiag = a.ndiag;
  const auto st = static_cast<cudaStream_t>(a.stream);
  if (int16) launch_format<true>(args, st);
  else launch_format<false>(args, st);
}

}  // namespace chunkinv::gpu
