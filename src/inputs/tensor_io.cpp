#include "inputs/tensor_io.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#ifdef CHUNKINV_HAVE_ZLIB
#include <zlib.h>
#endif

#include "core/error.hpp"
#include "core/fp.hpp"

namespace chunkinv {
namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------
// Element types

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kU16: return "u16";
    case DType::kI16: return "i16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
  }
  return "?";
}

int dtype_size(DType t) {
  switch (t) {
    case DType::kU8: return 1;
    case DType::kBF16: case DType::kF16: case DType::kU16: case DType::kI16: return 2;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF64: case DType::kI64: return 8;
  }
  return 0;
}

bool dtype_is_float(DType t) {
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32 || t == DType::kF64;
}

uint64_t Tensor::numel() const {
  uint64_t n = 1;
  for (int64_t s : shape) n *= static_cast<uint64_t>(s);
  return n;
}

std::string index_string(const std::vector<int64_t>& shape, uint64_t flat) {
  std::vector<uint64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    const auto s = static_cast<uint64_t>(shape[k]);
    idx[k] = s ? flat % s : 0;
    flat = s ? flat / s : 0;
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  return fmt::format("({})", fmt::join(shape, ", "));
}

// Bytes that `shape` of `t` needs, or UINT64_MAX when that does not fit in
// 64 bits (a corrupt header must not wrap around into a small size).
uint64_t bytes_needed(const std::vector<int64_t>& shape, DType t) {
  for (int64_t d : shape)
    if (d == 0) return 0;
  uint64_t n = dtype_size(t);
  for (int64_t d : shape) {
    const auto u = static_cast<uint64_t>(d);
    if (n > UINT64_MAX / u) return UINT64_MAX;
    n *= u;
  }
  return n;
}

// --- little-endian bytes ---------------------------------------------------

template <typename T>
T load_le(const unsigned char* p) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(static_cast<T>(p[i]) << (8 * i));
  return v;
}

