#include "io/npy.hpp"

#include <cctype>
#include <cstring>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/text.hpp"

namespace chunkinv {
using nlohmann::json;

namespace {

// NumPy refuses headers over 10000 bytes unless told otherwise; a longer one
// here is corrupt, and parsing it would only cost memory.
constexpr size_t kMaxHeaderBytes = size_t{1} << 20;
static_assert(kMaxHeaderPrefix == 12 + kMaxHeaderBytes);  // magic, version, length, the longest header

// The header dict is a Python literal; this reads the subset NumPy writes
// (strings, ints, True/False/None, tuples, lists, dicts) into JSON. After
// the dict only whitespace may follow (NumPy pads with spaces and '\n').
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
    fail(fmt::format("unexpected character '{}'", std::isprint(static_cast<unsigned char>(c))
                                                       ? std::string(1, c)
                                                       : fmt::format("\\x{:02x}", static_cast<unsigned char>(c))));
  }
  json string() {
    const char q = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != q) {
      // No dtype or key holds a backslash; Python would read '<\f4' as a
      // form feed, not as '<f4'.
      if (s_[i_] == '\\') fail("a backslash in a string");
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

}  // namespace

namespace {

// The header of a .npy file whose first bytes are `b` (all of it, or a
// prefix holding the header) and whose whole size is `size`: the tensor
// without values, its order, and where its data starts.
struct NpyLayout {
  Tensor t;
  bool fortran = false;
  uint64_t data = 0;
};

NpyLayout parse_header(std::string_view b, uint64_t size, const std::string& what) {
  const auto* p = ubytes(b);
  if (b.size() < 10 || b.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    throw UsageError(what + ": not a .npy file (no \\x93NUMPY magic)");
  const int major = p[6];
  uint64_t hlen, hstart;
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
  if (!in_bounds(hstart, hlen, size)) throw UsageError(what + ": truncated .npy header");
  if (hlen > kMaxHeaderBytes)
    throw UsageError(fmt::format("{}: .npy header of {} bytes is longer than the {} allowed", what, hlen,
                                 byte_count_text(kMaxHeaderBytes)));
  if (!in_bounds(hstart, hlen, b.size())) throw UsageError(what + ": truncated .npy header");
  const json h = PyLiteral(b.substr(hstart, hlen), what).parse();
  if (!h.is_object() || !h.contains("descr") || !h.contains("shape"))
    throw UsageError(what + ": malformed .npy header (no 'descr' or 'shape')");
  for (const auto& [k, v] : h.items())  // as NumPy: these keys and no other
    if (k != "descr" && k != "shape" && k != "fortran_order")
      throw UsageError(fmt::format("{}: malformed .npy header (key '{}'; only 'descr', 'fortran_order' and 'shape')", what,
                                   printable(k.size() > 40 ? k.substr(0, 37) + "..." : k)));
  if (!h["descr"].is_string())
    throw UsageError(what + ": structured dtypes are not supported (one numeric dtype per file)");
  NpyLayout l;
  Tensor& t = l.t;
  t.dtype = npy_dtype(h["descr"].get<std::string>(), what);
  if (!h["shape"].is_array()) throw UsageError(what + ": malformed shape in .npy header");
  if (h["shape"].size() > kMaxRank)
    throw UsageError(fmt::format("{}: malformed shape in .npy header: rank {} exceeds {}", what, h["shape"].size(), kMaxRank));
  for (const json& s : h["shape"]) {
    if (!s.is_number_integer()) throw UsageError(what + ": malformed shape in .npy header");
    t.shape.push_back(s.get<int64_t>());
  }
  check_shape(t.shape, t.dtype, what);
  if (h.contains("fortran_order") && !h["fortran_order"].is_boolean())
    throw UsageError(what + ": malformed fortran_order in .npy header");
  l.fortran = h.value("fortran_order", false);
  l.data = hstart + hlen;
  const uint64_t need = *bytes_needed(t.shape, t.dtype);
  if (size - l.data < need)
    throw UsageError(fmt::format("{}: truncated: shape {} of {} needs {} data bytes, the file has {}", what,
                                 shape_string(t.shape), dtype_name(t.dtype), need, size - l.data));
  return l;
}

}  // namespace

Tensor npy_header(std::string_view b, uint64_t size, const std::string& what) {
  return parse_header(b.substr(0, std::min<uint64_t>(b.size(), kMaxHeaderPrefix)), size, what).t;
}

Tensor read_npy_header(const std::string& path) {
  uint64_t size = 0;
  const std::string head = read_file_prefix(path, kMaxHeaderPrefix, &size);
  return npy_header(head, size, path);
}

Tensor parse_npy(std::string_view b, const std::string& what) {
  NpyLayout l = parse_header(b, b.size(), what);
  Tensor& t = l.t;
  const bool fortran = l.fortran;
  const uint64_t data = l.data;
  const uint64_t need = *bytes_needed(t.shape, t.dtype);
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
  return std::move(l.t);
}

Tensor read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

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

}  // namespace chunkinv
