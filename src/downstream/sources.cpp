// The sequence sources. A chunk family extends to a sequence by drawing its
// sample at T tokens instead of C: the same law token by token (keys row t,
// gate t, beta t of sequence i are the family's draws at that position), so
// a sequence does not depend on the chunk size it is later cut into, and
// C = 16 and C = 64 see the same tokens. Queries and values come from
// streams of their own.
#include "downstream/sources.hpp"

#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "core/detmath.hpp"
#include "core/error.hpp"
#include "core/fp.hpp"
#include "core/rng.hpp"
#include "downstream/storage.hpp"
#include "inputs/data_families.hpp"
#include "inputs/raw.hpp"

namespace chunkinv {
namespace {

// Streams of a sequence beside its family's (search and CMA-ES use kUser + 1, + 2).
Stream user_stream(uint32_t n) { return static_cast<Stream>(static_cast<uint32_t>(Stream::kUser) + n); }
const Stream kValues = user_stream(8), kInitialState = user_stream(9), kForgets = user_stream(10);
// Query t is key row kQueryRow + t of the sequence's key stream: a unit
// BF16 row drawn as every key is, at rows no key reaches (T <= 65,536).
constexpr int kQueryRow = 1 << 20;

std::vector<double> bf16_normals(uint64_t seed, uint64_t index, Stream stream, size_t n) {
  const Rng rng(seed, index, stream);
  std::vector<double> out(n);
  for (size_t i = 0; i + 1 < n; i += 2) {
    const auto [a, b] = rng.normal_pair(i >> 1);
    out[i] = bf16(a), out[i + 1] = bf16(b);
  }
  if (n % 2) out[n - 1] = bf16(rng.normal(n - 1));
  return out;
}

// Sequence i: the family's sample at T tokens, then q, v and h0.
Sequence from_sample(const SeqConfig& c, const Sample& s, uint64_t seed, uint64_t index) {
  Sequence q;
  q.tokens = c.seq_len;
  q.key_dim = c.dim;
  q.value_dim = c.value_dim;
  q.gating = s.gating;
  q.k = s.keys;
  q.g = s.g;
  q.beta = s.beta;
  q.q.resize(static_cast<size_t>(c.seq_len) * c.dim);
  for (int t = 0; t < c.seq_len; ++t)
    random_unit_key(seed, index, kQueryRow + t, c.dim, q.q.data() + static_cast<size_t>(t) * c.dim);
  q.v = bf16_normals(seed, index, kValues, static_cast<size_t>(c.seq_len) * c.value_dim);
  if (c.initial_state == "random") q.h0 = bf16_normals(seed, index, kInitialState, static_cast<size_t>(c.dim) * c.value_dim);
  return q;
}

// A chunk family drawn at T tokens.
class ChunkFamilySource : public SequenceSource {
 public:
  ChunkFamilySource(const Family& f, std::string extends) : f_(f), extends_(std::move(extends)) {}
  std::string name() const override { return f_.name(); }
  std::string description() const override { return f_.description() + "; as a sequence: " + extends_; }
  std::vector<FamilyParam> params() const override { return f_.params(); }
  void complete(SeqConfig& c) const override {
    Configuration cc = c.chunk_config();
    f_.complete(cc);
    c.params = cc.params;
  }
  void validate(const SeqConfig& c) const override { f_.validate(c.chunk_config()); }
  Sequence make(const SeqConfig& c, uint64_t seed, uint64_t index) const override {
    Configuration at_t = c.chunk_config();
    at_t.chunk = c.seq_len;  // the family's law over T tokens (its validate caps C at 64, make does not)
    return from_sample(c, f_.make(at_t, seed, index), seed, index);
  }

