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

// A preset: its rounding points (Stores) and what it is called and models.
struct StoragePreset : Stores {
  std::string_view name;
  std::string_view models;  // the kernel and the source files the rounding points come from
};

std::vector<std::string> storage_names();
const StoragePreset& find_storage(std::string_view name);  // UsageError with a suggestion
const StoragePreset& fp64_storage();

}  // namespace chunkinv
