#include "downstream/tensors.hpp"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.hpp"
#include "inputs/tensor_set.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "io/zip.hpp"

namespace chunkinv {
namespace {

namespace fs = std::filesystem;

// The tensors `names` the container holds (load_tensor_set reads k, g and
// beta from the same three containers; these are the tensors beside them).
TensorMap read_named(const std::string& path, const std::vector<std::string>& names) {
  check_tensor_set_memory(path, names);  // a set too large ends at once, by its headers
  TensorMap out;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& n : names)
      if (const std::string f = (fs::path(path) / (n + ".npy")).string(); fs::exists(f, ec)) out[n] = read_npy(f);
    return out;
  }
  TensorMap all = path.ends_with(".npz") ? read_npz(path) : path.ends_with(".safetensors") ? read_safetensors(path) : TensorMap{};
  if (all.empty() && !path.ends_with(".npz") && !path.ends_with(".safetensors"))
    throw UsageError(path + ": not a directory of .npy files, an .npz or a .safetensors file");
  for (const auto& n : names)
    if (auto it = all.find(n); it != all.end()) out[n] = std::move(it->second);
  return out;
}

void check_tensor(const std::string& where, const Tensor& t, const std::vector<int64_t>& shape, bool finite = true) {
  if (!dtype_is_float(t.dtype))
    throw UsageError(fmt::format("{}: dtype {} is not a floating-point type", where, dtype_name(t.dtype)));
  if (t.shape != shape)
    throw UsageError(fmt::format("{}: shape {} is not {}", where, shape_string(t.shape), shape_string(shape)));
  for (size_t i = 0; finite && i < t.values.size(); ++i)
    if (!std::isfinite(t.values[i]))
      throw UsageError(fmt::format("{}: entry {} = {} is not finite", where, index_string(t.shape, i), t.values[i]));
}

// Before q and v are read: a set of chunks or of raw inputs is no sequence set.
void check_sequence_layout(const TensorSet& set, const std::string& path) {
  if (!set.token_layout) throw UsageError(fmt::format("inputs {}: seq reads fla's token layout (k [B, T, H, K]), not chunks", path));
  if (set.is_raw())
    throw UsageError(fmt::format("inputs {}: seq reads activated g and beta, not FlashKDA's raw inputs", path));
}

}  // namespace

std::vector<SequenceSpan> sequence_spans(const TensorSet& set) {
  std::vector<SequenceSpan> s;
  if (set.cu_seqlens.empty())
    for (int64_t b = 0; b < set.batch; ++b) s.push_back({b, 0, set.tokens});
  else
    for (size_t i = 0; i + 1 < set.cu_seqlens.size(); ++i)
      s.push_back({0, set.cu_seqlens[i], set.cu_seqlens[i + 1] - set.cu_seqlens[i]});
  return s;
}

bool SequenceSet::same_length() const {
  for (const Sequence& s : sequences)
    if (s.tokens != sequences.front().tokens) return false;
  return true;
}

SequenceSet load_sequences(const std::string& path) {
  const TensorSet set = load_tensor_set(path);
  check_sequence_layout(set, path);
  return sequences_of(set, read_named(path, {"q", "v", "initial_state", "do", "dht"}), path);
}

