#include "paths/kernel/gpu_inverse_runner.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "gpu/gpu.hpp"

namespace chunkinv::gpu {

BatchTiming GpuInverseRunner::launch(const GpuInverse& form, const Method& method, int tasks, int chunk) {
  const size_t csq = size_t(chunk) * chunk, nd = form.spec->diagnostics.size();
  InverseLaunch a;
  a.tasks = tasks;
  a.chunk = chunk;
  a.ndiag = int(nd);
  a.method = &method;
  a.l = d_l_.get(size_t(tasks) * csq);
  a.inv = d_inv_.get(size_t(tasks) * csq);
  a.diag = d_diag_.get(std::max<size_t>(size_t(tasks) * nd, 1));
  cudaStream_t st = nullptr;
  a.stream = st;
  timer_.mark(0, st);
  CUDA_CHECK(cudaMemcpyAsync(const_cast<double*>(a.l), h_l_.get(size_t(tasks) * csq), size_t(tasks) * csq * 8,
                             cudaMemcpyHostToDevice, st));
  timer_.mark(1, st);
  form.launch(a);
  timer_.mark(2, st);
  inv_host_ = h_inv_.get(size_t(tasks) * csq);
  diag_host_ = h_diag_.get(std::max<size_t>(size_t(tasks) * nd, 1));
  CUDA_CHECK(cudaMemcpyAsync(inv_host_, a.inv, size_t(tasks) * csq * 4, cudaMemcpyDeviceToHost, st));
  if (nd) CUDA_CHECK(cudaMemcpyAsync(diag_host_, a.diag, size_t(tasks) * nd * 8, cudaMemcpyDeviceToHost, st));
  timer_.mark(3, st);
  CUDA_CHECK(cudaStreamSynchronize(st));
  BatchTiming t;
  t.upload_ms = timer_.ms(0, 1);
  t.compute_ms = timer_.ms(1, 2);
  t.download_ms = timer_.ms(2, 3);
  return t;
}

void GpuInverseRunner::unpack(InverseRun& r, int task, int chunk, int ndiag) const {
  const size_t csq = size_t(chunk) * chunk;
  const float* inv = inv_host_ + size_t(task) * csq;
  r.inv.resize(chunk, chunk);
  for (int i = 0; i < chunk; ++i)
    for (int j = 0; j < chunk; ++j) r.inv(i, j) = double(inv[size_t(i) * chunk + j]);
  const double* diag = diag_host_ + size_t(task) * ndiag;
  r.diagnostics.assign(diag, diag + ndiag);
  r.intermediates.clear();
}

BatchTiming GpuInverseRunner::run(const GpuInverse& form, const Method& method,
                                  std::span<const GoldOutput> gold, std::span<PathOutput> out, ThreadPool& pool) {
  if (out.empty()) return {};
  const auto t0 = std::chrono::steady_clock::now();
  const int n = int(out.size()), C = int(out[0].l.L.rows());
  if (const std::string why = form.refuses(method, C); !why.empty()) throw UsageError(why);
  const bool gold_runs = !gold.empty();
  const int tasks = gold_runs ? 2 * n : n;
  const size_t csq = size_t(C) * C;
  double* h = h_l_.get(size_t(tasks) * csq);
  constexpr size_t kBlock = 64;
  const size_t blocks = (size_t(n) + kBlock - 1) / kBlock;
  auto put = [&](const Mat& m, size_t task) {
    if (m.rows() != C || m.cols() != C) throw std::logic_error("GpuInverseRunner: samples of one batch differ in chunk");
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < C; ++j) h[task * csq + size_t(i) * C + j] = m(i, j);
  };
  pool.parallel_for(blocks, [&](size_t b) {
    for (size_t s = b * kBlock; s < std::min(size_t(n), (b + 1) * kBlock); ++s) {
      put(out[s].l.L, s);
      if (gold_runs) put(gold[s].L, n + s);
    }
  });
  const double pack_ms = detail::wall_ms_since(t0);
  BatchTiming t = launch(form, method, tasks, C);
  const auto t1 = std::chrono::steady_clock::now();
  const int nd = int(form.spec->diagnostics.size());
  pool.parallel_for(blocks, [&](size_t b) {
    for (size_t s = b * kBlock; s < std::min(size_t(n), (b + 1) * kBlock); ++s) {
      unpack(out[s].on_path_l, int(s), C, nd);
      if (gold_runs) unpack(out[s].on_gold_l, int(n + s), C, nd);
      else out[s].on_gold_l = InverseRun{};
    }
  });
  t.host_ms = pack_ms + detail::wall_ms_since(t1);
  return t;
}

std::vector<InverseRun> GpuInverseRunner::run(const GpuInverse& form, const Method& method,
                                              std::span<const Mat> ls) {
  std::vector<InverseRun> runs(ls.size());
  if (ls.empty()) return runs;
  const int C = int(ls[0].rows());
  if (const std::string why = form.refuses(method, C); !why.empty()) throw UsageError(why);
  const size_t csq = size_t(C) * C;
  double* h = h_l_.get(ls.size() * csq);
  for (size_t t = 0; t < ls.size(); ++t) {
    if (ls[t].rows() != C || ls[t].cols() != C) throw UsageError("invert_on_gpu: matrices of different sizes");
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < C; ++j) h[t * csq + size_t(i) * C + j] = ls[t](i, j);
  }
  launch(form, method, int(ls.size()), C);
  const int nd = int(form.spec->diagnostics.size());
  for (size_t t = 0; t < ls.size(); ++t) unpack(runs[t], int(t), C, nd);
  return runs;
}

std::vector<InverseRun> invert_on_gpu(const GpuInverse& form, const Method& method, std::span<const Mat> ls) {
  if (const std::string why = unavailable_reason(); !why.empty())
    throw UsageError("method " + std::string(form.spec->name) + " on the GPU: " + why);
  GpuInverseRunner runner;
  return runner.run(form, method, ls);
}

}  // namespace chunkinv::gpu
