// The formats the chunked forward stores in (downstream/storage.hpp), and
// the rounding to them, for host and device: the CPU's ChunkedForward and
// the GPU's run the same step (downstream/forward_step.hpp).
#pragma once
#include "core/fp.hpp"
#include "core/hd.hpp"

namespace chunkinv {

enum class Store { kFp64, kFp32, kBf16 };

// x as `s` holds it (round to nearest even; FP64: x itself).
CHUNKINV_HD inline double stored(double x, Store s) {
  switch (s) {
    case Store::kFp32: return round_to(x, kFP32);
    case Store::kBf16: return round_to(x, kBF16);
    case Store::kFp64: break;
  }
  return x;
}

// A storage preset's rounding points (StoragePreset, downstream/storage.hpp,
// adds its names): what the forward step reads, on the host and the device.
struct Stores {
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

}  // namespace chunkinv
