// Where the chunked forward rounds, and to what: a storage preset names
// the format of every intermediate the kernels store or feed to a product
// (docs/downstream.md, "Storage presets"). `fp64` rounds nowhere; the
// others follow fla's chunk_kda and chunk_gated_delta_rule and FlashKDA.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "downstream/store_hd.hpp"

namespace chunkinv {

std::string_view store_name(Store s);

struct StoragePreset {
  std::string_view name;
  std::string_view models;  // the kernel and the source files the rounding points come from
  Store gates;          // G cumulated within the chunk, and every decay exp(G_a - G_b) formed from it
  Store accumulate;     // every product's (and sum's) result before it is stored: the kernels accumulate in FP32
  Store inverse;        // A = (I + L)^-1 as the next product reads it
  Store operands;       // beta k e^G, beta v and q e^G as the products read them
  Store w_u;            // w = A (beta k e^G), u = A (beta v)
  Store state_operand;  // the state as the products read it (fla's stored h)
  Store v_new;          // x = u - w S, as stored and read by the output
  Store update;         // the decayed factor of the state update: k e^(G_C - G_j) or x_j e^(G_C - G_j)
  Store qk;             // the intra-chunk scores q_i k_j e^(G_i - G_j) as the product reads them
  Store state;          // the running state carried from chunk to chunk
  Store output;         // o
  Store final_state;    // ht
  // Per-token gates only (chunk_gated_delta_rule's g is [B, T, H]): the
  // decay to the chunk's end multiplies x_j in FP32 before its rounding, and
  // the query's decay multiplies q S after the product. Otherwise (KDA) the
  // decay multiplies the key (fla's kg) and the query (qg) before them.
  bool per_token_only = false;
};

// Its rounding points alone (what the forward step reads, on host and device).
inline Stores stores_of(const StoragePreset& p) {
  return {p.gates, p.accumulate, p.inverse, p.operands, p.w_u, p.state_operand, p.v_new,
          p.update, p.qk, p.state, p.output, p.final_state, p.per_token_only};
}

std::vector<std::string> storage_names();
const StoragePreset& find_storage(std::string_view name);  // UsageError with a suggestion
const StoragePreset& fp64_storage();

}  // namespace chunkinv
