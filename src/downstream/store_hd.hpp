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

// A storage preset's rounding points, without its names (StoragePreset's fields, in its order).
struct Stores {
  Store gates, accumulate, inverse, operands, w_u, state_operand, v_new, update, qk, state, output, final_state;
  bool per_token_only;
};

}  // namespace chunkinv
