// Tensor sets (the `file` family's inputs, docs/inputs.md): keys, g and beta
// in a directory of .npy files, one .npz or one .safetensors file (the
// containers are in src/io/), in one of two layouts:
//
//   chunks  keys [N, C, d],    g [N, C] or [N, C, d],    beta [N, C]
//   tokens  keys [B, T, H, K], g [B, T, H] or [B, T, H, K], beta [B, T, H],
//           optional cu_seqlens [S + 1] (then B = 1): the fla/FlashKDA layout,
//           cut into chunks by the tool (chunk_tokens).
//
// or FlashKDA's raw inputs in place of g and beta (docs/inputs.md):
//
//   chunks  keys [N, C, d], g_raw [N, C, d], beta_raw [N, C], A_log scalar or
//           [N], dt_bias [d] or [N, d], lower_bound scalar or [N]
//   tokens  keys [B, T, H, K], g_raw [B, T, H, K], beta_raw [B, T, H],
//           A_log [H], dt_bias [H, K] or [H*K], lower_bound scalar,
//           optional cu_seqlens as above
//
// A set of the chunks layout is held as B = N, T = C, H = 1: one chunk per
// batch row. Every error is a UsageError of one line naming the file, the
// tensor and the culprit, e.g. "inputs dir/g.npy: entry [3, 7] = 0.25 is not <= 0".
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inputs/sample.hpp"
#include "io/tensor.hpp"

namespace chunkinv {

struct TensorSet {
  std::string source;          // the path as given
  bool token_layout = false;   // keys [B, T, H, K] (else [N, C, d])
  int64_t batch = 0;           // B (chunks layout: N)
  int64_t tokens = 0;          // T (chunks layout: C)
  int heads = 1;               // H (chunks layout: 1)
  int dim = 0;                 // K = d
  // Token layout: sequence boundaries [0, ..., T] when the file has
  // cu_seqlens (B = 1); empty: each batch row is one sequence of T tokens.
  std::vector<int64_t> cu_seqlens;
  // Chunks layout: N and C. Token layout: count 0, chunk 0 (the chunk is the
  // configuration's, see chunk_tokens).
  uint64_t count = 0;
  int chunk = 0;
  DType keys_dtype = DType::kBF16;  // as found in the file (before rounding)
  // Gates as given: g_channels is 1 (per token) or dim (per channel, SPEC §1
  // "Per-channel gates"). g_channels_equal: every token's channels hold one
  // value, so the gates are per-token gates written per channel.
  int g_channels = 1;
  bool g_channels_equal = true;
  std::string g_where;  // the g tensor as error messages name it
  // keys [B, T, H, K] as BF16 values, g [B, T, H, g_channels], beta [B, T, H].
  std::vector<double> keys, g, beta;
  // A set of FlashKDA's raw inputs (SPEC §1 "Raw inputs"), activated when a
  // sample is taken; keys, g and beta above are then empty. Chunks layout:
  // one per chunk in `raw`. Tokens layout: the tokens in `raw_tokens`, each
  // chunk of chunk_tokens made into one RawInputs with its head's A_log and
  // dt_bias (chunk_sample).
  std::vector<std::shared_ptr<const RawInputs>> raw;
  struct RawTokens {
    std::vector<uint16_t> keys, g;  // [B, T, H, d] BF16 bits (keys not normalised, g_raw)
    std::vector<uint16_t> beta;     // [B, T, H] BF16 bits (beta_raw)
    std::vector<float> a_log;       // [H]
    std::vector<float> dt_bias;     // [H, d]
    float lower_bound = -5.0f;      // one for every head
  };
  std::shared_ptr<const RawTokens> raw_tokens;
  bool is_raw() const { return !raw.empty() || raw_tokens != nullptr; }

