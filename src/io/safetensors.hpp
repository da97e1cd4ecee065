// .safetensors: 8-byte little-endian header length, a JSON header (dtype,
// shape, data_offsets per tensor; __metadata__ ignored), raw little-endian
// data. Read as strictly as the format's reference reader: no duplicate
// keys, no bytes after the JSON but space padding, tensors that tile the
// data exactly (no overlap, no gap, nothing after the last).
#pragma once
#include <string>
#include <string_view>

#include "io/tensor.hpp"

namespace chunkinv {

TensorMap parse_safetensors(std::string_view bytes, const std::string& what);
TensorMap read_safetensors(const std::string& path);
// The tensors without values (dtype and shape) as the header declares them,
// checked as read_safetensors checks them; no byte of data is read.
TensorMap read_safetensors_header(const std::string& path);

// Values are rounded to each tensor's dtype (nearest even); the header is
// padded with spaces so that the data starts 8-byte aligned.
std::string safetensors_bytes(const TensorMap& tensors);
void write_safetensors(const std::string& path, const TensorMap& tensors);

}  // namespace chunkinv