SequenceSet sequences_of(const TensorSet& set, const TensorMap& more, const std::string& path) {
  check_sequence_layout(set, path);
  const auto where = [&](const char* n) { return fmt::format("inputs {}[{}]", path, n); };
  const auto get = [&](const char* n) { return more.count(n) ? &more.at(n) : nullptr; };
  const int64_t B = set.batch, T = set.tokens, H = set.heads, K = set.dim;
  if (!more.count("q")) throw UsageError(fmt::format("inputs {}: q is missing (seq needs q, k, v, g, beta)", path));
  if (!more.count("v")) throw UsageError(fmt::format("inputs {}: v is missing (seq needs q, k, v, g, beta)", path));
  const Tensor& q = more.at("q");
  check_tensor(where("q"), q, {B, T, H, K});
  const Tensor& v = more.at("v");
  if (v.shape.size() != 4 || v.shape[0] != B || v.shape[1] != T || v.shape[2] != H)
    throw UsageError(fmt::format("{}: shape {} is not [{}, {}, {}, V]", where("v"), shape_string(v.shape), B, T, H));
  const int64_t V = v.shape[3];
  check_tensor(where("v"), v, {B, T, H, V});
  const std::vector<SequenceSpan> spans = sequence_spans(set);
  const int64_t N = static_cast<int64_t>(spans.size());
  for (int64_t n = 0; n < N; ++n)  // cu_seqlens may repeat an entry: a sequence of no token has no output to score
    if (spans[n].tokens == 0)
      throw UsageError(fmt::format("inputs {}[cu_seqlens]: sequence {} has no token (entries [{}] and [{}] are equal)",
                                   path, n, n, n + 1));
  const Tensor* h0 = get("initial_state");
  if (h0) check_tensor(where("initial_state"), *h0, {N, H, K, V});
  // The backward's upstream gradients, where the set gives them (else do is random, dht zero).
  const Tensor* d_o = get("do");
  if (d_o) check_tensor(where("do"), *d_o, {B, T, H, V});
  const Tensor* dht = get("dht");
  if (dht) check_tensor(where("dht"), *dht, {N, H, K, V});
  SequenceSet out;
  out.source = path;
  out.heads = static_cast<int>(H);
  out.packed = !set.cu_seqlens.empty();
  const int W = set.g_channels;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h) {
      const SequenceSpan& sp = spans[n];
      Sequence s;
      s.tokens = static_cast<int>(sp.tokens);
      s.key_dim = static_cast<int>(K);
      s.value_dim = static_cast<int>(V);
      s.gating = W == 1 ? Gating::kToken : Gating::kChannel;
      for (int64_t t = sp.first; t < sp.first + sp.tokens; ++t) {
        const size_t bth = static_cast<size_t>((sp.row * T + t) * H + h);
        s.q.insert(s.q.end(), q.values.begin() + bth * K, q.values.begin() + (bth + 1) * K);
        s.k.insert(s.k.end(), set.keys.begin() + bth * K, set.keys.begin() + (bth + 1) * K);
        s.v.insert(s.v.end(), v.values.begin() + bth * V, v.values.begin() + (bth + 1) * V);
        if (d_o) s.d_o.insert(s.d_o.end(), d_o->values.begin() + bth * V, d_o->values.begin() + (bth + 1) * V);
        s.g.insert(s.g.end(), set.g.begin() + bth * W, set.g.begin() + (bth + 1) * W);
        s.beta.push_back(set.beta[bth]);
      }
      if (h0) {
        const size_t at = static_cast<size_t>((n * H + h) * K * V);
        s.h0.assign(h0->values.begin() + at, h0->values.begin() + at + K * V);
      }
      if (dht) {
        const size_t at = static_cast<size_t>((n * H + h) * K * V);
        s.dht.assign(dht->values.begin() + at, dht->values.begin() + at + K * V);
      }
      out.sequences.push_back(std::move(s));
    }
  return out;
}

bool holds_sequences(const std::string& path) {
  // From the headers alone: reading a large set's data only to look for two
  // names would cost its whole size in memory and time.
  try {
    std::error_code ec;
    if (fs::is_directory(path, ec))
      return fs::exists(fs::path(path) / "q.npy", ec) && fs::exists(fs::path(path) / "v.npy", ec);
    const TensorMap t = path.ends_with(".npz")           ? read_npz_headers(path)
                        : path.ends_with(".safetensors") ? read_safetensors_header(path)
                                                         : TensorMap{};
    return t.count("q") && t.count("v");
  } catch (const UsageError&) {
    return false;  // not a tensor set at all: the chunk scoring names why
  }
}

