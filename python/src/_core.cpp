// chunkinv._core: the C++ library behind the Python package (docs/python.md).
// Arrays come in as NumPy arrays (read through the buffer protocol) or as
// anything that exports DLPack (torch tensors on the CPU or a CUDA GPU,
// BF16 included, read where they lie); their values are widened exactly to
// the FP64 of the library's tensors, go through the tensor-set checks of
// `chunkinv run --inputs`, and every path and method is reached through the
// registries, with the same Path, gold and metric code as the command line.
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if CHUNKINV_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <fmt/format.h>

#include "api/run.hpp"
#include "core/error.hpp"
#include "core/limits.hpp"
#include "gpu/gpu.hpp"
#include "io/tensor.hpp"
#include "core/thread_pool.hpp"
#include "downstream/backward.hpp"
#include "downstream/forward.hpp"
#include "downstream/tensors.hpp"
#include "inputs/tensor_set.hpp"
#include "metrics/metrics.hpp"
#include "metrics/stats.hpp"
#include "paths/candidate/candidate.hpp"
#include "paths/gold/gold.hpp"
#include "paths/path.hpp"
#include "report/report.hpp"
#include "report/worst.hpp"

namespace py = pybind11;
using namespace chunkinv;

namespace {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

Tensor tensor_of(const Array& a) {
  Tensor t;
  t.dtype = DType::kF64;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) t.shape.push_back(a.shape(i));
  t.values.assign(a.data(), a.data() + a.size());
  return t;
}

// --- DLPack ------------------------------------------------------------------
// The array API's exchange protocol: x.__dlpack__() hands over a capsule
// named "dltensor" holding a DLManagedTensor (dlpack/dlpack.h, Debian's
// libdlpack-dev); the consumer renames it "used_dltensor" and calls its
// deleter when done. NumPy >= 1.22 and torch export it; pybind11 has no type
// for it.

DType dtype_of(const DLDataType& t, const std::string& name) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 16) return DType::kF16;
    if (t.code == kDLFloat && t.bits == 32) return DType::kF32;
    if (t.code == kDLFloat && t.bits == 64) return DType::kF64;
    if (t.code == kDLBfloat && t.bits == 16) return DType::kBF16;
    if (t.code == kDLInt && t.bits == 16) return DType::kI16;
    if (t.code == kDLInt && t.bits == 32) return DType::kI32;
    if (t.code == kDLInt && t.bits == 64) return DType::kI64;
    if (t.code == kDLUInt && t.bits == 8) return DType::kU8;
    if (t.code == kDLUInt && t.bits == 16) return DType::kU16;
  }
  throw UsageError(name + ": DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                   " bits, " + std::to_string(t.lanes) + " lanes) is not a number type chunkinv reads");
}

// The bytes [first, first + size) of a CUDA tensor, on the host: the
// library's paths take their samples from host memory.
std::string device_bytes(const char* first, size_t size, const std::string& name) {
#if CHUNKINV_HAVE_CUDA
  if (const std::string why = gpu::unavailable_reason(); !why.empty())
    throw UsageError(name + ": a CUDA tensor, and no usable GPU here (" + why + ")");
  std::string host(size, '\0');
  if (const cudaError_t e = cudaMemcpy(host.data(), first, size, cudaMemcpyDeviceToHost); e != cudaSuccess)
    throw UsageError(name + ": copying the CUDA tensor to the host failed (" + cudaGetErrorString(e) + ")");
  return host;
#else
  (void)first, (void)size;
  throw UsageError(name + ": a CUDA tensor, and this chunkinv was built without CUDA (build it where nvcc is)");
#endif
}

