// The storage presets, one line per kernel. Where each rounding point comes
// from is in docs/downstream.md with the source file that makes it.
#include "downstream/storage.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/fp.hpp"

namespace chunkinv {

std::string_view store_name(Store s) {
  switch (s) {
    case Store::kFp32: return "fp32";
    case Store::kBf16: return "bf16";
    case Store::kFp64: break;
  }
  return "fp64";
}

namespace {

constexpr Store F64 = Store::kFp64, F32 = Store::kFp32, B16 = Store::kBf16;

//     gates acc  A    opnd w,u  h    v_new upd  qk   state o    ht   per-token only
const StoragePreset kPresets[] = {
    {{F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64, F64}, "fp64", "no rounding: the FP64 chunked forward"},
    {{F32, F32, B16, B16, B16, B16, B16, B16, B16, F32, B16, F32},
     "fla_chunk_kda",
     "fla chunk_kda (ops/kda/chunk_fwd.py, chunk_intra.py, wy_fast.py, ops/common/chunk_delta_h.py, "
     "ops/gla/chunk.py): BF16 keys, values and queries; G in FP32; A, w, u, kg, qg, v_new, h, Aqk and o in BF16; "
     "the state accumulated in FP32; ht in FP32"},
    {{F32, F32, B16, B16, B16, B16, B16, B16, B16, F32, B16, F32, true},
     "fla_chunk_gdn",
     "fla chunk_gated_delta_rule (ops/gated_delta_rule/chunk.py, chunk_fwd.py, wy_fast.py, "
     "ops/common/chunk_delta_h.py, chunk_o.py): as chunk_kda, but the decay to the chunk's end multiplies v_new "
     "in FP32 before its BF16 rounding and the query's decay multiplies q h in FP32; per-token gates only"},
    {{F32, F32, B16, B16, B16, B16, B16, B16, B16, B16, B16, B16},
     "flashkda",
     "FlashKDA (csrc/smxx, its design notes): as fla_chunk_kda, but the state carried from chunk to chunk "
     "in BF16 and ht in BF16"},
};

}  // namespace

std::vector<std::string> storage_names() {
  std::vector<std::string> n;
  for (const StoragePreset& p : kPresets) n.emplace_back(p.name);
  return n;
}

const StoragePreset& find_storage(std::string_view name) {
  for (const StoragePreset& p : kPresets)
    if (p.name == name) return p;
  const auto names = storage_names();
  const std::string near = nearest_of(std::string(name), names);
  throw UsageError(near.empty()
                       ? fmt::format("axis storage = \"{}\" is not a preset ({})", name, fmt::join(names, ", "))
                       : fmt::format("axis storage = \"{}\" is not a preset (did you mean \"{}\"?)", name, near));
}

const StoragePreset& fp64_storage() { return kPresets[0]; }

}  // namespace chunkinv