template <typename T>
void store_le(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

const unsigned char* ubytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

std::vector<double> decode(std::string_view bytes, DType t, uint64_t n) {
  std::vector<double> v(n);
  const unsigned char* p = ubytes(bytes);
  const int sz = dtype_size(t);
  for (uint64_t i = 0; i < n; ++i, p += sz) {
    switch (t) {
      case DType::kBF16: v[i] = bf16_from_bits(load_le<uint16_t>(p)); break;
      case DType::kF16: v[i] = fp16_from_bits(load_le<uint16_t>(p)); break;
      case DType::kF32: v[i] = std::bit_cast<float>(load_le<uint32_t>(p)); break;
      case DType::kF64: v[i] = std::bit_cast<double>(load_le<uint64_t>(p)); break;
      case DType::kU16: v[i] = load_le<uint16_t>(p); break;
      case DType::kI16: v[i] = static_cast<int16_t>(load_le<uint16_t>(p)); break;
      case DType::kI32: v[i] = static_cast<int32_t>(load_le<uint32_t>(p)); break;
      case DType::kI64: v[i] = static_cast<double>(static_cast<int64_t>(load_le<uint64_t>(p))); break;
      case DType::kU8: v[i] = *p; break;
    }
  }
  return v;
}

void encode(const Tensor& t, std::string& out) {
  if (t.values.size() != t.numel())
    throw UsageError(fmt::format("tensor of shape {} holds {} values", shape_string(t.shape), t.values.size()));
  out.reserve(out.size() + t.values.size() * dtype_size(t.dtype));
  for (double x : t.values) {
    switch (t.dtype) {
      case DType::kBF16: store_le<uint16_t>(out, bf16_bits(bf16(x))); break;
      case DType::kF16: store_le<uint16_t>(out, fp16_bits(fp16(x))); break;
      case DType::kF32: store_le<uint32_t>(out, std::bit_cast<uint32_t>(static_cast<float>(x))); break;
      case DType::kF64: store_le<uint64_t>(out, std::bit_cast<uint64_t>(x)); break;
      case DType::kU16: case DType::kI16:
        store_le<uint16_t>(out, static_cast<uint16_t>(static_cast<int64_t>(x))); break;
      case DType::kI32: store_le<uint32_t>(out, static_cast<uint32_t>(static_cast<int64_t>(x))); break;
      case DType::kI64: store_le<uint64_t>(out, static_cast<uint64_t>(static_cast<int64_t>(x))); break;
      case DType::kU8: out.push_back(static_cast<char>(static_cast<uint8_t>(x))); break;
    }
  }
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError(path + ": no such file");
  if (fs::is_directory(path, ec)) throw UsageError(path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path + ": cannot be opened for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw UsageError(path + ": cannot be opened for writing");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw UsageError(path + ": write failed");
}

// ---------------------------------------------------------------------------
// .npy: magic, version, header length, a Python dict literal, raw data.

// The header dict is a Python literal; this reads the subset NumPy writes
// (strings, ints, True/False/None, tuples, lists, dicts) into JSON.
class PyLiteral {
 public:
  PyLiteral(std::string_view s, const std::string& what) : s_(s), what_(what) {}
  json parse() {
    json v = value();
    skip();
    if (i_ != s_.size()) fail("unexpected text after the dict");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    throw UsageError(fmt::format("{}: malformed .npy header ({} at character {})", what_, msg, i_));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  json value() {
    skip();
    if (i_ >= s_.size()) fail("unexpected end");
    if (++depth_ > 16) fail("nested too deeply");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    const char c = s_[i_];
    if (c == '\'' || c == '"') return string();
    if (c == '{') {
      ++i_;
      json o = json::object();
      while (!eat('}')) {
        json k = value();
        if (!k.is_string()) fail("dict key is not a string");
        if (!eat(':')) fail("':' expected");
        o[k.get<std::string>()] = value();
        if (!eat(',')) {
          if (!eat('}')) fail("',' or '}' expected");
          break;
        }
      }
      return o;
    }
    if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      ++i_;
      json a = json::array();
      while (!eat(close)) {
        a.push_back(value());
        if (!eat(',')) {
          if (!eat(close)) fail(fmt::format("',' or '{}' expected", close));
          break;
        }
      }
      return a;
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i_ + (c == '-');
      while (j < s_.size() && std::isdigit(static_cast<unsigned char>(s_[j]))) ++j;
      if (j < s_.size() && s_[j] == 'L') ++j;  // Python 2 long
      const std::string num(s_.substr(i_, j - i_));
      i_ = j;
      try {
        return std::stoll(num);
      } catch (...) {
        fail("bad integer '" + num + "'");
      }
    }
    for (const auto& [word, v] : {std::pair<const char*, json>{"True", true}, {"False", false}, {"None", nullptr}}) {
      if (s_.substr(i_, std::strlen(word)) == word) {
        i_ += std::strlen(word);
        return v;
      }
    }
    fail(fmt::format("unexpected character '{}'", c));
  }
  json string() {
    const char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) ++i_;
      out.push_back(s_[i_++]);
    }
    if (i_ >= s_.size()) fail("unterminated string");
    ++i_;
    return out;
  }

  std::string_view s_;
  std::string what_;
  size_t i_ = 0;
  int depth_ = 0;
};

// '<f4' and friends; ml_dtypes' 'bfloat16' and void '|V2' are BF16.
DType npy_dtype(const std::string& descr, const std::string& what) {
  if (descr == "bfloat16" || descr == "<V2" || descr == "|V2" || descr == "V2") return DType::kBF16;
  if (descr.size() < 2) throw UsageError(fmt::format("{}: dtype '{}' is not supported", what, descr));
  const char order = descr[0];
  const std::string code = (order == '<' || order == '>' || order == '|' || order == '=') ? descr.substr(1) : descr;
  static const std::map<std::string, DType> kCodes{
      {"f2", DType::kF16}, {"f4", DType::kF32}, {"f8", DType::kF64}, {"u2", DType::kU16}, {"i2", DType::kI16},
      {"i4", DType::kI32}, {"i8", DType::kI64}, {"u1", DType::kU8}, {"b1", DType::kU8}};
  const auto it = kCodes.find(code);
  if (it == kCodes.end())
    throw UsageError(fmt::format("{}: dtype '{}' is not supported (f2, f4, f8, bf16 as u2/i2/V2, i4, i8)", what, descr));
  if (order == '>' && dtype_size(it->second) > 1)
    throw UsageError(fmt::format("{}: dtype '{}' is big-endian; save it little-endian ('<')", what, descr));
  return it->second;
}

const char* npy_descr(DType t) {
  switch (t) {
    case DType::kBF16: return "<u2";  // bit patterns: .npy has no BF16
    case DType::kF16: return "<f2";
    case DType::kF32: return "<f4";
    case DType::kF64: return "<f8";
    case DType::kU16: return "<u2";
    case DType::kI16: return "<i2";
    case DType::kI32: return "<i4";
    case DType::kI64: return "<i8";
    case DType::kU8: return "|u1";
  }
  return "?";
}