Tensor tensor_of_dlpack(const py::object& o, const std::string& name) {
  int device = kDLCPU;
  if (py::hasattr(o, "__dlpack_device__")) device = o.attr("__dlpack_device__")().cast<py::tuple>()[0].cast<int>();
  if (device != kDLCPU && device != kDLCUDA && device != kDLCUDAHost && device != kDLCUDAManaged)
    throw UsageError(name + ": DLPack device type " + std::to_string(device) + " is neither the CPU nor a CUDA GPU");
  // Stream 1, CUDA's legacy default stream, is the one cudaMemcpy below
  // runs on: the producer makes it wait for the work that writes the tensor.
  const py::object capsule = device == kDLCUDA ? o.attr("__dlpack__")(py::arg("stream") = 1) : o.attr("__dlpack__")();
  if (!PyCapsule_IsValid(capsule.ptr(), "dltensor"))
    throw UsageError(name + ": __dlpack__() did not return an unused DLPack capsule");
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  PyCapsule_SetName(capsule.ptr(), "used_dltensor");
  const std::unique_ptr<DLManagedTensor, void (*)(DLManagedTensor*)> owned(managed, [](DLManagedTensor* m) {
    if (m->deleter) m->deleter(m);
  });
  const DLTensor& t = managed->dl_tensor;
  const DType dtype = dtype_of(t.dtype, name);
  const int64_t size = dtype_size(dtype);
  Tensor out;
  out.dtype = DType::kF64;  // the values are exact in FP64, as NumPy's arrays are given
  out.shape.assign(t.shape, t.shape + t.ndim);
  // Strides in elements (none: C order); the span of elements they reach.
  std::vector<int64_t> stride(t.ndim);
  int64_t numel = 1, lo = 0, hi = 0;
  for (int i = t.ndim - 1; i >= 0; --i) {
    stride[i] = t.strides ? t.strides[i] : (i == t.ndim - 1 ? 1 : stride[i + 1] * t.shape[i + 1]);
    if (t.shape[i] < 0) throw UsageError(name + ": DLPack shape has a negative extent");
    numel *= t.shape[i];
    if (t.shape[i] > 0) (stride[i] < 0 ? lo : hi) += stride[i] * (t.shape[i] - 1);
  }
  if (numel == 0) return out;
  const char* base = static_cast<const char*>(t.data) + t.byte_offset;
  std::string device_copy;
  if (device == kDLCUDA) {
    device_copy = device_bytes(base + lo * size, static_cast<size_t>((hi - lo + 1) * size), name);
    base = device_copy.data() - lo * size;
  }
  // Gathered into C order, then decoded by the tensor files' one routine.
  std::string bytes(static_cast<size_t>(numel * size), '\0');
  std::vector<int64_t> index(t.ndim, 0);
  for (int64_t k = 0; k < numel; ++k) {
    int64_t at = 0;
    for (int i = 0; i < t.ndim; ++i) at += index[i] * stride[i];
    std::memcpy(bytes.data() + k * size, base + at * size, static_cast<size_t>(size));
    for (int i = t.ndim - 1; i >= 0 && ++index[i] == t.shape[i]; --i) index[i] = 0;
  }
  out.values = decode(bytes, dtype, static_cast<uint64_t>(numel));
  return out;
}

// A NumPy array through its buffer, anything else that exports DLPack
// through that, the rest (lists, scalars) as NumPy converts it.
Tensor tensor_of(const py::object& o, const std::string& name) {
  if (!py::isinstance<py::array>(o) && py::hasattr(o, "__dlpack__")) return tensor_of_dlpack(o, name);
  return tensor_of(o.cast<Array>());
}

