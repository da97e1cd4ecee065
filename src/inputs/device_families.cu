// The generated families on the GPU (inputs/device_families.hpp). The CPU
// reference is inputs/families.cpp; tests/inputs/test_device_families.cpp
// compares every value of both.
//
// Normal n of a stream is element n & 1 of the Marsaglia pair n >> 1,
// whichever way the CPU groups them, so every pair is drawn independently.
// key_rows: a group of G lanes per key row (32 / G rows per warp) draws the
// row's pairs into shared memory in two passes. First each lane walks its
// pairs one polar attempt (one Philox block) per iteration, keeping the
// accepted (u, v) of a pair in the pair's two columns and going on to its
// next pair, so the warp's lanes keep drawing blocks instead of waiting at
// every pair for the one that accepts last. Then each lane turns its pairs'
// (u, v) into normals in place (log and sqrt once per pair, all lanes
// together). At odd d a row's first pair starts one column before it or its
// last pair ends one column after it; the row's buffer has a slot on either
// side for that element, which the transform needs and nothing else reads.
// Each lane of the group then sums the squares in column order (the CPU's
// order, so the same norm: one serial sum per row, which is why a row does
// not take a whole warp), and the group divides and rounds the columns to
// BF16 (Bf16Divider: a product by the norm's reciprocal where that is
// provably the division's BF16 value; its bits formed from the product's,
// with no double rounded and no conversion). Per-channel gates are drawn by the
// same group, pair by pair.
// token_values: one thread per pair of tokens of a sample (beta, per-token g).
#include "inputs/device_families.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "core/bf16_divider.hpp"
#include "core/detmath_hd.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/fp_hd.hpp"
#include "core/philox.hpp"
#include "core/rng.hpp"
#include "gpu/check.cuh"
#include "gpu/pack.hpp"