// --- ZIP (for .npz) -----------------------------------------------------

uint32_t crc32_of(std::string_view data) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = table[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string inflate_raw(std::string_view in, uint64_t out_size, const std::string& what) {
#ifdef CHUNKINV_HAVE_ZLIB
  std::string out(out_size, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) throw UsageError(what + ": zlib initialisation failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = inflate(&zs, Z_FINISH);
  const uint64_t produced = zs.total_out;
  inflateEnd(&zs);
  if (rc != Z_STREAM_END || produced != out_size)
    throw UsageError(fmt::format("{}: deflated data is corrupt or truncated (zlib code {})", what, rc));
  return out;
#else
  (void)in;
  (void)out_size;
  throw UsageError(what + ": member is deflated (np.savez_compressed) and this build has no zlib; "
                          "save with np.savez or rebuild with zlib");
#endif
}

struct ZipMember {
  std::string name;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t csize = 0, usize = 0, offset = 0;
};

std::vector<ZipMember> zip_directory(std::string_view z, const std::string& what) {
  const auto* p = ubytes(z);
  const auto bad = [&](const std::string& msg) { return UsageError(fmt::format("{}: not a valid .npz (zip) file: {}", what, msg)); };
  if (z.size() < 22) throw bad("too short");
  // End of central directory: the last signature within the final 64 KiB.
  size_t eocd = std::string_view::npos;
  for (size_t i = z.size() - 22 + 1; i-- > 0 && z.size() - i <= 22 + 65535;) {
    if (load_le<uint32_t>(p + i) == 0x06054b50u) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string_view::npos) throw bad("no end-of-central-directory record (truncated?)");
  uint64_t entries = load_le<uint16_t>(p + eocd + 10);
  uint64_t cd_size = load_le<uint32_t>(p + eocd + 12);
  uint64_t cd_off = load_le<uint32_t>(p + eocd + 16);
  if ((entries == 0xFFFF || cd_off == 0xFFFFFFFFu || cd_size == 0xFFFFFFFFu) && eocd >= 20 &&
      load_le<uint32_t>(p + eocd - 20) == 0x07064b50u) {  // ZIP64 locator
    const uint64_t z64 = load_le<uint64_t>(p + eocd - 20 + 8);
    if (z64 > z.size() - 56 || load_le<uint32_t>(p + z64) != 0x06064b50u) throw bad("bad ZIP64 record");
    entries = load_le<uint64_t>(p + z64 + 32);
    cd_size = load_le<uint64_t>(p + z64 + 40);
    cd_off = load_le<uint64_t>(p + z64 + 48);
  }
  if (cd_off > z.size() || cd_size > z.size() - cd_off) throw bad("central directory beyond the end of the file (truncated?)");
  std::vector<ZipMember> members;
  uint64_t q = cd_off;
  for (uint64_t e = 0; e < entries; ++e) {
    if (q + 46 > z.size() || load_le<uint32_t>(p + q) != 0x02014b50u) throw bad("corrupt central directory");
    ZipMember m;
    const uint16_t flags = load_le<uint16_t>(p + q + 8);
    m.method = load_le<uint16_t>(p + q + 10);
    m.crc = load_le<uint32_t>(p + q + 16);
    m.csize = load_le<uint32_t>(p + q + 20);
    m.usize = load_le<uint32_t>(p + q + 24);
    const uint16_t nlen = load_le<uint16_t>(p + q + 28), xlen = load_le<uint16_t>(p + q + 30),
                   clen = load_le<uint16_t>(p + q + 32);
    m.offset = load_le<uint32_t>(p + q + 42);
    if (q + 46 + nlen + xlen + clen > z.size()) throw bad("corrupt central directory");
    m.name.assign(z.substr(q + 46, nlen));
    if (flags & 1) throw UsageError(fmt::format("{}: member {} is encrypted", what, m.name));
    // ZIP64 extra field: the 64-bit values of the fields saturated above.
    const uint64_t extra_end = q + 46 + nlen + xlen;
    for (uint64_t x = q + 46 + nlen; x + 4 <= extra_end;) {
      const uint16_t id = load_le<uint16_t>(p + x), len = load_le<uint16_t>(p + x + 2);
      if (id == 0x0001) {
        uint64_t f = x + 4;
        for (uint64_t* field : {&m.usize, &m.csize, &m.offset}) {
          if (*field == 0xFFFFFFFFu && f + 8 <= std::min<uint64_t>(x + 4 + len, extra_end)) {
            *field = load_le<uint64_t>(p + f);
            f += 8;
          }
        }
      }
      x += 4 + len;
    }
    members.push_back(std::move(m));
    q += 46 + nlen + xlen + clen;
  }
  return members;
}

std::string zip_extract(std::string_view z, const ZipMember& m, const std::string& what) {
  const auto* p = ubytes(z);
  const std::string where = fmt::format("{}[{}]", what, m.name);
  if (m.offset > z.size() - 30 || load_le<uint32_t>(p + m.offset) != 0x04034b50u)
    throw UsageError(where + ": corrupt local header (truncated?)");
  const uint64_t start = m.offset + 30 + load_le<uint16_t>(p + m.offset + 26) + load_le<uint16_t>(p + m.offset + 28);
  if (start > z.size() || m.csize > z.size() - start) throw UsageError(where + ": data beyond the end of the file (truncated?)");
  const std::string_view raw = z.substr(start, m.csize);
  std::string data;
  if (m.method == 0) {
    if (m.csize != m.usize) throw UsageError(where + ": stored member with inconsistent sizes");
    data.assign(raw);
  } else if (m.method == 8) {
    if (m.usize / 1032 > m.csize + 1) throw UsageError(where + ": corrupt sizes (more than deflate can expand to)");
    data = inflate_raw(raw, m.usize, where);
  } else {
    throw UsageError(fmt::format("{}: compression method {} is not supported (stored or deflated only)", where, m.method));
  }
  if (crc32_of(data) != m.crc) throw UsageError(where + ": CRC mismatch (corrupt file)");
  return data;
}

// --- safetensors ---------------------------------------------------------

const std::map<std::string, DType>& safetensors_dtypes() {
  static const std::map<std::string, DType> k{{"BF16", DType::kBF16}, {"F16", DType::kF16}, {"F32", DType::kF32},
                                               {"F64", DType::kF64},   {"U16", DType::kU16}, {"I16", DType::kI16},
                                               {"I32", DType::kI32},   {"I64", DType::kI64}, {"U8", DType::kU8}};
  return k;
}

std::string safetensors_name(DType t) {
  for (const auto& [name, d] : safetensors_dtypes())
    if (d == t) return name;
  return "?";
}

}  // namespace

// ---------------------------------------------------------------------------
// Readers

Tensor parse_npy(std::string_view b, const std::string& what) {
  const auto* p = ubytes(b);
  if (b.size() < 10 || b.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    throw UsageError(what + ": not a .npy file (no \\x93NUMPY magic)");
  const int major = p[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = load_le<uint16_t>(p + 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) throw UsageError(what + ": truncated .npy header");
    hlen = load_le<uint32_t>(p + 8);
    hstart = 12;
  } else {
    throw UsageError(fmt::format("{}: .npy format version {}.{} is not supported (1, 2, 3)", what, major, p[7]));
  }
  if (hstart + hlen > b.size()) throw UsageError(what + ": truncated .npy header");
  const json h = PyLiteral(b.substr(hstart, hlen), what).parse();
  if (!h.is_object() || !h.contains("descr") || !h.contains("shape"))
    throw UsageError(what + ": malformed .npy header (no 'descr' or 'shape')");
  if (!h["descr"].is_string())
    throw UsageError(what + ": structured dtypes are not supported (one numeric dtype per file)");
  Tensor t;
  t.dtype = npy_dtype(h["descr"].get<std::string>(), what);
  if (!h["shape"].is_array()) throw UsageError(what + ": malformed shape in .npy header");
  for (const json& s : h["shape"]) {
    if (!s.is_number_integer() || s.get<int64_t>() < 0) throw UsageError(what + ": malformed shape in .npy header");
    t.shape.push_back(s.get<int64_t>());
  }
  if (h.contains("fortran_order") && !h["fortran_order"].is_boolean())
    throw UsageError(what + ": malformed fortran_order in .npy header");
  const bool fortran = h.value("fortran_order", false);
  const size_t data = hstart + hlen;
  const uint64_t need = bytes_needed(t.shape, t.dtype);
  if (b.size() - data < need)
    throw UsageError(fmt::format("{}: truncated: shape {} of {} needs {} data bytes, the file has {}", what,
                                 shape_string(t.shape), dtype_name(t.dtype),
                                 need == UINT64_MAX ? std::string("over 2^64") : std::to_string(need), b.size() - data));
  const uint64_t n = t.numel();
  t.values = decode(b.substr(data, need), t.dtype, n);
  if (fortran && t.shape.size() > 1) {  // column-major on disk: reorder to C order
    std::vector<double> c(n);
    const size_t nd = t.shape.size();
    std::vector<int64_t> idx(nd, 0);
    for (uint64_t i = 0; i < n; ++i) {  // i: C-order position; idx its multi-index
      uint64_t f = 0, stride = 1;
      for (size_t k = 0; k < nd; ++k) {
        f += idx[k] * stride;
        stride *= t.shape[k];
      }
      c[i] = t.values[f];
      for (size_t k = nd; k-- > 0;) {
        if (++idx[k] < t.shape[k]) break;
        idx[k] = 0;
      }
    }
    t.values = std::move(c);
  }
  return t;
}

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

TensorMap read_npz(const std::string& path) {
  const std::string z = read_file(path);
  TensorMap out;
  for (const ZipMember& m : zip_directory(z, path)) {
    if (m.name.empty() || m.name.back() == '/') continue;  // directory entry
    std::string name = m.name;
    if (name.size() > 4 && name.ends_with(".npy")) name.resize(name.size() - 4);
    out[name] = parse_npy(zip_extract(z, m, path), fmt::format("{}[{}]", path, m.name));
  }
  return out;
}

TensorMap read_safetensors(const std::string& path) {
  const std::string b = read_file(path);
  if (b.size() < 8) throw UsageError(path + ": not a .safetensors file (shorter than its 8-byte header length)");
  const uint64_t hlen = load_le<uint64_t>(ubytes(b));
  if (hlen > b.size() - 8)
    throw UsageError(fmt::format("{}: truncated: header length {} exceeds the file ({} bytes)", path, hlen, b.size()));
  json h;
  try {
    h = json::parse(b.substr(8, hlen));
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("{}: malformed .safetensors JSON header ({})", path, e.what()));
  }
  if (!h.is_object()) throw UsageError(path + ": malformed .safetensors header (not a JSON object)");
  const std::string_view data = std::string_view(b).substr(8 + hlen);
  TensorMap out;
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    const std::string where = fmt::format("{}[{}]", path, name);
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw UsageError(where + ": header entry lacks dtype, shape or data_offsets");
    const std::string dt = e["dtype"].is_string() ? e["dtype"].get<std::string>() : "?";
    const auto it = safetensors_dtypes().find(dt);
    if (it == safetensors_dtypes().end())
      throw UsageError(fmt::format("{}: dtype {} is not supported (BF16, F16, F32, F64, I16, U16, I32, I64, U8)", where, dt));
    Tensor t;
    t.dtype = it->second;
    if (!e["shape"].is_array()) throw UsageError(where + ": malformed shape");
    for (const json& s : e["shape"]) {
      if (!s.is_number_integer() || s.get<int64_t>() < 0) throw UsageError(where + ": malformed shape");
      t.shape.push_back(s.get<int64_t>());
    }
    const json& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw UsageError(where + ": malformed data_offsets");
    const uint64_t begin = off[0], end = off[1];
    const uint64_t need = bytes_needed(t.shape, t.dtype);
    if (need == UINT64_MAX)
      throw UsageError(fmt::format("{}: malformed shape {} (more than 2^64 bytes)", where, shape_string(t.shape)));
    if (begin > end || end - begin != need)
      throw UsageError(fmt::format("{}: data_offsets [{}, {}] do not hold shape {} of {} ({} bytes)", where, begin, end,
                                   shape_string(t.shape), dt, need));
    if (end > data.size())
      throw UsageError(fmt::format("{}: truncated: data ends at byte {}, the file holds {}", where, end, data.size()));
    t.values = decode(data.substr(begin, need), t.dtype, t.numel());
    out[name] = std::move(t);
  }
  return out;
}

