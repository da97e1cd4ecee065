// gpu/chunked_backward.hpp: downstream/backward_step.hpp's step, a block of
// 256 threads a variant, one launch a chunk.
#include "gpu/chunked_backward.hpp"

#include <stdexcept>
#include <string>

#include "core/error.hpp"
#include "gpu/block_context.cuh"
#include "gpu/buffers.cuh"
#include "gpu/check.cuh"
#include "gpu/gpu.hpp"

namespace chunkinv::gpu {
namespace {

using detail::BlockContext;
using detail::DeviceBuffer;
using detail::upload;

constexpr int kThreads = 256;

struct Launch {
  const double *q, *k, *v, *g, *beta, *d_o, *inverses, *states;
  double *ds, *dq, *dk, *dv, *dg, *dbeta, *work;
  const Stores* forward;
  const backward_step::BackwardStores* backward;
  int C, K, V, W;
  double scale;
  size_t work_per_variant;
};

__global__ void __launch_bounds__(kThreads) backward_step_kernel(const __grid_constant__ Launch l) {
  const size_t var = blockIdx.x, C = l.C, K = l.K, V = l.V, W = l.W;
  backward_step::Args a;
  a.q = l.q;
  a.k = l.k;
  a.v = l.v;
  a.g = l.g;
  a.beta = l.beta;
  a.d_o = l.d_o;
  a.A = l.inverses + var * C * C;
  a.state_in = l.states + var * K * V;
  a.ds = l.ds + var * K * V;
  a.dq = l.dq + var * C * K;
  a.dk = l.dk + var * C * K;
  a.dv = l.dv + var * C * V;
  a.dg = l.dg + var * C * W;
  a.dbeta = l.dbeta + var * C;
  a.work = l.work + var * l.work_per_variant;
  a.C = l.C;
  a.K = l.K;
  a.V = l.V;
  a.W = l.W;
  a.scale = l.scale;
  a.p = l.forward[var];
  a.b = l.backward[var];
  BlockContext x;
  backward_step::step(a, x);
}

}  // namespace

struct DeviceChunkedBackward::Impl {
  int n = 0, C = 0, K = 0, V = 0, W = 1;
  double scale = 0;
  DeviceBuffer<double> q, k, v, g, beta, d_o, inverses, states, ds, dq, dk, dv, dg, dbeta, work;
  DeviceBuffer<Stores> forward;
  DeviceBuffer<backward_step::BackwardStores> backward;
};

DeviceChunkedBackward::DeviceChunkedBackward(int chunk, int key_dim, int value_dim, int gate_width, double scale,
                                             const std::vector<Stores>& forward,
                                             const std::vector<backward_step::BackwardStores>& backward,
                                             const double* dht)
    : impl_(std::make_unique<Impl>()) {
  if (const std::string why = unavailable_reason(); !why.empty())
    throw UsageError("the GPU chunked backward: no CUDA GPU: " + why);
  if (forward.size() != backward.size())
    throw std::logic_error("DeviceChunkedBackward: a forward and a backward preset a variant");
  Impl& m = *impl_;
  m.n = int(forward.size()), m.C = chunk, m.K = key_dim, m.V = value_dim, m.W = gate_width, m.scale = scale;
  const size_t kv = size_t(m.K) * m.V;
  std::vector<double> start(size_t(m.n) * kv, 0.0);
  for (int var = 0; var < m.n; ++var)
    for (size_t i = 0; i < kv; ++i) start[var * kv + i] = stored(dht ? dht[i] : 0.0, backward[var].grad_state);
  upload(m.ds, start.data(), start.size());
  upload(m.forward, forward.data(), forward.size());
  upload(m.backward, backward.data(), backward.size());
  m.work.get(size_t(m.n) * backward_step::work_doubles(m.C, m.K, m.V, m.W));
}

DeviceChunkedBackward::~DeviceChunkedBackward() = default;

void DeviceChunkedBackward::step(const ChunkRows& rows, const double* inverses, const double* states,
                                 const GradientRows& out) {
  Impl& m = *impl_;
  const size_t C = m.C, K = m.K, V = m.V, W = m.W, n = m.n;
  Launch l{};
  l.q = upload(m.q, rows.q, C * K);
  l.k = upload(m.k, rows.k, C * K);
  l.v = upload(m.v, rows.v, C * V);
  l.g = upload(m.g, rows.g, C * W);
  l.beta = upload(m.beta, rows.beta, C);
  l.d_o = upload(m.d_o, rows.d_o, C * V);
  l.inverses = upload(m.inverses, inverses, n * C * C);
  l.states = upload(m.states, states, n * K * V);
  l.ds = m.ds.data();
  l.dq = m.dq.get(n * C * K);
  l.dk = m.dk.get(n * C * K);
  l.dv = m.dv.get(n * C * V);
  l.dg = m.dg.get(n * C * W);
  l.dbeta = m.dbeta.get(n * C);
  l.work = m.work.data();
  l.forward = m.forward.data();
  l.backward = m.backward.data();
  l.C = m.C, l.K = m.K, l.V = m.V, l.W = m.W, l.scale = m.scale;
  l.work_per_variant = backward_step::work_doubles(m.C, m.K, m.V, m.W);
  backward_step_kernel<<<unsigned(n), kThreads>>>(l);
  CUDA_CHECK_LAUNCH();
  const auto down = [](double* host, const double* dev, size_t count) {
    CUDA_CHECK(cudaMemcpy(host, dev, count * sizeof(double), cudaMemcpyDeviceToHost));
  };
  down(out.dq, l.dq, n * C * K);
  down(out.dk, l.dk, n * C * K);
  down(out.dv, l.dv, n * C * V);
  down(out.dg, l.dg, n * C * W);
  down(out.dbeta, l.dbeta, n * C);
}

void DeviceChunkedBackward::state_grad(double* ds) const {
  const Impl& m = *impl_;
  CUDA_CHECK(cudaMemcpy(ds, m.ds.data(), size_t(m.n) * m.K * m.V * sizeof(double), cudaMemcpyDeviceToHost));
}

}  // namespace chunkinv::gpu
