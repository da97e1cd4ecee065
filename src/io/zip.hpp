// ZIP archives as NumPy writes them (.npz): central directory, ZIP64
// records, stored and deflated members, CRC-32; .npz read and write on top.
//
// Every offset and length read from the archive is checked against the
// bytes at hand, and the members' declared sizes against
// max_tensor_bytes() before anything is inflated.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/tensor.hpp"

namespace chunkinv {

uint32_t crc32_of(std::string_view data);
// Deflated members need zlib (CHUNKINV_HAVE_ZLIB); stored ones do not.
bool zlib_available();

struct ZipMember {
  std::string name;
  uint16_t method = 0;  // 0 stored, 8 deflated
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0;
  uint64_t offset = 0;  // of the local header
  uint64_t data = 0;    // of the (compressed) data, past the local header
};

// The members of archive `z`, checked: every record within the file, no two
// members with one name or overlapping data, total declared size within the
// limit. `what` names the archive in error messages.
std::vector<ZipMember> zip_directory(std::string_view z, const std::string& what);
// Member `m`'s bytes, inflated if need be, of exactly the declared size and CRC.
std::string zip_extract(std::string_view z, const ZipMember& m, const std::string& what);

// Members "<name>.npy" become tensors "<name>".
TensorMap parse_npz(std::string_view bytes, const std::string& what);
TensorMap read_npz(const std::string& path);
// The members' tensors without values (dtype and shape) from the archive's
// directory and each member's .npy header (inflated that far): the data is
// not read.
TensorMap read_npz_headers(const std::string& path);
// Stored members (no compression), fixed timestamps: the same tensors give
// the same bytes.
std::string npz_bytes(const TensorMap& tensors, const std::string& what);
void write_npz(const std::string& path, const TensorMap& tensors);

}  // namespace chunkinv