bool zlib_available() {
#ifdef CHUNKINV_HAVE_ZLIB
  return true;
#else
  return false;
#endif
}

// ---------------------------------------------------------------------------
// Writers

std::string npy_bytes(const Tensor& t) {
  std::string shape = "(";
  for (size_t k = 0; k < t.shape.size(); ++k) shape += fmt::format("{}{}", k ? ", " : "", t.shape[k]);
  if (t.shape.size() == 1) shape += ",";
  shape += ")";
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", npy_descr(t.dtype), shape);
  // Version 1.0; magic + version + length + header padded to 64 bytes, ending in '\n'.
  const size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  store_le<uint16_t>(out, static_cast<uint16_t>(header.size()));
  out += header;
  encode(t, out);
  return out;
}

void write_npy(const std::string& path, const Tensor& t) { write_file(path, npy_bytes(t)); }

void write_npz(const std::string& path, const TensorMap& tensors) {
  std::string z, cd;
  uint16_t count = 0;
  for (const auto& [name, t] : tensors) {
    const std::string member = name + ".npy";
    const std::string data = npy_bytes(t);
    if (data.size() >= 0xFFFFFFFFu || z.size() >= 0xFFFFFFFFu)
      throw UsageError(path + ": tensors too large for a plain zip (4 GiB); use .safetensors");
    const uint32_t crc = crc32_of(data), size = static_cast<uint32_t>(data.size()), offset = static_cast<uint32_t>(z.size());
    // Fixed date (1980-01-01 00:00) so that the same tensors give the same bytes.
    const auto common = [&](std::string& o) {
      store_le<uint16_t>(o, 20);      // version needed
      store_le<uint16_t>(o, 0);       // flags
      store_le<uint16_t>(o, 0);       // method: stored
      store_le<uint16_t>(o, 0);       // time
      store_le<uint16_t>(o, 0x21);    // date
      store_le<uint32_t>(o, crc);
      store_le<uint32_t>(o, size);    // compressed
      store_le<uint32_t>(o, size);    // uncompressed
      store_le<uint16_t>(o, static_cast<uint16_t>(member.size()));
      store_le<uint16_t>(o, 0);       // extra length
    };
    store_le<uint32_t>(z, 0x04034b50u);
    common(z);
    z += member;
    z += data;
    store_le<uint32_t>(cd, 0x02014b50u);
    store_le<uint16_t>(cd, 20);  // version made by
    common(cd);
    store_le<uint16_t>(cd, 0);  // comment length
    store_le<uint16_t>(cd, 0);  // disk
    store_le<uint16_t>(cd, 0);  // internal attributes
    store_le<uint32_t>(cd, 0);  // external attributes
    store_le<uint32_t>(cd, offset);
    cd += member;
    ++count;
  }
  const auto cd_off = static_cast<uint32_t>(z.size());
  z += cd;
  store_le<uint32_t>(z, 0x06054b50u);
  store_le<uint16_t>(z, 0);
  store_le<uint16_t>(z, 0);
  store_le<uint16_t>(z, count);
  store_le<uint16_t>(z, count);
  store_le<uint32_t>(z, static_cast<uint32_t>(cd.size()));
  store_le<uint32_t>(z, cd_off);
  store_le<uint16_t>(z, 0);
  write_file(path, z);
}

