// NumPy .npy: magic, version, header length, a Python dict literal, raw data.
#pragma once
#include <string>
#include <string_view>

#include "io/tensor.hpp"

namespace chunkinv {

// Format versions 1, 2 and 3; little-endian or byte-sized dtypes; Fortran
// order is reordered to C order. `what` names the source in error messages.
Tensor parse_npy(std::string_view bytes, const std::string& what);
Tensor read_npy(const std::string& path);

// The header alone (dtype and shape, no values) of a .npy file of `size`
// bytes whose first bytes are `head` (at least kMaxHeaderPrefix of them, or
// all), checked as parse_npy checks it (the data's length included).
inline constexpr uint64_t kMaxHeaderPrefix = 12 + (uint64_t{1} << 20);
Tensor npy_header(std::string_view head, uint64_t size, const std::string& what);
// The same, reading no more than the header's bytes of the file.
Tensor read_npy_header(const std::string& path);

// Version 1.0, header padded to 64 bytes. Values are rounded to the dtype
// (nearest even); BF16 goes in as '<u2' bit patterns (.npy has no BF16).
std::string npy_bytes(const Tensor& t);
void write_npy(const std::string& path, const Tensor& t);

}  // namespace chunkinv