namespace chunkinv {
namespace {

using Kind = DeviceDraw::Kind;  // the family's generator (Family::device_draw)

struct GenArgs {
  uint64_t seed = 0, first = 0;
  int n = 0, chunk = 0, dim = 0;
  bool channel = false;  // gating=channel: g is C x d per sample
  double gate = 0.0;     // decay_floor (floor, model_like) or log_decay (weak_decay_correlated)
  double beta = 0.0;     // weak_decay_correlated's constant beta
  DeviceSampleBuffers out;
};

constexpr int kThreads = 256;

CHUNKINV_HD constexpr uint32_t stream_id(Stream s) { return static_cast<uint32_t>(s); }

// Doubles per key row in shared memory: columns -1..d, odd (an odd stride
// spreads the rows over the banks).
CHUNKINV_HD constexpr int row_stride(int d) { return (d + 2) | 1; }

// Calls sink(c, x) with normal base + c of `stream`, c = 0..d-1; the G lanes
// of a group (lane `g` of them) take the pairs covering them in turn.
template <class Sink>
__device__ void row_normals(const GenArgs& a, uint64_t sample, Stream stream, uint64_t base, int g, int G, Sink sink) {
  const int d = a.dim;
  const uint64_t q0 = base >> 1, q1 = (base + uint64_t(d) - 1) >> 1;
  for (uint64_t q = q0 + uint64_t(g); q <= q1; q += uint64_t(G)) {
    const philox::NormalPair z = philox::normal_pair(a.seed, sample, stream_id(stream), q);
    const long long c = static_cast<long long>(2 * q) - static_cast<long long>(base);  // column of z.x; -1 at an odd base
    if (c >= 0) sink(int(c), z.x);
    if (c + 1 < d) sink(int(c + 1), z.y);
  }
}

__device__ inline void put_beta(const GenArgs& a, size_t at, double beta) {
  a.out.beta[at] = beta;
  if (a.out.beta_fp16) a.out.beta_fp16[at] = gpu::fp16_bits_rn(beta);  // the packer's own rounding
}

// Key rows: row t is row t % C of sample t / C (floor, model_like) or row 0
// of sample t, written to its C rows (weak_decay_correlated). Shared memory:
// 32 / G rows of row_stride(d) doubles per warp, column c at c + 1.
template <Kind K>
__global__ void key_rows(GenArgs a, int G) {
  extern __shared__ double smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const int R = 32 / G, group = lane / G, g = lane % G;
  const int C = a.chunk, d = a.dim;
  double* v = smem + (size_t(warp) * R + group) * size_t(row_stride(d)) + 1;  // v[-1] and v[d] exist
  const long long rows = K == Kind::kWeakDecayCorrelated ? a.n : static_cast<long long>(a.n) * C;
  for (long long t0 = (static_cast<long long>(blockIdx.x) * warps + warp) * R; t0 < rows;
       t0 += static_cast<long long>(gridDim.x) * warps * R) {
    const long long t = t0 + group;
    const bool active = t < rows;
    const long long j = K == Kind::kWeakDecayCorrelated ? t : t / C;  // sample of this call
    const int r = K == Kind::kWeakDecayCorrelated ? 0 : int(t % C);
    const uint64_t sample = a.first + uint64_t(j);
    // random_unit_key(seed, sample, r, d): normals base + c, c = 0..d-1; lane
    // g takes pairs q0 + g, q0 + g + G, ..., pair q at columns c and c + 1,
    // c = 2q - base (-1 for q0 at an odd base).
    if (active) {
      const uint64_t base = uint64_t(r) * d, q0 = base >> 1, q1 = (base + uint64_t(d) - 1) >> 1;
      const int odd = int(base & 1);
      // The attempts: (u, v) of the accepted one, or (0, 0) after 256 rejected.
      uint64_t q = q0 + uint64_t(g);
      uint32_t at = 0;
      while (q <= q1) {
        double u, w;
        const bool inside = philox::polar_attempt(a.seed, sample, stream_id(Stream::kKeys), q, at, u, w);
        if (inside || at == 255) {
          const int c = 2 * int(q - q0) - odd;
          v[c] = inside ? u : 0.0;
          v[c + 1] = inside ? w : 0.0;
          q += uint64_t(G);
          at = 0;
        } else {
          ++at;
        }
      }
      // The transforms, over the same pairs.
      for (q = q0 + uint64_t(g); q <= q1; q += uint64_t(G)) {
        const int c = 2 * int(q - q0) - odd;
        const philox::NormalPair z = philox::polar_transform(v[c], v[c + 1]);
        v[c] = z.x;
        v[c + 1] = z.y;
      }
    }
    __syncwarp();
    if (active) {
      double norm2 = 0.0;  // column order, as the CPU sums
      for (int c = 0; c < d; ++c) norm2 += v[c] * v[c];
      const Bf16Divider by_norm(sqrt(norm2));  // round_to(v[c] / norm, kBF16), one division a row
      uint16_t* keys = a.out.keys + size_t(t) * (K == Kind::kWeakDecayCorrelated ? C : 1) * d;
      for (int c = g; c < d; c += G) {
        uint16_t bits;
        if (!by_norm.fast_bits(v[c], bits)) {
          const double k = by_norm(v[c]);
          // 0/0 (a row of exact zeros, p < 2^-52 at d = 1) is NaN: the CPU's is
          // x86's default NaN, 0xFFF8..., whose BF16 pattern is 0xFFC0.
          bits = isnan(k) ? uint16_t(0xFFC0) : hd::exact_bf16_bits(k);
        }
        if constexpr (K == Kind::kWeakDecayCorrelated) {
          for (int rr = 0; rr < C; ++rr) keys[size_t(rr) * d + c] = bits;
        } else {
          keys[c] = bits;
        }
      }
      // Per-channel gates: gate (r, c) is floor * sigmoid(normal r * d + c of
      // kChannelGate) for model_like, the floor itself for floor.
      if (K != Kind::kWeakDecayCorrelated && a.channel) {
        double* gr = a.out.g + size_t(t) * d;
        if constexpr (K == Kind::kModelLike) {
          row_normals(a, sample, Stream::kChannelGate, uint64_t(r) * d, g, G,
                      [&](int c, double x) { gr[c] = a.gate * detmath::hd::sigmoid(x); });
        } else {
          for (int c = g; c < d; c += G) gr[c] = a.gate;
        }
      }
    }
    __syncwarp();  // v is read before the next rows overwrite it
  }
}

// Per-token values: thread t takes tokens 2p, 2p + 1 of sample t / P, P =
// ceil(C / 2), p = t % P: beta = sigmoid(normal of kBeta) and, with per-token
// gates, g = floor * sigmoid(normal of kGate) (model_like) or the floor;
// weak_decay_correlated's constants.
template <Kind K>
__global__ void token_values(GenArgs a) {
  const int C = a.chunk, pairs = (C + 1) / 2;
  const long long tasks = static_cast<long long>(a.n) * pairs;
  for (long long t = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; t < tasks;
       t += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long j = t / pairs;
    const int p = int(t % pairs), m = min(2, C - 2 * p);
    const uint64_t sample = a.first + uint64_t(j);
    const size_t at = size_t(j) * C + size_t(2 * p);
    double beta[2] = {a.beta, a.beta}, gate[2] = {a.gate, a.gate};
    if constexpr (K != Kind::kWeakDecayCorrelated) {
      const philox::NormalPair z = philox::normal_pair(a.seed, sample, stream_id(Stream::kBeta), uint64_t(p));
      beta[0] = detmath::hd::sigmoid(z.x);
      beta[1] = detmath::hd::sigmoid(z.y);
    }
    if constexpr (K == Kind::kModelLike) {
      if (!a.channel) {
        const philox::NormalPair z = philox::normal_pair(a.seed, sample, stream_id(Stream::kGate), uint64_t(p));
        gate[0] = a.gate * detmath::hd::sigmoid(z.x);
        gate[1] = a.gate * detmath::hd::sigmoid(z.y);
      }
    }
    for (int i = 0; i < m; ++i) {
      put_beta(a, at + i, beta[i]);
      if (!a.channel) a.out.g[at + i] = gate[i];
    }
  }
}

// Warps per block of key_rows: 1 to 32, whichever holds the most warps an
// SM by the occupancy calculator (registers, shared memory with its
// per-block reserve, blocks an SM), each block's rows taking warp_bytes a
// warp. By the H200's limits (228 KB an SM, 1 KB reserved a block, 58
// registers) that is 9 warps at d = 128 (75 KB a block, three blocks: 27
// warps), where 48 KB a block allowed five warps and five blocks (25);
// computed here, not read back on the device. Inputs stage, run 81: 39.1 ->
// 38.6 ns a sample at C = 32. Found once per kernel and row size.
int key_row_warps(const void* kernel, size_t warp_bytes) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, size_t>, int> found;
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dev, kernel, warp_bytes);
  if (const auto it = found.find(key); it != found.end()) return it->second;
  const int best = gpu::detail::units_per_block(warp_bytes, 1, 32, gpu::detail::allow_optin_smem(kernel), kernel);
  found[key] = best;
  return best;
}