void write_safetensors(const std::string& path, const TensorMap& tensors) {
  json h = json::object();
  std::string data;
  for (const auto& [name, t] : tensors) {
    const uint64_t begin = data.size();
    encode(t, data);
    h[name] = {{"dtype", safetensors_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // data aligned to 8 bytes
  std::string out;
  store_le<uint64_t>(out, header.size());
  out += header;
  out += data;
  write_file(path, out);
}

// ---------------------------------------------------------------------------
// Tensor sets

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

}  // namespace

TensorSet load_tensor_set(const std::string& path) {
  try {
    std::error_code ec;
    std::map<std::string, Found> found;
    const std::array<const char*, 3> names{"keys", "g", "beta"};
    if (fs::is_directory(path, ec)) {
      for (const char* n : names) {
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
      TensorMap all;
      if (path.ends_with(".npz")) {
        all = read_npz(path);
      } else if (path.ends_with(".safetensors")) {
        all = read_safetensors(path);
      } else {
        throw UsageError(path + ": not a directory of .npy files, an .npz or a .safetensors file");
      }
      for (const char* n : names) {
        auto it = all.find(n);
        if (it == all.end()) {
          std::vector<std::string> have;
          for (const auto& [k, v] : all) have.push_back(k);
          throw UsageError(fmt::format("{}: tensor '{}' is missing (found: {})", path, n,
                                       have.empty() ? "none" : fmt::format("{}", fmt::join(have, ", "))));
        }
        found[n] = {std::move(it->second), fmt::format("{}[{}]", path, n)};
      }
    }
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
