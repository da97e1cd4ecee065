#include "inputs/tensor_set.hpp"
#include "inputs/raw.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/limits.hpp"
#include "core/text.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "io/zip.hpp"

namespace chunkinv {
namespace fs = std::filesystem;

namespace {

std::string fmt_value(double v) { return fmt::format("{}", v); }

// Tensor `name` of a set, with the prefix its error messages carry.
struct Found {
  Tensor t;
  std::string where;
};
using FoundMap = std::map<std::string, Found>;

void check_float(const Found& f, bool bf16_bits_ok) {
  if (dtype_is_float(f.t.dtype)) return;
  if (bf16_bits_ok && (f.t.dtype == DType::kU16 || f.t.dtype == DType::kI16)) return;
  throw UsageError(fmt::format("{}: dtype {} is not a floating-point type (f16, bf16, f32, f64{})", f.where,
                               dtype_name(f.t.dtype), bf16_bits_ok ? ", or BF16 bit patterns as u16/i16" : ""));
}

const std::array<const char*, 3> kNames{"keys", "g", "beta"};
// FlashKDA's raw inputs, in place of g and beta (docs/inputs.md).
const std::array<const char*, 5> kRawNames{"g_raw", "beta_raw", "A_log", "dt_bias", "lower_bound"};

bool is_raw(const std::map<std::string, Found>& found) {
  for (const char* n : kRawNames)
    if (found.count(n)) return true;
  return false;
}

// A raw set needs keys and every raw tensor, and neither g nor beta.
void check_raw_names(const std::map<std::string, Found>& found, const std::string& path, const std::string& have) {
  for (const char* n : {"g", "beta"})
    if (found.count(n))
      throw UsageError(fmt::format("{}: holds both '{}' and FlashKDA's raw inputs (g_raw, beta_raw, ...): a set is "
                                   "activated or raw, not both",
                                   path, n));
  for (const char* n : kRawNames)
    if (!found.count(n))
      throw UsageError(fmt::format("{}: raw inputs need keys, g_raw, beta_raw, A_log, dt_bias and lower_bound; "
                                   "'{}' is missing (found: {})",
                                   path, n, have));
  if (!found.count("keys"))
    throw UsageError(fmt::format("{}: raw inputs need keys (found: {})", path, have));
}
const char* const kSeqlens = "cu_seqlens";

std::string names_of(const TensorMap& all) {
  std::vector<std::string> have;
  for (const auto& [k, v] : all) have.push_back(k);
  return have.empty() ? "none" : fmt::format("{}", fmt::join(have, ", "));
}

// The tensors of a set from one container's tensors (`k` stands in for a missing `keys`).
FoundMap from_container(TensorMap all, const std::string& path) {
  if (!all.count("keys") && all.count("k")) all["keys"] = std::move(all.extract("k").mapped());
  FoundMap found;
  bool raw = false;
  for (const char* n : kRawNames) raw = raw || all.count(n);
  if (raw) {
    const std::string have = names_of(all);
    for (const char* n : {"keys", "g", "beta", "g_raw", "beta_raw", "A_log", "dt_bias", "lower_bound", kSeqlens})
      if (auto it = all.find(n); it != all.end()) found[n] = {std::move(it->second), fmt::format("{}[{}]", path, n)};
    check_raw_names(found, path, have);
    return found;
  }
  for (const char* n : kNames) {
    auto it = all.find(n);
    if (it == all.end())
      throw UsageError(fmt::format("{}: tensor '{}' is missing (found: {})", path, n, names_of(all)));
    found[n] = {std::move(it->second), fmt::format("{}[{}]", path, n)};
  }
  if (auto it = all.find(kSeqlens); it != all.end()) found[kSeqlens] = {std::move(it->second), fmt::format("{}[{}]", path, kSeqlens)};
  return found;
}

std::string dims(const std::vector<int64_t>& s) { return shape_string(s); }

// cu_seqlens: integers 0 = c_0 <= c_1 <= ... <= c_S = T.
std::vector<int64_t> check_seqlens(const Found& f, int64_t tokens) {
  if (dtype_is_float(f.t.dtype))
    throw UsageError(fmt::format("{}: dtype {} is not an integer type (i32, i64, ...)", f.where, dtype_name(f.t.dtype)));
  if (f.t.shape.size() != 1 || f.t.shape[0] < 2)
    throw UsageError(fmt::format("{}: shape {} is not [S + 1] with S >= 1 sequences", f.where, dims(f.t.shape)));
  std::vector<int64_t> cu(f.t.values.size());
  for (size_t i = 0; i < cu.size(); ++i) {
    cu[i] = static_cast<int64_t>(f.t.values[i]);
    if (i == 0 && cu[0] != 0) throw UsageError(fmt::format("{}: entry [0] = {} is not 0", f.where, cu[0]));
    if (i > 0 && cu[i] < cu[i - 1])
      throw UsageError(fmt::format("{}: entry [{}] = {} is below entry [{}] = {}", f.where, i, cu[i], i - 1, cu[i - 1]));
  }
  if (cu.back() != tokens)
    throw UsageError(fmt::format("{}: last entry {} is not the token count T = {} of keys", f.where, cu.back(), tokens));
  return cu;
}

// Checks the tensors and makes the set.
TensorSet make_raw_set(FoundMap& found, const std::string& path);

TensorSet make_set(FoundMap& found, const std::string& path) {
  if (is_raw(found)) return make_raw_set(found, path);
  const Found& k = found["keys"];
  const Found& g = found["g"];
  const Found& b = found["beta"];
  check_float(k, true);
  check_float(g, false);
  check_float(b, false);
  const auto& ks = k.t.shape;
  TensorSet s;
  s.source = path;
  s.g_where = g.where;
  if (ks.size() == 3) {  // chunks [N, C, d]
    const int64_t n = ks[0], c = ks[1], d = ks[2];
    if (n < 1) throw UsageError(fmt::format("{}: shape {} holds no sample (N = 0)", k.where, dims(ks)));
    if (c < 2 || c > 64) throw UsageError(fmt::format("{}: shape {}: chunk C = {} is not in 2..64", k.where, dims(ks), c));
    if (found.count(kSeqlens))
      throw UsageError(fmt::format("{}: cu_seqlens goes with keys [B, T, H, K] (tokens), not [N, C, d] (chunks)",
                                   found[kSeqlens].where));
    s.batch = n, s.tokens = c, s.heads = 1, s.dim = static_cast<int>(std::min<int64_t>(d, 1 << 21));
    s.count = static_cast<uint64_t>(n), s.chunk = static_cast<int>(c);
  } else if (ks.size() == 4) {  // tokens [B, T, H, K]
    const int64_t bb = ks[0], t = ks[1], h = ks[2];
    if (bb < 1 || t < 1 || h < 1)
      throw UsageError(fmt::format("{}: shape {} holds no token ([B, T, H, K] with B, T, H >= 1)", k.where, dims(ks)));
    if (h > 1 << 20) throw UsageError(fmt::format("{}: shape {}: H = {} heads is beyond 2^20", k.where, dims(ks), h));
    s.token_layout = true;
    s.batch = bb, s.tokens = t, s.heads = static_cast<int>(h), s.dim = static_cast<int>(std::min<int64_t>(ks[3], 1 << 21));
    if (found.count(kSeqlens)) {
      if (bb != 1)
        throw UsageError(fmt::format("{}: with cu_seqlens the sequences are packed into one row: B = 1, keys have B = {}",
                                     found[kSeqlens].where, bb));
      s.cu_seqlens = check_seqlens(found[kSeqlens], t);
    }
  } else {
    throw UsageError(fmt::format("{}: shape {} is not [N, C, d] (chunks) nor [B, T, H, K] (tokens, as fla and FlashKDA keep them)",
                                 k.where, dims(ks)));
  }
  const int64_t d = ks.back();
  if (d < 1) throw UsageError(fmt::format("{}: shape {}: dim d = 0", k.where, dims(ks)));
  // As the dim axis of every configuration (and a raw set's keys): named here, with the file's tensor.
  if (d > 4096) throw UsageError(fmt::format("{}: shape {}: dim d = {} is not in 1..4096", k.where, dims(ks), d));
  // g and beta: the keys' shape without d; g may keep d (per-channel gates).
  const std::vector<int64_t> per_token(ks.begin(), ks.end() - 1);
  const std::string token_dims = s.token_layout ? "[B, T, H]" : "[N, C]";
  if (g.t.shape == ks) {
    s.g_channels = static_cast<int>(d);
  } else if (g.t.shape != per_token) {
    throw UsageError(fmt::format("{}: shape {} does not match keys: {} = {} or per channel {} expected", g.where,
                                 dims(g.t.shape), token_dims, dims(per_token), dims(ks)));
  }
  if (b.t.shape != per_token)
    throw UsageError(fmt::format("{}: shape {} does not match keys: {} = {} expected", b.where, dims(b.t.shape),
                                 token_dims, dims(per_token)));
  s.keys_dtype = k.t.dtype;
  s.keys.resize(k.t.values.size());
  for (size_t i = 0; i < s.keys.size(); ++i) {
    const double raw = k.t.values[i];
    double v;
    if (k.t.dtype == DType::kU16 || k.t.dtype == DType::kI16) {
      v = bf16_from_bits(static_cast<uint16_t>(static_cast<int64_t>(raw) & 0xFFFF));
    } else {
      v = bf16(raw);  // no-op for BF16; nearest even otherwise
    }
    if (!std::isfinite(raw) || !std::isfinite(v)) {
      throw UsageError(fmt::format("{}: entry {} = {} {}", k.where, index_string(ks, i),
                                   fmt_value(std::isfinite(raw) ? raw : v),
                                   std::isfinite(raw) ? "overflows BF16" : "is not finite"));
    }
    s.keys[i] = v;
  }
  // g <= 0: a log-decay. Both zeros are a decay of exactly 1 (a gate whose
  // activation underflowed, as 81 tokens of Qwen3.5-0.8B have); a positive
  // g would be a growth, which no path models.
  s.g = g.t.values;
  for (size_t i = 0; i < s.g.size(); ++i) {
    const double v = s.g[i];
    if (!std::isfinite(v))
      throw UsageError(fmt::format("{}: entry {} = {} is not finite", g.where, index_string(g.t.shape, i), fmt_value(v)));
    if (v > 0.0)
      throw UsageError(fmt::format("{}: entry {} = {} is not <= 0", g.where, index_string(g.t.shape, i), fmt_value(v)));
  }
  if (s.g_channels > 1) {
    for (size_t i = 0; i < s.g.size() && s.g_channels_equal; ++i)
      s.g_channels_equal = s.g[i] == s.g[i - i % s.g_channels];
  }
  s.beta = b.t.values;
  for (size_t i = 0; i < s.beta.size(); ++i) {
    const double v = s.beta[i];
    if (!std::isfinite(v))
      throw UsageError(fmt::format("{}: entry {} = {} is not finite", b.where, index_string(b.t.shape, i), fmt_value(v)));
    if (!(v > 0.0 && v < 1.0))
      throw UsageError(fmt::format("{}: entry {} = {} is not in (0, 1)", b.where, index_string(b.t.shape, i), fmt_value(v)));
  }
  return s;
}

// BF16 bits of entry i of a tensor of BF16 values (or of BF16 bit patterns
// as u16/i16); other values are rounded to BF16, nearest even.
uint16_t bf16_entry(const Found& f, size_t i) {
  const double raw = f.t.values[i];
  double v = f.t.dtype == DType::kU16 || f.t.dtype == DType::kI16
                 ? bf16_from_bits(static_cast<uint16_t>(static_cast<int64_t>(raw) & 0xFFFF))
                 : bf16(raw);
  if (!std::isfinite(raw) || !std::isfinite(v))
    throw UsageError(fmt::format("{}: entry {} = {} {}", f.where, index_string(f.t.shape, i),
                                 fmt_value(std::isfinite(raw) ? raw : v),
                                 std::isfinite(raw) ? "overflows BF16" : "is not finite"));
  return bf16_bits(v);
}

// Entry `n` of a per-head FP32 tensor that is a scalar ([] or [1]) or [N].
float per_sample(const Found& f, int64_t n, int64_t count) {
  const auto& sh = f.t.shape;
  const bool scalar = sh.empty() || (sh.size() == 1 && sh[0] == 1);
  if (!scalar && !(sh.size() == 1 && sh[0] == count))
    throw UsageError(fmt::format("{}: shape {} is neither a scalar nor [N] = [{}]", f.where, dims(sh), count));
  const double v = f.t.values[scalar ? 0 : static_cast<size_t>(n)];
  if (!std::isfinite(v) || !std::isfinite(static_cast<float>(v)))
    throw UsageError(fmt::format("{}: entry {} = {} is not a finite FP32 value", f.where, scalar ? 0 : n, fmt_value(v)));
  return static_cast<float>(v);
}

// FlashKDA's raw inputs in the tokens layout: keys and g_raw [B, T, H, d],
// beta_raw [B, T, H], A_log [H], dt_bias [H, d] or [H*d], lower_bound a
// scalar. Each chunk becomes a RawInputs when its sample is taken (chunk_sample).
TensorSet make_raw_token_set(FoundMap& found, const std::string& path) {
  const Found& k = found["keys"];
  const Found& g = found["g_raw"];
  const Found& b = found["beta_raw"];
  const Found& dt = found["dt_bias"];
  const Found& al = found["A_log"];
  const Found& lb = found["lower_bound"];
  const auto& ks = k.t.shape;
  const int64_t bb = ks[0], t = ks[1], h = ks[2], d = ks[3];
  if (bb < 1 || t < 1 || h < 1)
    throw UsageError(fmt::format("{}: shape {} holds no token ([B, T, H, K] with B, T, H >= 1)", k.where, dims(ks)));
  if (h > 1 << 20) throw UsageError(fmt::format("{}: shape {}: H = {} heads is beyond 2^20", k.where, dims(ks), h));
  if (d < 1 || d > 4096) throw UsageError(fmt::format("{}: shape {}: dim K = {} is not in 1..4096", k.where, dims(ks), d));
  if (g.t.shape != ks)
    throw UsageError(fmt::format("{}: shape {} is not keys' {} (FlashKDA's gates are per token and channel)", g.where,
                                 dims(g.t.shape), dims(ks)));
  const std::vector<int64_t> per_token{bb, t, h};
  if (b.t.shape != per_token)
    throw UsageError(fmt::format("{}: shape {} is not [B, T, H] = {} of keys {}", b.where, dims(b.t.shape),
                                 dims(per_token), dims(ks)));
  if (al.t.shape != std::vector<int64_t>{h})
    throw UsageError(fmt::format("{}: shape {} is not [H] = [{}] (one per head, as FlashKDA's A_log) of keys {}",
                                 al.where, dims(al.t.shape), h, dims(ks)));
  if (dt.t.shape != std::vector<int64_t>{h, d} && dt.t.shape != std::vector<int64_t>{h * d})
    throw UsageError(fmt::format("{}: shape {} is neither [H, K] = [{}, {}] nor [H*K] = [{}] of keys {}", dt.where,
                                 dims(dt.t.shape), h, d, h * d, dims(ks)));
  if (!(lb.t.shape.empty() || lb.t.shape == std::vector<int64_t>{1}))
    throw UsageError(fmt::format("{}: shape {} is not a scalar: the tokens layout takes one lower_bound for every head "
                                 "(FlashKDA's float), keys {}",
                                 lb.where, dims(lb.t.shape), dims(ks)));
  TensorSet s;
  s.source = path;
  s.token_layout = true;
  s.batch = bb, s.tokens = t, s.heads = static_cast<int>(h), s.dim = static_cast<int>(d);
  if (found.count(kSeqlens)) {
    if (bb != 1)
      throw UsageError(fmt::format("{}: with cu_seqlens the sequences are packed into one row: B = 1, keys have B = {}",
                                   found[kSeqlens].where, bb));
    s.cu_seqlens = check_seqlens(found[kSeqlens], t);
  }
  s.keys_dtype = k.t.dtype;
  s.g_channels = static_cast<int>(d);
  s.g_channels_equal = false;
  s.g_where = g.where;
  auto r = std::make_shared<TensorSet::RawTokens>();
  r->keys.resize(k.t.values.size());
  r->g.resize(g.t.values.size());
  for (size_t e = 0; e < r->keys.size(); ++e) {
    r->keys[e] = bf16_entry(k, e);
    r->g[e] = bf16_entry(g, e);
  }
  r->beta.resize(b.t.values.size());
  for (size_t e = 0; e < r->beta.size(); ++e) r->beta[e] = bf16_entry(b, e);
  r->lower_bound = per_sample(lb, 0, 1);
  r->a_log.resize(static_cast<size_t>(h));
  r->dt_bias.resize(static_cast<size_t>(h * d));
  for (int64_t head = 0; head < h; ++head) {
    RawInputs p;  // the head's parameters, checked as a chunk's are
    p.dim = static_cast<int>(d);
    p.a_log = r->a_log[size_t(head)] = per_sample(al, head, h);
    p.lower_bound = r->lower_bound;
    for (int64_t j = 0; j < d; ++j) {
      const size_t at = static_cast<size_t>(head * d + j);
      const double v = dt.t.values[at];
      if (!std::isfinite(v) || !std::isfinite(static_cast<float>(v)))
        throw UsageError(fmt::format("{}: entry {} = {} is not a finite FP32 value", dt.where,
                                     index_string(dt.t.shape, at), fmt_value(v)));
      p.dt_bias.push_back(r->dt_bias[at] = static_cast<float>(v));
    }
    validate_raw(p, fmt::format("{} head {}", path, head));
  }
  s.raw_tokens = std::move(r);
  return s;
}

TensorSet make_raw_set(FoundMap& found, const std::string& path) {
  const Found& k = found["keys"];
  const Found& g = found["g_raw"];
  const Found& b = found["beta_raw"];
  const Found& dt = found["dt_bias"];
  for (const Found* f : {&k, &g, &b}) check_float(*f, true);
  for (const char* name : {"dt_bias", "A_log", "lower_bound"}) check_float(found[name], false);
  const auto& ks = k.t.shape;
  if (ks.size() == 4) return make_raw_token_set(found, path);
  if (ks.size() != 3)
    throw UsageError(fmt::format("{}: shape {} is not [N, C, d] (chunks) nor [B, T, H, K] (tokens, as FlashKDA keeps "
                                 "them)",
                                 k.where, dims(ks)));
  if (found.count(kSeqlens))
    throw UsageError(fmt::format("{}: cu_seqlens goes with keys [B, T, H, K] (tokens), not [N, C, d] (chunks)",
                                 found[kSeqlens].where));
  const int64_t n = ks[0], c = ks[1], d = ks[2];
  if (n < 1) throw UsageError(fmt::format("{}: shape {} holds no sample (N = 0)", k.where, dims(ks)));
  if (c < 2 || c > 64) throw UsageError(fmt::format("{}: shape {}: chunk C = {} is not in 2..64", k.where, dims(ks), c));
  if (d < 1 || d > 4096) throw UsageError(fmt::format("{}: shape {}: dim d = {} is not in 1..4096", k.where, dims(ks), d));
  if (g.t.shape != ks)
    throw UsageError(fmt::format("{}: shape {} is not keys' {} (FlashKDA's gates are per token and channel)", g.where,
                                 dims(g.t.shape), dims(ks)));
  if (b.t.shape != std::vector<int64_t>{n, c})
    throw UsageError(fmt::format("{}: shape {} is not [N, C] = [{}, {}]", b.where, dims(b.t.shape), n, c));
  const bool dt_shared = dt.t.shape == std::vector<int64_t>{d};
  if (!dt_shared && dt.t.shape != std::vector<int64_t>{n, d})
    throw UsageError(fmt::format("{}: shape {} is neither [d] = [{}] nor [N, d] = [{}, {}]", dt.where,
                                 dims(dt.t.shape), d, n, d));
  TensorSet s;
  s.source = path;
  s.batch = n, s.tokens = c, s.heads = 1, s.dim = static_cast<int>(d);
  s.count = static_cast<uint64_t>(n), s.chunk = static_cast<int>(c);
  s.keys_dtype = k.t.dtype;
  s.g_channels = static_cast<int>(d);
  s.g_channels_equal = false;
  s.g_where = g.where;
  const size_t cd = static_cast<size_t>(c * d);
  for (int64_t i = 0; i < n; ++i) {
    auto r = std::make_shared<RawInputs>();
    r->chunk = static_cast<int>(c);
    r->dim = static_cast<int>(d);
    r->keys.resize(cd);
    r->g.resize(cd);
    for (size_t e = 0; e < cd; ++e) {
      r->keys[e] = bf16_entry(k, static_cast<size_t>(i) * cd + e);
      r->g[e] = bf16_entry(g, static_cast<size_t>(i) * cd + e);
    }
    r->beta.resize(static_cast<size_t>(c));
    for (int64_t t = 0; t < c; ++t) r->beta[size_t(t)] = bf16_entry(b, static_cast<size_t>(i * c + t));
    r->dt_bias.resize(static_cast<size_t>(d));
    for (int64_t j = 0; j < d; ++j) {
      const double v = dt.t.values[static_cast<size_t>(dt_shared ? j : i * d + j)];
      if (!std::isfinite(v) || !std::isfinite(static_cast<float>(v)))
        throw UsageError(fmt::format("{}: entry {} = {} is not a finite FP32 value", dt.where,
                                     dt_shared ? j : i * d + j, fmt_value(v)));
      r->dt_bias[size_t(j)] = static_cast<float>(v);
    }
    r->a_log = per_sample(found["A_log"], i, n);
    r->lower_bound = per_sample(found["lower_bound"], i, n);
    validate_raw(*r, fmt::format("{} chunk {}", path, i));
    s.raw.push_back(std::move(r));
  }
  return s;
}

// Reads the tensors `names` of a set at `path` (a directory of .npy, an .npz
// or a .safetensors): those present, each with the prefix of its messages.
FoundMap read_container(const std::string& path, const std::vector<std::string>& names, TensorMap* all_out) {
  std::error_code ec;
  FoundMap found;
  if (fs::is_directory(path, ec)) {
    for (const std::string& n : names) {
      const std::string f = (fs::path(path) / (n + ".npy")).string();
      if (fs::exists(f, ec) || fs::is_symlink(f, ec)) found[n] = {read_npy(f), f};
    }
    if (all_out)
      for (const auto& e : fs::directory_iterator(path, ec))
        if (e.path().extension() == ".npy") (*all_out)[e.path().stem().string()] = {};
    return found;
  }
  if (!fs::exists(path, ec)) throw UsageError(path + ": no such file or directory");
  TensorMap all;
  if (path.ends_with(".npz")) all = read_npz(path);
  else if (path.ends_with(".safetensors")) all = read_safetensors(path);
  else throw UsageError(path + ": not a directory of .npy files, an .npz or a .safetensors file");
  for (const std::string& n : names)
    if (auto it = all.find(n); it != all.end()) found[n] = {std::move(it->second), fmt::format("{}[{}]", path, n)};
  if (all_out)
    for (auto& [k, v] : all) (*all_out)[k] = {};
  return found;
}

}  // namespace

// What reading the set at `path` holds in memory at once, from the headers
// alone (no data is read): the bytes of its largest file (a file is read
// whole), for an .npz its largest member as well (extracted whole), and
// 16 bytes per value: each is decoded to a double, then copied into the set
// (or, for a candidate, its matrices). Refused, naming the file and the
// limit, when that is more than this process may use (core/limits), so that
// a set too large ends at once, not after minutes of reading.
void check_tensor_set_memory(const std::string& path, const std::vector<std::string>& names) {
  std::error_code ec;
  uint64_t file = 0, member = 0, values = 0;
  const auto add = [&](const Tensor& t) {
    values += t.numel();
    member = std::max(member, *bytes_needed(t.shape, t.dtype));
  };
  if (fs::is_directory(path, ec)) {
    for (const std::string& n : names) {
      const std::string f = (fs::path(path) / (n + ".npy")).string();
      if (!fs::exists(f, ec) && !fs::is_symlink(f, ec)) continue;
      uint64_t size = 0;
      (void)read_file_prefix(f, 0, &size);  // the file's checks and size
      file = std::max(file, size);
      add(read_npy_header(f));
    }
    member = 0;  // a .npy file is read as it is
  } else {
    if (!fs::exists(path, ec)) return;  // named by the reader
    uint64_t size = 0;
    if (path.ends_with(".npz") || path.ends_with(".safetensors")) (void)read_file_prefix(path, 0, &size);
    file = size;
    if (path.ends_with(".npz")) {
      for (const auto& [k, t] : read_npz_headers(path)) add(t);
    } else if (path.ends_with(".safetensors")) {
      for (const auto& [k, t] : read_safetensors_header(path)) add(t);
      member = 0;
    } else {
      return;  // named by the reader
    }
  }
  const auto mul = [](uint64_t a, uint64_t b) { return a > UINT64_MAX / b ? UINT64_MAX : a * b; };
  const auto sum = [](uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; };
  const uint64_t need = sum(sum(file, member), mul(values, 16));
  const MemoryBudget budget = memory_budget(1);
  const uint64_t usable = budget.bytes / 10 * 9;  // as a run keeps a tenth back
  if (need <= usable) return;
  throw UsageError(fmt::format("{}: reading it needs about {} ({} values at 16 bytes each, and {} of file{}), more "
                               "than the {} this process may use ({}); give a smaller set, e.g. fewer chunks or "
                               "sequences",
                               path, format_bytes(double(need)), values, format_bytes(double(file)),
                               member ? fmt::format(" and {} of its largest member", format_bytes(double(member))) : "",
                               format_bytes(double(budget.bytes)), budget.source));
}

TensorSet load_tensor_set(const std::string& path) {
  try {
    // The path is an axis of every report entry made from the set: text.
    if (!is_plain_text(path))
      throw UsageError(fmt::format("{}: the file name is not UTF-8 text (or holds a control character), which a report's "
                                   "axes must be; rename it",
                                   printable(path)));
    check_tensor_set_memory(path, {"keys", "k", "g", "beta", kSeqlens, "g_raw", "beta_raw", "A_log", "dt_bias", "lower_bound"});
    std::error_code ec;
    FoundMap found;
    if (fs::is_directory(path, ec)) {
      TensorMap listed;
      found = read_container(path, {"keys", "k", "g", "beta", kSeqlens, "g_raw", "beta_raw", "A_log", "dt_bias",
                                     "lower_bound"},
                             &listed);
      if (!found.count("keys") && found.count("k")) found["keys"] = std::move(found.extract("k").mapped());
      if (is_raw(found)) check_raw_names(found, path, names_of(listed));
      for (const char* n : kNames) {
        if (is_raw(found)) break;
        if (found.count(n)) continue;
        std::vector<std::string> have;
        for (const auto& [k, v] : listed) have.push_back(k + ".npy");
        throw UsageError(fmt::format("{}: {}.npy is missing (found: {})", path, n,
                                     have.empty() ? "no .npy files" : fmt::format("{}", fmt::join(have, ", "))));
      }
    } else {
      if (!fs::exists(path, ec)) throw UsageError(path + ": no such file or directory");
      if (path.ends_with(".npz")) {
        found = from_container(read_npz(path), path);
      } else if (path.ends_with(".safetensors")) {
        found = from_container(read_safetensors(path), path);
      } else {
        throw UsageError(path + ": not a directory of .npy files, an .npz or a .safetensors file");
      }
    }
    return make_set(found, path);
  } catch (const UsageError& e) {
    throw UsageError(std::string("inputs ") + e.what());
  }
}

TensorSet parse_tensor_set(std::string_view bytes, const std::string& name) {
  try {
    FoundMap found;
    if (name.ends_with(".npz")) {
      found = from_container(parse_npz(bytes, name), name);
    } else if (name.ends_with(".safetensors")) {
      found = from_container(parse_safetensors(bytes, name), name);
    } else {
      throw UsageError(name + ": not an .npz or a .safetensors file");
    }
    return make_set(found, name);
  } catch (const UsageError& e) {
    throw UsageError(std::string("inputs ") + e.what());
  }
}

TensorSet make_tensor_set(TensorMap tensors, const std::string& name) {
  try {
    FoundMap found = from_container(std::move(tensors), name);
    return make_set(found, name);
  } catch (const UsageError& e) {
    throw UsageError(std::string("inputs ") + e.what());
  }
}

Sample TensorSet::sample(uint64_t index) const {
  if (token_layout)
    throw UsageError(fmt::format("inputs {}: keys [B, T, H, K] are cut into chunks at a chunk size first", source));
  if (index >= count)
    throw UsageError(fmt::format("inputs {}: sample {} asked for, the file holds {} (0..{})", source, index, count, count - 1));
  return chunk_sample(*this, {static_cast<int64_t>(index), 0, 0, chunk}, chunk);
}

Tail parse_tail(const std::string& name) {
  if (name == "pad") return Tail::kPad;
  if (name == "drop") return Tail::kDrop;
  throw UsageError(fmt::format("axis tail = {} is not pad or drop", name));
}

std::vector<TokenChunk> chunk_tokens(const TensorSet& s, int chunk, Tail tail) {
  std::vector<TokenChunk> out;
  if (!s.token_layout) {
    if (chunk != s.chunk)
      throw UsageError(fmt::format("inputs {} hold chunks of C = {}, not {}", s.source, s.chunk, chunk));
    for (uint64_t i = 0; i < s.count; ++i) out.push_back({static_cast<int64_t>(i), 0, 0, chunk});
    return out;
  }
  if (chunk < 1) throw UsageError(fmt::format("chunk = {} must be at least 1", chunk));
  auto cut = [&](int64_t row, int64_t bos, int64_t eos) {
    for (int64_t start = bos; start < eos; start += chunk) {
      const int valid = static_cast<int>(std::min<int64_t>(chunk, eos - start));
      if (valid < chunk && tail == Tail::kDrop) continue;
      for (int h = 0; h < s.heads; ++h) out.push_back({row, start, h, valid});
    }
  };
  if (!s.cu_seqlens.empty()) {
    for (size_t q = 0; q + 1 < s.cu_seqlens.size(); ++q) cut(0, s.cu_seqlens[q], s.cu_seqlens[q + 1]);
  } else {
    for (int64_t row = 0; row < s.batch; ++row) cut(row, 0, s.tokens);
  }
  return out;
}

Sample chunk_sample(const TensorSet& s, const TokenChunk& c, int chunk) {
  if (!s.raw.empty()) return activate_kernel_model(s.raw[static_cast<size_t>(c.row)]);
  if (s.raw_tokens) {  // the chunk's raw inputs, padded as below (RawInputs::padding), then activated
    const TensorSet::RawTokens& t = *s.raw_tokens;
    const size_t d = static_cast<size_t>(s.dim);
    auto r = std::make_shared<RawInputs>();
    r->chunk = chunk;
    r->dim = s.dim;
    r->keys.assign(static_cast<size_t>(chunk) * d, 0);
    r->g.assign(static_cast<size_t>(chunk) * d, 0);
    r->beta.assign(static_cast<size_t>(chunk), 0);
    for (int row = 0; row < c.valid; ++row) {
      const size_t at = s.token_index(c.row, c.first + row, c.head);
      std::copy_n(t.keys.begin() + at * d, d, r->keys.begin() + row * d);
      std::copy_n(t.g.begin() + at * d, d, r->g.begin() + row * d);
      r->beta[size_t(row)] = t.beta[at];
    }
    r->a_log = t.a_log[size_t(c.head)];
    r->dt_bias.assign(t.dt_bias.begin() + c.head * d, t.dt_bias.begin() + (c.head + 1) * d);
    r->lower_bound = t.lower_bound;
    r->padding = chunk - c.valid;
    return activate_kernel_model(std::move(r));
  }
  Sample out;
  out.chunk = chunk;
  out.dim = s.dim;
  // Per-channel gates whose channels all agree are per-token gates written per channel.
  out.gating = s.g_channels == 1 || s.g_channels_equal ? Gating::kToken : Gating::kChannel;
  const int w = out.gate_width();
  out.keys.assign(static_cast<size_t>(chunk) * s.dim, 0.0);
  out.g.assign(static_cast<size_t>(chunk) * w, 0.0);  // padding: a decay of 1, zero keys, beta 0
  out.beta.assign(chunk, 0.0);
  for (int r = 0; r < c.valid; ++r) {
    const size_t t = s.token_index(c.row, c.first + r, c.head);
    std::copy_n(s.keys.begin() + t * s.dim, s.dim, out.keys.begin() + static_cast<size_t>(r) * s.dim);
    std::copy_n(s.g.begin() + t * s.g_channels, w, out.g.begin() + static_cast<size_t>(r) * w);
    out.beta[r] = s.beta[t];
  }
  return out;
}

// --- candidate -------------------------------------------------------------------

CandidateSet load_candidate(const std::string& path, const TensorSet& in, std::span<const TokenChunk> chunks, int chunk) {
  try {
    check_tensor_set_memory(path, {"L", "INV", "decay", "inv_decay"});
    TensorMap listed;
    FoundMap found = read_container(path, {"L", "INV", "decay", "inv_decay"}, &listed);
    if (!found.count("L") && !found.count("INV"))
      throw UsageError(fmt::format("{}: holds neither L nor INV (found: {})", path, names_of(listed)));
    std::vector<TokenChunk> own;
    if (chunks.empty()) {  // no inputs set given: [N, C, C] in sample order, N from the file
      const Found& f = found.count("L") ? found["L"] : found["INV"];
      if (f.t.shape.size() == 3)
        for (int64_t i = 0; i < f.t.shape[0]; ++i) own.push_back({i, 0, 0, chunk});
      chunks = own;
    }
    CandidateSet c;
    c.source = path;
    c.count = chunks.size();
    c.chunk = chunk;
    const auto n = static_cast<int64_t>(chunks.size());
    const std::vector<int64_t> tok{in.batch, in.tokens, in.heads};
    auto per_token = [&](const Found& f, std::vector<int64_t> tail_dims) {
      if (!in.token_layout) return false;
      std::vector<int64_t> want = tok;
      want.insert(want.end(), tail_dims.begin(), tail_dims.end());
      return f.t.shape == want;
    };
    for (const char* name : {"L", "INV"}) {
      auto it = found.find(name);
      if (it == found.end()) continue;
      const Found& f = it->second;
      if (!dtype_is_float(f.t.dtype))
        throw UsageError(fmt::format("{}: dtype {} is not a floating-point type (bf16, f16, f32, f64)", f.where, dtype_name(f.t.dtype)));
      const bool tokens = per_token(f, {chunk});
      if (!tokens && f.t.shape != std::vector<int64_t>{n, chunk, chunk})
        throw UsageError(fmt::format("{}: shape {} is not [N, C, C] = ({}, {}, {}){}", f.where, dims(f.t.shape), n, chunk,
                                     chunk, in.token_layout ? fmt::format(" nor [B, T, H, C] = {}", dims({in.batch, in.tokens, in.heads, chunk})) : ""));
      const bool inv = std::string(name) == "INV";
      auto& out = inv ? c.INV : c.L;
      out.resize(chunks.size());
      const size_t cc = static_cast<size_t>(chunk);
      for (size_t i = 0; i < chunks.size(); ++i) {
        std::vector<double> m(cc * cc, 0.0);  // padding rows: L 0, INV the identity's
        if (inv)
          for (size_t r = 0; r < cc; ++r) m[r * cc + r] = 1.0;
        const int rows = tokens ? chunks[i].valid : chunk;
        for (int r = 0; r < rows; ++r) {
          const size_t at = tokens ? in.token_index(chunks[i].row, chunks[i].first + r, chunks[i].head) * cc
                                   : (i * cc + r) * cc;
          std::copy_n(f.t.values.begin() + at, cc, m.begin() + r * cc);
        }
        out[i] = std::move(m);
      }
    }
    for (const char* name : {"decay", "inv_decay"}) {
      auto it = found.find(name);
      if (it == found.end()) continue;
      const Found& f = it->second;
      if (!dtype_is_float(f.t.dtype))
        throw UsageError(fmt::format("{}: dtype {} is not a floating-point type", f.where, dtype_name(f.t.dtype)));
      const bool tokens = per_token(f, {});
      if (!tokens && f.t.shape != std::vector<int64_t>{n, chunk})
        throw UsageError(fmt::format("{}: shape {} is not [N, C] = ({}, {}){}", f.where, dims(f.t.shape), n, chunk,
                                     in.token_layout ? fmt::format(" nor [B, T, H] = {}", dims(tok)) : ""));
      auto& out = std::string(name) == "decay" ? c.decay : c.inv_decay;
      out.resize(chunks.size());
      for (size_t i = 0; i < chunks.size(); ++i) {
        std::vector<double> v(chunk);
        for (int r = 0; r < chunk; ++r) {
          // Padding rows of the token layout: g = 0 there, so the decay of the last token.
          const int src = tokens ? std::min(r, chunks[i].valid - 1) : r;
          v[r] = tokens ? f.t.values[in.token_index(chunks[i].row, chunks[i].first + src, chunks[i].head)]
                        : f.t.values[i * chunk + r];
        }
        out[i] = std::move(v);
      }
    }
    return c;
  } catch (const UsageError& e) {
    throw UsageError(std::string("candidate ") + e.what());
  }
}

namespace {

// The tensors of a set of samples (all of one chunk and dim), named as a reader finds them.
TensorMap set_tensors(const std::string& path, std::span<const Sample> samples, DType keys_dtype, DType value_dtype,
                      const TensorMap& extra) {
  if (samples.empty()) throw UsageError(path + ": no samples to write");
  const int c = samples[0].chunk, d = samples[0].dim;
  const auto n = static_cast<int64_t>(samples.size());
  TensorMap m;
  m["keys"] = {keys_dtype, {n, c, d}, {}};
  const Gating gating = samples[0].gating;
  m["g"] = {value_dtype, gating == Gating::kToken ? std::vector<int64_t>{n, c} : std::vector<int64_t>{n, c, d}, {}};
  m["beta"] = {value_dtype, {n, c}, {}};
  for (const Sample& s : samples) {
    if (s.chunk != c || s.dim != d || s.gating != gating)
      throw UsageError(fmt::format("{}: samples of different shapes (C={}, d={}{} and C={}, d={}{})", path, c, d,
                                   gating == Gating::kToken ? "" : ", per-channel gates", s.chunk, s.dim,
                                   s.gating == Gating::kToken ? "" : ", per-channel gates"));
    auto& kv = m["keys"].values;
    if (keys_dtype == DType::kU16 || keys_dtype == DType::kI16) {  // BF16 bit patterns
      for (double x : s.keys) {
        const uint16_t bits = bf16_bits(bf16(x));
        kv.push_back(keys_dtype == DType::kU16 ? bits : static_cast<int16_t>(bits));
      }
    } else {
      kv.insert(kv.end(), s.keys.begin(), s.keys.end());
    }
    m["g"].values.insert(m["g"].values.end(), s.g.begin(), s.g.end());
    m["beta"].values.insert(m["beta"].values.end(), s.beta.begin(), s.beta.end());
  }
  for (const auto& [name, t] : extra) {
    if (m.count(name)) throw UsageError(fmt::format("{}: tensor '{}' is written twice", path, name));
    m[name] = t;
  }
  return m;
}

}  // namespace

std::string tensor_set_bytes(const std::string& path, std::span<const Sample> samples, DType keys_dtype,
                             DType value_dtype, const TensorMap& extra) {
  const TensorMap m = set_tensors(path, samples, keys_dtype, value_dtype, extra);
  if (path.ends_with(".npz")) return npz_bytes(m, path);
  if (path.ends_with(".safetensors")) return safetensors_bytes(m);
  throw UsageError(fmt::format("{}: a tensor set in one file ends in .npz or .safetensors", path));
}

void write_tensor_set(const std::string& path, std::span<const Sample> samples, DType keys_dtype, DType value_dtype,
                      const TensorMap& extra) {
  if (path.ends_with(".npz") || path.ends_with(".safetensors")) {
    write_file(path, tensor_set_bytes(path, samples, keys_dtype, value_dtype, extra));
  } else {
    const TensorMap m = set_tensors(path, samples, keys_dtype, value_dtype, extra);
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw UsageError(fmt::format("{}: cannot create directory ({})", path, ec.message()));
    for (const auto& [name, t] : m) write_npy((fs::path(path) / (name + ".npy")).string(), t);
  }
}

}  // namespace chunkinv
