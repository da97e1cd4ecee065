#include "inputs/tensor_set.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/fp.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "io/zip.hpp"

namespace chunkinv {
namespace fs = std::filesystem;

namespace {

std::string fmt_value(double v) { return fmt::format("{}", v); }

// Tensor `name` of a set, with the prefix its error messages carry.
struct Found {
  Tensor t;
  std::string where;
};

void check_float(const Found& f, bool bf16_bits_ok) {
  if (dtype_is_float(f.t.dtype)) return;
  if (bf16_bits_ok && (f.t.dtype == DType::kU16 || f.t.dtype == DType::kI16)) return;
  throw UsageError(fmt::format("{}: dtype {} is not a floating-point type (f16, bf16, f32, f64{})", f.where,
                               dtype_name(f.t.dtype), bf16_bits_ok ? ", or BF16 bit patterns as u16/i16" : ""));
}

const std::array<const char*, 3> kNames{"keys", "g", "beta"};

// The tensors of a set from one container's tensors.
std::map<std::string, Found> from_container(TensorMap all, const std::string& path) {
  std::map<std::string, Found> found;
  for (const char* n : kNames) {
    auto it = all.find(n);
    if (it == all.end()) {
      std::vector<std::string> have;
      for (const auto& [k, v] : all) have.push_back(k);
      throw UsageError(fmt::format("{}: tensor '{}' is missing (found: {})", path, n,
                                   have.empty() ? "none" : fmt::format("{}", fmt::join(have, ", "))));
    }
    found[n] = {std::move(it->second), fmt::format("{}[{}]", path, n)};
  }
  return found;
}

// Checks the three tensors and makes the set.
TensorSet make_set(std::map<std::string, Found>& found, const std::string& path) {
  const Found& k = found["keys"];
  const Found& g = found["g"];
  const Found& b = found["beta"];
  check_float(k, true);
  check_float(g, false);
  check_float(b, false);
  if (k.t.shape.size() != 3)
    throw UsageError(fmt::format("{}: shape {} is not [N, C, d]", k.where, shape_string(k.t.shape)));
  const int64_t n = k.t.shape[0], c = k.t.shape[1], d = k.t.shape[2];
  if (n < 1) throw UsageError(fmt::format("{}: shape {} holds no sample (N = 0)", k.where, shape_string(k.t.shape)));
  if (c < 2 || c > 64)
    throw UsageError(fmt::format("{}: shape {}: chunk C = {} is not in 2..64", k.where, shape_string(k.t.shape), c));
  if (d < 1) throw UsageError(fmt::format("{}: shape {}: dim d = 0", k.where, shape_string(k.t.shape)));
  if (d > 1 << 20) throw UsageError(fmt::format("{}: shape {}: dim d = {} is beyond 2^20", k.where, shape_string(k.t.shape), d));
  for (const Found* f : {&g, &b}) {
    if (f->t.shape != std::vector<int64_t>{n, c})
      throw UsageError(fmt::format("{}: shape {} does not match keys: [N, C] = ({}, {}) expected", f->where,
                                   shape_string(f->t.shape), n, c));
  }
  TensorSet s;
  s.source = path;
  s.count = static_cast<uint64_t>(n);
  s.chunk = static_cast<int>(c);
  s.dim = static_cast<int>(d);
  s.keys_dtype = k.t.dtype;
  s.keys.resize(k.t.values.size());
  for (size_t i = 0; i < s.keys.size(); ++i) {
    const double raw = k.t.values[i];
    double v;
    if (k.t.dtype == DType::kU16 || k.t.dtype == DType::kI16) {
      v = bf16_from_bits(static_cast<uint16_t>(static_cast<int64_t>(raw) & 0xFFFF));
    } else {
      v = bf16(raw);  // no-op for BF16; nearest even otherwise
    }
    if (!std::isfinite(raw) || !std::isfinite(v)) {
      throw UsageError(fmt::format("{}: entry {} = {} {}", k.where, index_string(k.t.shape, i),
                                   fmt_value(std::isfinite(raw) ? raw : v),
                                   std::isfinite(raw) ? "overflows BF16" : "is not finite"));
    }
    s.keys[i] = v;
  }
  s.g = g.t.values;
  for (size_t i = 0; i < s.g.size(); ++i) {
    const double v = s.g[i];
    if (!std::isfinite(v))
      throw UsageError(fmt::format("{}: entry {} = {} is not finite", g.where, index_string(g.t.shape, i), fmt_value(v)));
    if (!(v < 0.0))
      throw UsageError(fmt::format("{}: entry {} = {} is not < 0", g.where, index_string(g.t.shape, i), fmt_value(v)));
  }
  s.beta = b.t.values;
  for (size_t i = 0; i < s.beta.size(); ++i) {
    const double v = s.beta[i];
    if (!std::isfinite(v))
      throw UsageError(fmt::format("{}: entry {} = {} is not finite", b.where, index_string(b.t.shape, i), fmt_value(v)));
    if (!(v > 0.0 && v < 1.0))
      throw UsageError(fmt::format("{}: entry {} = {} is not in (0, 1)", b.where, index_string(b.t.shape, i), fmt_value(v)));
  }
  return s;
}

}  // namespace

TensorSet load_tensor_set(const std::string& path) {
  try {
    std::error_code ec;
    std::map<std::string, Found> found;
    if (fs::is_directory(path, ec)) {
      for (const char* n : kNames) {
        const std::string f = (fs::path(path) / (std::string(n) + ".npy")).string();
        if (!fs::exists(f, ec)) {
          std::vector<std::string> have;
          for (const auto& e : fs::directory_iterator(path, ec))
            if (e.path().extension() == ".npy") have.push_back(e.path().filename().string());
          std::sort(have.begin(), have.end());
          throw UsageError(fmt::format("{}: {}.npy is missing (found: {})", path, n,
                                       have.empty() ? "no .npy files" : fmt::format("{}", fmt::join(have, ", "))));
        }
        found[n] = {read_npy(f), f};
      }
    } else {
      if (!fs::exists(path, ec)) throw UsageError(path + ": no such file or directory");
      if (path.ends_with(".npz")) {
        found = from_container(read_npz(path), path);
      } else if (path.ends_with(".safetensors")) {
        found = from_container(read_safetensors(path), path);
      } else {
        throw UsageError(path + ": not a directory of .npy files, an .npz or a .safetensors file");
      }
    }
    return make_set(found, path);
  } catch (const UsageError& e) {
    throw UsageError(std::string("inputs ") + e.what());
  }
}

TensorSet parse_tensor_set(std::string_view bytes, const std::string& name) {
  try {
    std::map<std::string, Found> found;
    if (name.ends_with(".npz")) {
      found = from_container(parse_npz(bytes, name), name);
    } else if (name.ends_with(".safetensors")) {
      found = from_container(parse_safetensors(bytes, name), name);
    } else {
      throw UsageError(name + ": not an .npz or a .safetensors file");
    }
    return make_set(found, name);
  } catch (const UsageError& e) {
    throw UsageError(std::string("inputs ") + e.what());
  }
}

Sample TensorSet::sample(uint64_t index) const {
  if (index >= count)
    throw UsageError(fmt::format("inputs {}: sample {} asked for, the file holds {} (0..{})", source, index, count, count - 1));
  Sample s;
  s.chunk = chunk;
  s.dim = dim;
  const size_t cd = static_cast<size_t>(chunk) * dim;
  s.keys.assign(keys.begin() + index * cd, keys.begin() + (index + 1) * cd);
  s.g.assign(g.begin() + index * chunk, g.begin() + (index + 1) * chunk);
  s.beta.assign(beta.begin() + index * chunk, beta.begin() + (index + 1) * chunk);
  return s;
}

void write_tensor_set(const std::string& path, std::span<const Sample> samples, DType keys_dtype, DType value_dtype) {
  if (samples.empty()) throw UsageError(path + ": no samples to write");
  const int c = samples[0].chunk, d = samples[0].dim;
  const auto n = static_cast<int64_t>(samples.size());
  TensorMap m;
  m["keys"] = {keys_dtype, {n, c, d}, {}};
  m["g"] = {value_dtype, {n, c}, {}};
  m["beta"] = {value_dtype, {n, c}, {}};
  for (const Sample& s : samples) {
    if (s.chunk != c || s.dim != d)
      throw UsageError(fmt::format("{}: samples of different shapes (C={}, d={} and C={}, d={})", path, c, d, s.chunk, s.dim));
    auto& kv = m["keys"].values;
    if (keys_dtype == DType::kU16 || keys_dtype == DType::kI16) {  // BF16 bit patterns
      for (double x : s.keys) {
        const uint16_t bits = bf16_bits(bf16(x));
        kv.push_back(keys_dtype == DType::kU16 ? bits : static_cast<int16_t>(bits));
      }
    } else {
      kv.insert(kv.end(), s.keys.begin(), s.keys.end());
    }
    m["g"].values.insert(m["g"].values.end(), s.g.begin(), s.g.end());
    m["beta"].values.insert(m["beta"].values.end(), s.beta.begin(), s.beta.end());
  }
  if (path.ends_with(".npz")) {
    write_npz(path, m);
  } else if (path.ends_with(".safetensors")) {
    write_safetensors(path, m);
  } else {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw UsageError(fmt::format("{}: cannot create directory ({})", path, ec.message()));
    for (const auto& [name, t] : m) write_npy((fs::path(path) / (name + ".npy")).string(), t);
  }
}

}  // namespace chunkinv