CandidateOutputs load_candidate_outputs(const std::string& path, const SequenceSet& set) {
  TensorMap t = read_named(path, {"o", "ht", "final_state", "dq", "dk", "dv", "dg", "dbeta"});
  if (!t.count("ht") && t.count("final_state")) t["ht"] = std::move(t["final_state"]);
  if (!t.count("o")) throw UsageError(fmt::format("candidate {}: o is missing (o [B, T, H, V], optional ht)", path));
  const Sequence& first = set.sequences.front();
  const int64_t H = set.heads, N = static_cast<int64_t>(set.sequences.size()) / H, V = first.value_dim, K = first.key_dim;
  // o has the inputs' [B, T, H, V]: with cu_seqlens B = 1 and T the total.
  int64_t total = 0;
  for (int64_t n = 0; n < N; ++n) total += set.sequences[n * H].tokens;
  const std::vector<int64_t> o_shape = set.packed ? std::vector<int64_t>{1, total, H, V}
                                                   : std::vector<int64_t>{N, first.tokens, H, V};
  // A non-finite o is the kernel's failure, scored, not refused.
  check_tensor(fmt::format("candidate {}[o]", path), t["o"], o_shape, false);
  CandidateOutputs out;
  const Tensor& o = t["o"];
  int64_t at = 0;  // token offset of sequence n in the flattened [B * T] axis
  for (int64_t n = 0; n < N; ++n) {
    const int64_t T = set.sequences[n * H].tokens;
    for (int64_t h = 0; h < H; ++h) {
      Mat m(T, V);
      for (int64_t r = 0; r < T; ++r)
        for (int64_t e = 0; e < V; ++e) m(r, e) = o.values[static_cast<size_t>(((at + r) * H + h) * V + e)];
      out.o.push_back(std::move(m));
    }
    at += T;
  }
  // A kernel's gradients, in the inputs' layout: dq, dk [B, T, H, K], dv [B, T, H, V],
  // dg as g ([B, T, H] or [B, T, H, K]), dbeta [B, T, H]; all five or none.
  const int W = first.gate_width();
  const std::pair<const char*, int64_t> grads[] = {{"dq", K}, {"dk", K}, {"dv", V}, {"dg", W}, {"dbeta", 1}};
  int held = 0;
  for (const auto& [name, width] : grads) held += static_cast<int>(t.count(name));
  if (held != 0 && held != 5)
    throw UsageError(fmt::format("candidate {}: holds {} of the gradients dq, dk, dv, dg, dbeta; give all five or none",
                                 path, held));
  if (held == 5) {
    std::vector<Mat>* into[] = {&out.dq, &out.dk, &out.dv, &out.dg, &out.dbeta};
    for (size_t g = 0; g < 5; ++g) {
      const auto& [name, width] = grads[g];
      std::vector<int64_t> shape = o_shape;
      if (name == std::string("dbeta") || (name == std::string("dg") && W == 1)) shape.pop_back();
      else shape.back() = width;
      check_tensor(fmt::format("candidate {}[{}]", path, name), t[name], shape, false);
      const Tensor& x = t[name];
      int64_t first_token = 0;
      for (int64_t n = 0; n < N; ++n) {
        const int64_t T = set.sequences[n * H].tokens;
        for (int64_t h = 0; h < H; ++h) {
          Mat m(T, width);
          for (int64_t r = 0; r < T; ++r)
            for (int64_t e = 0; e < width; ++e)
              m(r, e) = x.values[static_cast<size_t>(((first_token + r) * H + h) * width + e)];
          into[g]->push_back(std::move(m));
        }
        first_token += T;
      }
    }
  }
  if (t.count("ht")) {
    const Tensor& ht = t["ht"];
    if (ht.shape != std::vector<int64_t>{N, H, K, V})
      throw UsageError(fmt::format("candidate {}[ht]: shape {} is not {}", path, shape_string(ht.shape),
                                   shape_string({N, H, K, V})));
    for (int64_t i = 0; i < N * H; ++i)
      out.ht.push_back(Eigen::Map<const Mat>(ht.values.data() + i * K * V, K, V));
  }
  return out;
}

}  // namespace chunkinv