Array array_of(const std::vector<double>& v, std::vector<py::ssize_t> shape) {
  Array a(shape);
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

// Matrices [N, C, C] as one array.
Array stack(const std::vector<const Mat*>& ms, int c) {
  Array a({static_cast<py::ssize_t>(ms.size()), static_cast<py::ssize_t>(c), static_cast<py::ssize_t>(c)});
  double* p = a.mutable_data();
  for (const Mat* m : ms) p = std::copy(m->data(), m->data() + m->size(), p);
  return a;
}

struct Samples {
  TensorSet set;
  std::vector<TokenChunk> chunks;
  std::vector<Sample> samples;
  int chunk = 0;
};

// keys, g, beta and cu_seqlens (read as int64) as a tensor set takes them; errors name the keys `key_name`.
TensorMap set_tensors(const py::object& keys, const py::object& g, const py::object& beta, const py::object& cu,
                      const std::string& key_name) {
  TensorMap m{{"keys", tensor_of(keys, "arrays[" + key_name + "]")}, {"g", tensor_of(g, "arrays[g]")},
              {"beta", tensor_of(beta, "arrays[beta]")}};
  if (!cu.is_none()) {
    Tensor t = tensor_of(cu, "arrays[cu_seqlens]");
    t.dtype = DType::kI64;
    m["cu_seqlens"] = std::move(t);
  }
  return m;
}

Samples samples_of(const py::object& keys, const py::object& g, const py::object& beta, const py::object& cu_seqlens,
                   int chunk, const std::string& tail) {
  Samples s;
  s.set = make_tensor_set(set_tensors(keys, g, beta, cu_seqlens, "keys"), "arrays");
  s.chunk = s.set.token_layout ? (chunk > 0 ? chunk : 16) : s.set.chunk;
  if (s.set.token_layout && (s.chunk < 2 || s.chunk > 64))
    throw UsageError("chunk = " + std::to_string(s.chunk) + " is not in 2..64");
  s.chunks = chunk_tokens(s.set, s.chunk, parse_tail(tail));
  for (const TokenChunk& c : s.chunks) s.samples.push_back(chunk_sample(s.set, c, s.chunk));
  return s;
}

std::vector<GoldOutput> golds(const std::vector<Sample>& samples, ThreadPool& pool) {
  std::vector<GoldOutput> g(samples.size());
  pool.parallel_for(samples.size(), [&](size_t i) { g[i] = compute_gold(samples[i]); });
  return g;
}

// Per-sample metric values of one method's outputs: name -> array [N].
py::dict metric_dict(const MetricSet& set, const std::vector<double>& values, size_t n) {
  py::dict d;
  for (size_t k = 0; k < set.size(); ++k) {
    std::vector<double> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = values[i * set.size() + k];
    d[py::str(set.infos[k].name)] = array_of(v, {static_cast<py::ssize_t>(n)});
  }
  return d;
}

py::dict outputs_dict(const std::vector<PathOutput>& out, const std::vector<GoldOutput>& gold, const Method& method,
                      int c) {
  const size_t n = out.size();
  std::vector<const Mat*> ls, invs;
  std::vector<double> decay, inv_decay;
  for (const PathOutput& o : out) {
    ls.push_back(&o.l.L);
    invs.push_back(&o.on_path_l.inv);
    decay.insert(decay.end(), o.l.decay.begin(), o.l.decay.end());
    inv_decay.insert(inv_decay.end(), o.l.inv_decay.begin(), o.l.inv_decay.end());
  }
  const MetricSet& set = method_metrics(*method.spec);
  std::vector<double> values(n * set.size());
  for (size_t i = 0; i < n; ++i) evaluate(*method.spec, gold[i], out[i], values.data() + i * set.size());
  py::dict d;
  d["L"] = stack(ls, c);
  d["INV"] = stack(invs, c);
  // [N, C], or [N, C, d] for per-channel gates.
  const auto shape = [&](size_t size) -> std::vector<py::ssize_t> {
    const auto nn = static_cast<py::ssize_t>(n);
    if (n == 0 || size % (n * c) != 0) return {};
    const auto w = static_cast<py::ssize_t>(size / (n * c));
    return w == 1 ? std::vector<py::ssize_t>{nn, c} : std::vector<py::ssize_t>{nn, c, w};
  };
  if (const auto sh = shape(decay.size()); !decay.empty() && !sh.empty()) d["decay"] = array_of(decay, sh);
  if (const auto sh = shape(inv_decay.size()); !inv_decay.empty() && !sh.empty())
    d["inv_decay"] = array_of(inv_decay, sh);
  d["metrics"] = metric_dict(set, values, n);
  return d;
}

py::dict gold(const py::object& keys, const py::object& g, const py::object& beta, const py::object& cu, int chunk,
              const std::string& tail, int threads) {
  Samples s = samples_of(keys, g, beta, cu, chunk, tail);
  std::vector<GoldOutput> gd;
  std::vector<double> values;
  const MetricSet& set = reference_metrics();
  {
    py::gil_scoped_release nogil;
    ThreadPool pool(threads);
    gd = golds(s.samples, pool);
    values.resize(gd.size() * set.size());
    for (size_t i = 0; i < gd.size(); ++i) evaluate_reference(gd[i], values.data() + i * set.size());
  }
  std::vector<const Mat*> ls, invs;
  for (const GoldOutput& o : gd) ls.push_back(&o.L), invs.push_back(&o.inv);
  py::dict d;
  d["L"] = stack(ls, s.chunk);
  d["INV"] = stack(invs, s.chunk);
  d["metrics"] = metric_dict(set, values, gd.size());
  return d;
}

// The sequences of arrays in fla's layout (q, k, v, g, beta; initial_state,
// cu_seqlens, and the backward's do and dht where given), where each lies,
// and the scale (fla's K^-1/2 where none is given). Sequence i is sequence
// i / H, head i mod H.
struct ArraySequences {
  TensorSet set;
  SequenceSet seqs;
  std::vector<SequenceSpan> spans;
  int64_t B = 0, T = 0, H = 0, K = 0, V = 0, N = 0;
  bool scaled = false;
  double scale = 0.0;
  double scale_of(const Sequence& s) const { return scaled ? scale : default_scale(s); }
  // Sequence i's rows (tokens x width) into `out`, an array [B, T, H, width].
  void put_rows(size_t i, const Mat& rows, int64_t width, double* out) const {
    const SequenceSpan& sp = spans[int64_t(i) / H];
    const int64_t h = int64_t(i) % H;
    for (int64_t t = 0; t < sp.tokens; ++t)
      std::copy(rows.row(t).data(), rows.row(t).data() + width, out + ((sp.row * T + sp.first + t) * H + h) * width);
  }
  // Sequence i's K x V matrix into `out`, an array [N, H, K, V].
  void put_state(size_t i, const Mat& m, double* out) const {
    std::copy(m.data(), m.data() + K * V, out + int64_t(i) * K * V);
  }
};

ArraySequences array_sequences(const py::object& q, const py::object& k, const py::object& v, const py::object& g,
                               const py::object& beta, const py::object& scale, const py::object& h0,
                               const py::object& cu, const py::object& d_o = py::none(),
                               const py::object& dht = py::none()) {
  ArraySequences a;
  a.set = make_tensor_set(set_tensors(k, g, beta, cu, "k"), "arrays");
  TensorMap more{{"q", tensor_of(q, "arrays[q]")}, {"v", tensor_of(v, "arrays[v]")}};
  if (!h0.is_none()) more["initial_state"] = tensor_of(h0, "arrays[initial_state]");
  if (!d_o.is_none()) more["do"] = tensor_of(d_o, "arrays[do]");
  if (!dht.is_none()) more["dht"] = tensor_of(dht, "arrays[dht]");
  a.seqs = sequences_of(a.set, more, "arrays");
  a.spans = sequence_spans(a.set);
  a.B = a.set.batch, a.T = a.set.tokens, a.H = a.seqs.heads, a.K = a.set.dim;
  a.V = a.seqs.sequences.front().value_dim, a.N = int64_t(a.spans.size());
  a.scaled = !scale.is_none();
  a.scale = a.scaled ? scale.cast<double>() : 0.0;
  if (a.scaled && !(a.scale > 0.0 && std::isfinite(a.scale)))
    throw UsageError(fmt::format("scale = {} is not a positive finite number", a.scale));
  return a;
}

// The FP64 token recurrence (docs/downstream.md) of every sequence and head
// of inputs in fla's layout: o [B, T, H, V] and the final state [N, H, K, V].
py::dict recurrence(const py::object& q, const py::object& k, const py::object& v, const py::object& g,
                    const py::object& beta, const py::object& scale, const py::object& h0, const py::object& cu,
                    int threads) {
  const ArraySequences in = array_sequences(q, k, v, g, beta, scale, h0, cu);
  using S = py::ssize_t;
  Array o({S(in.B), S(in.T), S(in.H), S(in.V)}), ht({S(in.N), S(in.H), S(in.K), S(in.V)});
  std::fill(o.mutable_data(), o.mutable_data() + o.size(), 0.0);
  {
    py::gil_scoped_release nogil;
    double *po = o.mutable_data(), *ph = ht.mutable_data();
    ThreadPool pool(threads);
    pool.parallel_for(in.seqs.sequences.size(), [&](size_t i) {
      const Sequence& sq = in.seqs.sequences[i];
      Recurrence r(sq, in.scale_of(sq));
      Mat rows;
      r.advance(0, sq.tokens, rows);
      in.put_rows(i, rows, in.V, po);
      in.put_state(i, r.state(), ph);
    });
  }
  py::dict d;
  d["o"] = o;
  d["final_state"] = ht;
  return d;
}

// The FP64 recurrence's gradients (downstream/backward.hpp) of sum(do o) +
// sum(dht ht) with respect to every input, in the inputs' layouts.
py::dict recurrence_backward(const py::object& q, const py::object& k, const py::object& v, const py::object& g,
                             const py::object& beta, const py::object& d_o, const py::object& dht,
                             const py::object& scale, const py::object& h0, const py::object& cu, int threads) {
  const ArraySequences in = array_sequences(q, k, v, g, beta, scale, h0, cu, d_o, dht);
  const int64_t B = in.B, T = in.T, H = in.H, K = in.K, V = in.V, N = in.N, W = in.set.g_channels;
  using S = py::ssize_t;
  Array dq({S(B), S(T), S(H), S(K)}), dk({S(B), S(T), S(H), S(K)}), dv({S(B), S(T), S(H), S(V)}),
      dg(W == 1 ? std::vector<S>{S(B), S(T), S(H)} : std::vector<S>{S(B), S(T), S(H), S(K)}),
      dbeta({S(B), S(T), S(H)}), dh0({S(N), S(H), S(K), S(V)});
  for (Array* a : {&dq, &dk, &dv, &dg, &dbeta}) std::fill(a->mutable_data(), a->mutable_data() + a->size(), 0.0);
  {
    py::gil_scoped_release nogil;
    double *pq = dq.mutable_data(), *pk = dk.mutable_data(), *pv = dv.mutable_data(), *pg = dg.mutable_data(),
           *pb = dbeta.mutable_data(), *ph = dh0.mutable_data();
    ThreadPool pool(threads);
    pool.parallel_for(in.seqs.sequences.size(), [&](size_t i) {
      const Sequence& sq = in.seqs.sequences[i];
      const Gradients gr = recurrent_backward(sq, upstream_of(sq, 0, 0), in.scale_of(sq));
      in.put_rows(i, gr.dq, K, pq), in.put_rows(i, gr.dk, K, pk), in.put_rows(i, gr.dv, V, pv);
      in.put_rows(i, gr.dg, W, pg), in.put_rows(i, gr.dbeta, 1, pb);
      in.put_state(i, gr.dh0, ph);
    });
  }
  py::dict d;
  d["dq"] = dq, d["dk"] = dk, d["dv"] = dv, d["dg"] = dg, d["dbeta"] = dbeta, d["dh0"] = dh0;
  return d;
}

py::dict inverse(const py::object& keys, const py::object& g, const py::object& beta, const std::string& path,
                 const std::string& method, const py::object& cu, int chunk, const std::string& tail, int threads) {
  Samples s = samples_of(keys, g, beta, cu, chunk, tail);
  const std::vector<PathChoice> choices = parse_paths(path);
  if (choices.size() != 1) throw UsageError("path \"" + path + "\": name one path");
  const Method m = method.empty() ? method_of(default_method()) : parse_method(method);
  std::string why;
  Configuration cfg;
  cfg.family = "arrays";
  cfg.chunk = s.chunk;
  cfg.dim = s.set.dim;
  if (!choices[0].spec->supports(cfg, m, &why)) throw UsageError(why);
  std::vector<GoldOutput> gd;
  std::vector<PathOutput> out(s.samples.size());
  {
    py::gil_scoped_release nogil;
    ThreadPool pool(threads);
    gd = golds(s.samples, pool);
    auto instance = make_path(choices[0]);
    const Method* ms[] = {&m};
    instance->run_batch({s.samples, gd, 0}, ms, out, pool, false);
  }
  return outputs_dict(out, gd, m, s.chunk);
}

py::dict score(const py::object& inv, const py::object& l, const py::object& keys, const py::object& g, const py::object& beta,
               const py::object& decay, const py::object& inv_decay, const std::string& method, const py::object& cu,
               int chunk, const std::string& tail, int threads) {
  Samples s = samples_of(keys, g, beta, cu, chunk, tail);
  const size_t n = s.samples.size();
  const int c = s.chunk;
  if (inv.is_none() && l.is_none()) throw UsageError("score needs inv and/or L");
  // The kernel's matrices [N, C, C] and decay rows [N, C], any array type.
  auto mats = [&](const py::object& o, const char* name) {
    std::vector<Mat> v;
    if (o.is_none()) return v;
    const Tensor a = tensor_of(o, name);
    if (a.shape != std::vector<int64_t>{static_cast<int64_t>(n), c, c})
      throw UsageError(std::string(name) + ": shape " + shape_string(a.shape) + " is not [N, C, C] = (" +
                       std::to_string(n) + ", " + std::to_string(c) + ", " + std::to_string(c) + ")");
    for (size_t i = 0; i < n; ++i) v.push_back(Eigen::Map<const Mat>(a.values.data() + i * c * c, c, c));
    return v;
  };
  auto rows = [&](const py::object& o, const char* name) {
    std::vector<std::vector<double>> v;
    if (o.is_none()) return v;
    const Tensor a = tensor_of(o, name);
    if (a.shape != std::vector<int64_t>{static_cast<int64_t>(n), c})
      throw UsageError(std::string(name) + ": shape " + shape_string(a.shape) + " is not [N, C] = (" +
                       std::to_string(n) + ", " + std::to_string(c) + ")");
    for (size_t i = 0; i < n; ++i) v.emplace_back(a.values.data() + i * c, a.values.data() + (i + 1) * c);
    return v;
  };
  const std::vector<Mat> ls = mats(l, "L"), invs = mats(inv, "inv");
  const auto ds = rows(decay, "decay"), ids = rows(inv_decay, "inv_decay");
  const Method m = method.empty() ? method_of(default_method()) : parse_method(method);
  std::vector<GoldOutput> gd;
  std::vector<PathOutput> out(n);
  {
    py::gil_scoped_release nogil;
    ThreadPool pool(threads);
    gd = golds(s.samples, pool);
    pool.parallel_for(n, [&](size_t i) {
      out[i] = candidate::output(ls.empty() ? nullptr : &ls[i], invs.empty() ? nullptr : &invs[i],
                                 ds.empty() ? nullptr : &ds[i], ids.empty() ? nullptr : &ids[i], m, gd[i], false);
    });
  }
  return outputs_dict(out, gd, m, c);
}

py::dict chunked(const py::object& keys, const py::object& g, const py::object& beta, const py::object& cu, int chunk,
                 const std::string& tail) {
  Samples s = samples_of(keys, g, beta, cu, chunk, tail);
  const auto n = static_cast<py::ssize_t>(s.samples.size());
  std::vector<double> k, gg, b, where;
  for (size_t i = 0; i < s.samples.size(); ++i) {
    const Sample& x = s.samples[i];
    k.insert(k.end(), x.keys.begin(), x.keys.end());
    gg.insert(gg.end(), x.g.begin(), x.g.end());
    b.insert(b.end(), x.beta.begin(), x.beta.end());
    const TokenChunk& c = s.chunks[i];
    where.insert(where.end(), {double(c.row), double(c.first), double(c.head), double(c.valid)});
  }
  py::dict d;
  d["keys"] = array_of(k, {n, s.chunk, s.set.dim});
  const bool per_channel = !s.samples.empty() && s.samples[0].gating == Gating::kChannel;
  d["g"] = per_channel ? array_of(gg, {n, s.chunk, s.set.dim}) : array_of(gg, {n, s.chunk});
  d["beta"] = array_of(b, {n, s.chunk});
  d["chunks"] = array_of(where, {n, 4});
  return d;
}

py::dict aggregate_values(const Array& v, bool flag) {
  std::vector<double> x(v.data(), v.data() + v.size());
  const Stats s = aggregate(x, flag);
  py::dict d;
  // Held in a variable: items() of a temporary iterates a destroyed object
  // (it read as null: "type must be number, but is null").
  const nlohmann::json j = stats_to_json(s);
  for (const auto& [k, val] : j.items()) d[py::str(k)] = number_from_json(val);  // every statistic, or an error
  return d;
}

py::list path_list() {
  py::list l;
  for (const PathSpec* p : paths()) {
    py::dict d;
    d["name"] = std::string(p->name);
    d["device"] = p->device == Device::kGpu ? "gpu" : "cpu";
    d["reference"] = p->reference;
    d["arithmetic"] = p->arithmetic();
    d["unavailable"] = p->unavailable();
    l.append(d);
  }
  return l;
}

py::list method_list() {
  py::list l;
  for (const MethodSpec* m : methods()) {
    py::dict d;
    d["name"] = std::string(m->name);
    d["arithmetic"] = std::string(m->arithmetic);
    d["exact"] = m->exact;
    py::list diag;
    for (const MetricInfo& i : m->diagnostics) diag.append(std::string(i.name));
    d["diagnostics"] = diag;
    py::list params;
    for (const MethodParam& p : m->params) params.append(std::string(p.name));
    d["params"] = params;
    l.append(d);
  }
  return l;
}

std::string read_report_json(const std::string& path) { return report_to_json(read_report(path)).dump(); }

// chunkinv.run(): the request `chunkinv run` makes of its options, through
// the same prepare() and execute(); the report as the JSON text `run -o`
// writes (written there too when the request names an output), or with
// dry_run the plan `run --dry-run` prints. Python's values are checked as
// the command line checks its strings.
std::string run_request(api::RunRequest r) {
  if (r.threads < 0 || r.threads > 1024) throw UsageError(fmt::format("threads {}: must be a whole number from 0 to 1024", r.threads));
  std::string metrics;
  for (const std::string& m : r.metrics) metrics += (metrics.empty() ? "" : ",") + m;
  r.metrics = parse_metric_list(metrics, "metrics");
  r.worst = parse_worst(r.worst ? std::to_string(r.worst) : "", r.worst_by);
  api::Prepared p = api::prepare(std::move(r));
  if (p.request.dry_run) return api::plan_text(p);
  Report report;
  {
    py::gil_scoped_release unlocked;  // the run's threads need no Python
    report = api::execute(p);
    api::write(p, report);
  }
  return report_to_json(report).dump(1);
}

}  // namespace

