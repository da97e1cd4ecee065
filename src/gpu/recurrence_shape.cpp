// Which K x V the GPU recurrence runs (gpu/recurrence.cu): built with and
// without CUDA, so that a refusal reads the same everywhere.
#include <fmt/format.h>

#include "gpu/recurrence.hpp"

namespace chunkinv::gpu {

std::string recurrence_unsupported(int key_dim, int value_dim) {
  if (key_dim != 16 && key_dim != 32 && key_dim != 64 && key_dim != 128)
    return fmt::format("key dim K = {}: the GPU recurrence runs K = 16, 32, 64 or 128", key_dim);
  if (value_dim < 1 || value_dim > 512)
    return fmt::format("value dim V = {}: the GPU recurrence runs V = 1 to 512", value_dim);
  return "";
}

}  // namespace chunkinv::gpu