template <Kind K>
void launch(const GenArgs& a, cudaStream_t stream) {
  // Lanes per key row: about 16 pairs each (G = 4 at d = 128), 1 to 32.
  // Each lane of a row's group sums the row's squares (one serial sum, in
  // column order), so fewer lanes a row spend less on that sum.
  int G = 1;
  while (G < 32 && 32 * G < a.dim) G *= 2;
  // Warps per block: the count that keeps the most warps on a
  // multiprocessor, its rows' shared memory the limit (the fewest warps of
  // those that tie: smaller blocks leave a smaller tail).
  const size_t warp_bytes = size_t(32 / G) * size_t(row_stride(a.dim)) * sizeof(double);
  const int warps = key_row_warps(reinterpret_cast<const void*>(&key_rows<K>), warp_bytes);
  const long long rows = K == Kind::kWeakDecayCorrelated ? a.n : static_cast<long long>(a.n) * a.chunk;
  const long long rows_per_block = static_cast<long long>(warps) * (32 / G);
  const long long key_blocks = std::min<long long>((rows + rows_per_block - 1) / rows_per_block, 1 << 20);
  key_rows<K><<<unsigned(key_blocks), 32 * warps, size_t(warps) * warp_bytes, stream>>>(a, G);
  CUDA_CHECK_LAUNCH();
  const long long tasks = static_cast<long long>(a.n) * ((a.chunk + 1) / 2);
  const long long token_blocks = std::min<long long>((tasks + kThreads - 1) / kThreads, 1 << 20);
  token_values<K><<<unsigned(token_blocks), kThreads, 0, stream>>>(a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void generate_on_device(const Configuration& c, uint64_t seed, uint64_t first, int n, const DeviceSampleBuffers& out,
                        cudaStream_t stream) {
  std::string why;
  if (!device_generates(c, &why)) throw UsageError("generate_on_device: " + why);
  find_family(c.family).validate(c);
  if (n < 0) throw UsageError("generate_on_device: n = " + std::to_string(n) + " < 0");
  if (n == 0) return;
  if (!out.keys || !out.g || !out.beta) throw UsageError("generate_on_device: keys, g and beta must be device buffers");

  const DeviceDraw draw = *device_draw_of(c, nullptr);  // its parameters, read from the validated axes
  GenArgs a;
  a.seed = seed;
  a.first = first;
  a.n = n;
  a.chunk = c.chunk;
  a.dim = c.dim;
  a.out = out;
  a.gate = draw.gate;
  a.beta = draw.beta;        // weak_decay_correlated's; unread by the others
  a.channel = draw.channel;  // even at d = 1, where g has the shape of per-token gates
  switch (draw.kind) {
    case Kind::kWeakDecayCorrelated: launch<Kind::kWeakDecayCorrelated>(a, stream); break;
    case Kind::kFloor: launch<Kind::kFloor>(a, stream); break;
    case Kind::kModelLike: launch<Kind::kModelLike>(a, stream); break;
  }
}

}  // namespace chunkinv