 protected:
  const Family& f_;
  std::string extends_;
};

// Real gates: sequence i is the window i mod count of T tokens (within one
// captured sequence, per head), so T is at most the captured length (1,024).
class RealGatesSource : public ChunkFamilySource {
 public:
  using ChunkFamilySource::ChunkFamilySource;
  void validate(const SeqConfig& c) const override {
    ChunkFamilySource::validate(c);
    const GateData& d = real_gate_data(c.params.at("model").get<std::string>());
    if (real_gate_chunks(d, c.seq_len).empty())
      throw UsageError(fmt::format("family real_gates: axis seq_len = {} is longer than every captured sequence of {}",
                                   c.seq_len, d.model));
  }
};

// FlashKDA's raw inputs (kda, collinear) drawn at T tokens: the raw
// tensors of the whole sequence, kept for the paths to activate chunk by
// chunk; the sequence's k, g and beta, which the references read, are
// their exact activation (the gold's). Gates are per channel.
class RawFamilySource : public ChunkFamilySource {
 public:
  using ChunkFamilySource::ChunkFamilySource;
  void validate(const SeqConfig& c) const override {
    ChunkFamilySource::validate(c);
    if (find_storage(c.storage).per_token_only)
      throw UsageError(fmt::format("axis storage = {} takes per-token gates only; family {}'s gates are per channel "
                                   "(use fla_chunk_kda or flashkda)", c.storage, c.family));
  }
  Sequence make(const SeqConfig& c, uint64_t seed, uint64_t index) const override {
    Configuration at_t = c.chunk_config();
    at_t.chunk = c.seq_len;
    const Sample drawn = f_.make(at_t, seed, index);  // the raw inputs (and the kernel's activation, not used here)
    Sample exact = activate_exact(*drawn.raw);
    Sequence q = from_sample(c, exact, seed, index);
    q.raw = drawn.raw;
    return q;
  }
};

// Gates as a trained model's: long stretches of weak decay with rare strong
// forgets. Each gate (per token, or per token and channel) is, with
// probability forget_rate, the strong forget `forget`, else model_like's
// weak_floor * sigmoid(N(0,1)) (the same normals as model_like's gates).
class SparseForgetFamily : public Family {
 public:
  std::string name() const override { return "sparse_forget"; }
  std::string description() const override {
    return "random normalised keys; each g = forget with probability forget_rate, else weak_floor * sigmoid(N(0,1)) "
           "(per token, or per token and channel with gating=channel); beta = sigmoid(N(0,1))";
  }
  std::vector<FamilyParam> params() const override {
    return {{"weak_floor", -0.1, "the weak gates' lower bound (< 0): g = weak_floor * sigmoid(N(0,1))"},
            {"forget_rate", 0.005, "the share of strong forgets, in [0, 1]"},
            {"forget", -10.0, "a strong forget's log-decay (< 0)"},
            {"gating", nullptr, "token (the default, omitted from the axes) or channel"}};
  }
  void complete(Configuration& c) const override {
    if (auto it = c.params.find("gating"); it != c.params.end() && (it->is_null() || *it == "token")) c.params.erase(it);
  }
  void validate(const Configuration& c) const override {
    Family::validate(c);
    for (const char* k : {"weak_floor", "forget"}) {
      const auto& v = c.params.at(k);
      if (!v.is_number() || !(v.get<double>() < 0.0) || !std::isfinite(v.get<double>()))
        throw UsageError(fmt::format("axis {} = {} must be a finite number < 0", k, v.dump()));
    }
    const auto& r = c.params.at("forget_rate");
    if (!r.is_number() || !(r.get<double>() >= 0.0 && r.get<double>() <= 1.0))
      throw UsageError(fmt::format("axis forget_rate = {} must lie in [0, 1]", r.dump()));
    if (auto it = c.params.find("gating"); it != c.params.end() && *it != "channel")
      throw UsageError(fmt::format("axis gating = {} must be \"token\" or \"channel\"", it->dump()));
  }
  Sample make(const Configuration& c, uint64_t seed, uint64_t index) const override {
    Sample s;
    s.chunk = c.chunk;
    s.dim = c.dim;
    s.gating = c.params.contains("gating") ? Gating::kChannel : Gating::kToken;
    s.keys.resize(static_cast<size_t>(c.chunk) * c.dim);
    for (int t = 0; t < c.chunk; ++t) random_unit_key(seed, index, t, c.dim, s.keys.data() + static_cast<size_t>(t) * c.dim);
    const double weak = c.params.at("weak_floor").get<double>(), rate = c.params.at("forget_rate").get<double>(),
                 forget = c.params.at("forget").get<double>();
    const Rng gate(seed, index, s.gating == Gating::kToken ? Stream::kGate : Stream::kChannelGate);
    const Rng forgets(seed, index, kForgets);
    s.g.resize(static_cast<size_t>(c.chunk) * s.gate_width());
    for (size_t e = 0; e < s.g.size(); ++e)
      s.g[e] = forgets.uniform(e) < rate ? forget : weak * detmath::sigmoid(gate.normal(e));
    const Rng beta(seed, index, Stream::kBeta);
    s.beta.resize(c.chunk);
    for (int t = 0; t < c.chunk; ++t) s.beta[t] = detmath::sigmoid(beta.normal(t));
    return s;
  }
};

const std::vector<std::unique_ptr<SequenceSource>>& registry() {
  static const SparseForgetFamily sparse_forget;
  static const std::vector<std::unique_ptr<SequenceSource>> all = [] {
    std::vector<std::unique_ptr<SequenceSource>> v;
    v.push_back(std::make_unique<ChunkFamilySource>(find_family("model_like"), "the same law at every token"));
    v.push_back(std::make_unique<ChunkFamilySource>(find_family("floor"), "every gate decay_floor"));
    v.push_back(std::make_unique<ChunkFamilySource>(
        find_family("weak_decay_correlated"), "one key repeated over the whole sequence (every chunk the same)"));
    v.push_back(std::make_unique<RealGatesSource>(
        find_family("real_gates"),
        "sequence i takes the captured gates of window i mod count: T tokens of one captured sequence, one head"));
    v.push_back(std::make_unique<ChunkFamilySource>(sparse_forget, "the same law at every token"));
    v.push_back(std::make_unique<RawFamilySource>(
        find_family("kda"), "the raw tensors of T tokens, each chunk activated by each path (the references: exactly)"));
    v.push_back(std::make_unique<RawFamilySource>(
        find_family("collinear"),
        "one key over the whole sequence, the raw tensors of T tokens, each chunk activated by each path (the "
        "references: exactly)"));
    return v;
  }();
  return all;
}

}  // namespace

nlohmann::json SeqConfig::axes() const {
  nlohmann::json a = {{"family", family},   {"chunk", chunk},     {"dim", dim},        {"value_dim", value_dim},
                      {"seq_len", seq_len}, {"storage", storage}, {"window", window_or_default()}};
  if (initial_state != "zero") a["initial_state"] = initial_state;
  if (backward != "none") a["backward"] = backward;
  for (const auto& [k, v] : params.items()) a[k] = v;
  return a;
}

Configuration SeqConfig::chunk_config() const {
  Configuration c;
  c.family = family;
  c.chunk = chunk;
  c.dim = dim;
  c.params = params;
  return c;
}

int SeqConfig::window_or_default() const {
  if (window > 0) return window;
  return seq_len % 16 == 0 ? seq_len / 16 : seq_len;
}

const SequenceSource& find_source(std::string_view name) {
  for (const auto& s : registry())
    if (s->name() == name) return *s;
  const std::string near = nearest_of(std::string(name), source_names());
  throw UsageError(near.empty() ? fmt::format("unknown sequence family \"{}\" (families: {})", name,
                                              fmt::join(source_names(), ", "))
                                : fmt::format("unknown sequence family \"{}\" (did you mean \"{}\"?)", name, near));
}

std::vector<std::string> source_names() {
  std::vector<std::string> n;
  for (const auto& s : registry()) n.push_back(s->name());
  return n;
}

const std::vector<std::string>& sequence_axes() {
  static const std::vector<std::string> a{"family", "chunk",   "dim",    "value_dim",     "seq_len",
                                          "storage", "window", "method", "initial_state",
                                          "backward"};
  return a;
}

void complete(SeqConfig& c) {
  const SequenceSource& src = find_source(c.family);
  nlohmann::json params = nlohmann::json::object();
  for (const FamilyParam& p : src.params()) {
    if (c.params.contains(p.name)) params[p.name] = c.params[p.name];
    else if (!p.default_value.is_null()) params[p.name] = p.default_value;
  }
  c.params = params;
  src.complete(c);
}

}  // namespace chunkinv