PYBIND11_MODULE(_core, mod) {
  mod.doc() = "chunkinv's C++ library: the gold, the paths and methods, metrics and reports (docs/python.md)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UsageError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  mod.attr("version") = CHUNKINV_VERSION;
  mod.def("paths", &path_list);
  mod.def("methods", &method_list);
  mod.def("gold", &gold, py::arg("keys"), py::arg("g"), py::arg("beta"), py::arg("cu_seqlens") = py::none(),
          py::arg("chunk") = 0, py::arg("tail") = "pad", py::arg("threads") = 0);
  mod.def("inverse", &inverse, py::arg("keys"), py::arg("g"), py::arg("beta"), py::arg("path"), py::arg("method"),
          py::arg("cu_seqlens") = py::none(), py::arg("chunk") = 0, py::arg("tail") = "pad", py::arg("threads") = 0);
  mod.def("score", &score, py::arg("inv"), py::arg("L"), py::arg("keys"), py::arg("g"), py::arg("beta"),
          py::arg("decay"), py::arg("inv_decay"), py::arg("method"), py::arg("cu_seqlens") = py::none(),
          py::arg("chunk") = 0, py::arg("tail") = "pad", py::arg("threads") = 0);
  mod.def("chunked", &chunked, py::arg("keys"), py::arg("g"), py::arg("beta"), py::arg("cu_seqlens") = py::none(),
          py::arg("chunk") = 0, py::arg("tail") = "pad");
  mod.def("recurrence", &recurrence, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("g"), py::arg("beta"),
          py::arg("scale") = py::none(), py::arg("initial_state") = py::none(), py::arg("cu_seqlens") = py::none(),
          py::arg("threads") = 0);
  mod.def("recurrence_backward", &recurrence_backward, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("g"),
          py::arg("beta"), py::arg("do"), py::arg("dht") = py::none(), py::arg("scale") = py::none(),
          py::arg("initial_state") = py::none(), py::arg("cu_seqlens") = py::none(), py::arg("threads") = 0);
  mod.def("aggregate", &aggregate_values, py::arg("values"), py::arg("flag") = false);
  mod.def("read_report", &read_report_json, py::arg("path"));
  py::class_<api::RunRequest>(mod, "RunRequest", "chunkinv run's options, typed (src/api/run.hpp)")
      .def(py::init<>())
      .def_readwrite("configs", &api::RunRequest::configs)
      .def_readwrite("axes", &api::RunRequest::axes)
      .def_readwrite("inputs", &api::RunRequest::inputs)
      .def_readwrite("samples", &api::RunRequest::samples)
      .def_readwrite("seed", &api::RunRequest::seed)
      .def_readwrite("batch", &api::RunRequest::batch)
      .def_readwrite("threads", &api::RunRequest::threads)
      .def_readwrite("max_memory", &api::RunRequest::max_memory)
      .def_readwrite("checkpoint_every", &api::RunRequest::checkpoint_every)
      .def_readwrite("paths", &api::RunRequest::paths)
      .def_readwrite("metrics", &api::RunRequest::metrics)
      .def_readwrite("worst", &api::RunRequest::worst)
      .def_readwrite("worst_by", &api::RunRequest::worst_by)
      .def_readwrite("shard", &api::RunRequest::shard)
      .def_readwrite("until", &api::RunRequest::until)
      .def_readwrite("until_ci", &api::RunRequest::until_ci)
      .def_readwrite("quantiles", &api::RunRequest::quantiles)
      .def_readwrite("pipeline", &api::RunRequest::pipeline)
      .def_readwrite("devices", &api::RunRequest::devices)
      .def_readwrite("per_sample", &api::RunRequest::per_sample)
      .def_readwrite("output", &api::RunRequest::output)
      .def_readwrite("resume", &api::RunRequest::resume)
      .def_readwrite("dry_run", &api::RunRequest::dry_run)
      .def_readwrite("argv", &api::RunRequest::argv);
  mod.def("run", &run_request, py::arg("request"));
  mod.def("parse_size", [](const std::string& text) { return parse_size("max_memory", text); }, py::arg("text"));
}