  size_t token_index(int64_t row, int64_t token, int head) const {
    return (static_cast<size_t>(row) * static_cast<size_t>(tokens) + static_cast<size_t>(token)) * heads + head;
  }
  // The per-token gate of (row, token, head): channel 0 of a per-channel g.
  double gate(int64_t row, int64_t token, int head) const { return g[token_index(row, token, head) * g_channels]; }
  // Chunks layout: sample `index` (throws UsageError if index >= count).
  Sample sample(uint64_t index) const;
};

// `path` is a directory holding keys.npy, g.npy and beta.npy (and
// cu_seqlens.npy), or one .npz or .safetensors file with tensors of those
// names (`k` is taken for `keys` where there is no `keys`). Checks names,
// shapes, dtypes, finiteness, g <= 0 (both zeros: a decay of exactly 1) and
// beta in (0, 1). Keys not stored as BF16 are rounded to BF16 (nearest even).
TensorSet load_tensor_set(const std::string& path);
// What reading the tensors `names` of the set at `path` would hold in memory,
// from the headers alone; UsageError naming the file and the limit when it is
// more than this process may use. Every reader of a whole set calls it first.
void check_tensor_set_memory(const std::string& path, const std::vector<std::string>& names);

// The same from the bytes of one .npz or .safetensors file, the container
// chosen by the ending of `name` (which also names it in error messages).
TensorSet parse_tensor_set(std::string_view bytes, const std::string& name);

// The same from tensors already in memory (keys, g, beta and optional
// cu_seqlens; `k` for keys), `name` naming them in error messages (the
// Python package hands NumPy arrays over this way).
TensorSet make_tensor_set(TensorMap tensors, const std::string& name);

// --- chunking ------------------------------------------------------------------
// What becomes of the last chunk of a sequence when it holds fewer than C
// tokens: zero-padded to C (FlashKDA's way; pad) or left out (drop).
enum class Tail { kPad, kDrop };
Tail parse_tail(const std::string& name);  // "pad" or "drop"; UsageError otherwise

// One chunk: tokens [first, first + valid) of batch row `row`, head `head`;
// rows valid..C-1 of its sample are padding.
struct TokenChunk {
  int64_t row = 0, first = 0;
  int head = 0, valid = 0;
};
// The chunks of a set at chunk size `chunk`, in sample order: sequence, the
// chunk's position in it, head (fastest). A chunk never crosses a sequence
// boundary. For the chunks layout `chunk` must be the file's C (one chunk per
// sample, in file order).
std::vector<TokenChunk> chunk_tokens(const TensorSet& set, int chunk, Tail tail);
// The sample of one chunk. Padding rows have zero keys, g = 0 and beta = 0:
// their rows and columns of L are zero on every path (and of the gold
// inverse those of the identity). Per-channel gates make a sample with
// per-channel gating unless every token's channels agree (then one per token).
// A raw set's chunk is made into one RawInputs (its head's A_log and dt_bias)
// and activated; its padding rows are padded the same way (RawInputs::padding).
Sample chunk_sample(const TensorSet& set, const TokenChunk& c, int chunk);

// --- a candidate's matrices (chunkinv score) -------------------------------------
// The L and/or INV (and optionally decay, inv_decay) that another kernel
// produced for the samples of an inputs set, one matrix per chunk.
struct CandidateSet {
  std::string source;
  uint64_t count = 0;
  int chunk = 0;
  // Empty when the file has none; else one per chunk: L and INV C x C
  // row-major, decays C.
  std::vector<std::vector<double>> L, INV;
  std::vector<std::vector<double>> decay, inv_decay;
};
// Reads tensors `L`, `INV` (at least one), `decay`, `inv_decay` from `path`
// (a directory of .npy, an .npz or a .safetensors file; other tensors, such
// as the inputs themselves, are ignored). Matrices are [N, C, C] in sample
// order or, for an inputs set of the token layout, [B, T, H, C] as fla keeps
// them (row t of its chunk at token t, columns within the chunk); decays
// [N, C] or [B, T, H]. Values are taken exactly (any float type; non-finite
// values are kept: they are what is measured). Padding rows of a padded
// chunk take the exact values (L 0, INV the identity's row).
CandidateSet load_candidate(const std::string& path, const TensorSet& inputs, std::span<const TokenChunk> chunks,
                            int chunk);

// Writes samples (all of one chunk and dim) as a tensor set: a directory
// (created if needed) unless `path` ends in .npz or .safetensors. Keys are
// written as `keys_dtype`, g and beta as `value_dtype`. `extra` tensors are
// written beside them (e.g. a path's L and INV, as inspect --export-path does).
// Each file is replaced atomically.
void write_tensor_set(const std::string& path, std::span<const Sample> samples,
                      DType keys_dtype = DType::kBF16, DType value_dtype = DType::kF64, const TensorMap& extra = {});
// The same set as the bytes of one file (`path` ends in .npz or .safetensors).
std::string tensor_set_bytes(const std::string& path, std::span<const Sample> samples,
                             DType keys_dtype = DType::kBF16, DType value_dtype = DType::kF64,
                             const TensorMap& extra = {});

}  // namespace chunkinv
