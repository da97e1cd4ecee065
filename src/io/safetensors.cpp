#include "io/safetensors.hpp"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace chunkinv {
using nlohmann::json;

namespace {

// The reference reader refuses headers over 100 MB; so does this one.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Far deeper than any header ({"name": {"shape": [...]}} is 3).
constexpr int kMaxDepth = 64;

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

bool json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string byte_text(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x20 && u < 0x7F ? fmt::format("'{}'", c) : fmt::format("0x{:02x}", u);
}

// One past the end of the header's top-level JSON object, found by counting
// brackets outside strings; refuses nesting deeper than kMaxDepth before the
// JSON parser sees it, and anything but whitespace after the object (the
// parser would stop silently at a NUL).
size_t header_json_end(std::string_view h, const std::string& what) {
  size_t i = 0;
  while (i < h.size() && json_space(h[i])) ++i;
  if (i == h.size() || h[i] != '{')
    throw UsageError(fmt::format("{}: malformed .safetensors header (does not start with '{{')", what));
  int depth = 0;
  bool in_string = false;
  size_t end = h.size();
  for (; i < h.size(); ++i) {
    const char c = h[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxDepth)
        throw UsageError(fmt::format("{}: malformed .safetensors header (JSON nested deeper than {} at byte {})", what,
                                     kMaxDepth, 8 + i));
    } else if (c == '}' || c == ']') {
      if (--depth == 0) {
        end = i + 1;
        break;
      }
    }
  }
  for (size_t j = end; j < h.size(); ++j)
    if (!json_space(h[j]))
      throw UsageError(fmt::format("{}: malformed .safetensors header (byte {} after the JSON is {}; only spaces may pad it)",
                                   what, 8 + j, byte_text(h[j])));
  return end;
}

// The JSON header, refusing duplicate keys (a JSON parser keeps one of them
// silently: two readers of one file would see different tensors).
json parse_header(std::string_view h, const std::string& what) {
  const std::string_view text = h.substr(0, header_json_end(h, what));
  std::vector<std::set<std::string>> keys;  // per open object
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (event == json::parse_event_t::key && !keys.empty()) {
      const std::string k = parsed.get<std::string>();
      if (!keys.back().insert(k).second) {
        if (depth == 1) throw UsageError(fmt::format("{}[{}]: tensor appears twice in the header", what, k));
        throw UsageError(fmt::format("{}: malformed .safetensors header (key '{}' appears twice in one object)", what, k));
      }
    }
    return true;
  };
  try {
    return json::parse(text, check);
  } catch (const json::exception& e) {
    throw UsageError(fmt::format("{}: malformed .safetensors JSON header ({})", what, e.what()));
  }
}

struct Placed {
  std::string name;
  uint64_t begin, end;
};

// The header's length from the file's first 8 bytes `b`, checked against the file's `size`.
uint64_t header_length(std::string_view b, uint64_t size, const std::string& what) {
  if (size < 8 || b.size() < 8)
    throw UsageError(what + ": not a .safetensors file (shorter than its 8-byte header length)");
  const uint64_t hlen = load_le<uint64_t>(ubytes(b));
  if (hlen > size - 8)
    throw UsageError(fmt::format("{}: truncated: header length {} exceeds the file ({} bytes)", what, hlen, size));
  if (hlen > kMaxHeaderBytes)
    throw UsageError(fmt::format("{}: header length {} exceeds the {} bytes a .safetensors header may have", what, hlen,
                                 kMaxHeaderBytes));
  return hlen;
}

// The tensors (dtype and shape, no values) a file of `size` bytes declares,
// from its first bytes `b` (the header at least), every check made but
// decoding: where each tensor's data lies is `placed` (within the data,
// which starts at byte 8 + the header's length).
TensorMap parse_layout(std::string_view b, uint64_t size, const std::string& what, std::vector<Placed>& placed) {
  const uint64_t hlen = header_length(b, size, what);
  if (b.size() - 8 < hlen) throw UsageError(fmt::format("{}: truncated header", what));
  const json h = parse_header(b.substr(8, hlen), what);
  if (!h.is_object()) throw UsageError(what + ": malformed .safetensors header (not a JSON object)");
  const uint64_t data_size = size - 8 - hlen;
  TensorMap out;
  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    const std::string where = fmt::format("{}[{}]", what, name);
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      throw UsageError(where + ": header entry lacks dtype, shape or data_offsets");
    const std::string dt = e["dtype"].is_string() ? e["dtype"].get<std::string>() : "?";
    const auto it = safetensors_dtypes().find(dt);
    if (it == safetensors_dtypes().end())
      throw UsageError(fmt::format("{}: dtype {} is not supported (BF16, F16, F32, F64, I16, U16, I32, I64, U8)", where, dt));
    Tensor t;
    t.dtype = it->second;
    const json& shape = e["shape"];
    if (!shape.is_array()) throw UsageError(where + ": malformed shape");
    if (shape.size() > kMaxRank)
      throw UsageError(fmt::format("{}: malformed shape: rank {} exceeds {}", where, shape.size(), kMaxRank));
    for (const json& s : shape) {
      if (!s.is_number_integer()) throw UsageError(where + ": malformed shape (a dimension is not an integer)");
      if (s.is_number_unsigned() && s.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        throw UsageError(fmt::format("{}: malformed shape: dimension {} is too large", where, s.get<uint64_t>()));
      t.shape.push_back(s.get<int64_t>());
    }
    check_shape(t.shape, t.dtype, where);
    const json& off = e["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw UsageError(where + ": malformed data_offsets");
    const uint64_t begin = off[0], end = off[1];
    const uint64_t need = *bytes_needed(t.shape, t.dtype);
    if (begin > end) throw UsageError(fmt::format("{}: data_offsets [{}, {}] are out of order (begin after end)", where, begin, end));
    if (end - begin != need)
      throw UsageError(fmt::format("{}: data_offsets [{}, {}] do not hold shape {} of {} ({} bytes)", where, begin, end,
                                   shape_string(t.shape), dt, need));
    if (end > data_size)
      throw UsageError(fmt::format("{}: truncated: data ends at byte {}, the file holds {}", where, end, data_size));
    placed.push_back({name, begin, end});
    out[name].dtype = t.dtype;
    out[name].shape = std::move(t.shape);
  }
  // The tensors must tile the data: what overlaps is read twice, a gap or a
  // tail is data no tensor owns.
  std::stable_sort(placed.begin(), placed.end(),
                   [](const Placed& a, const Placed& c) { return std::pair(a.begin, a.end) < std::pair(c.begin, c.end); });
  uint64_t at = 0;
  const Placed* prev = nullptr;
  for (const Placed& p : placed) {
    if (p.begin < at)
      throw UsageError(fmt::format("{}[{}]: data_offsets [{}, {}] overlap tensor '{}' [{}, {}]", what, p.name, p.begin, p.end,
                                   prev->name, prev->begin, prev->end));
    if (p.begin > at)
      throw UsageError(fmt::format("{}[{}]: data_offsets [{}, {}] leave bytes [{}, {}) of the data unused", what, p.name,
                                   p.begin, p.end, at, p.begin));
    at = p.end;
    prev = &p;
  }
  if (at != data_size)
    throw UsageError(fmt::format("{}: {} bytes after the last tensor's data (the tensors end at byte {} of {})", what,
                                 data_size - at, at, data_size));
  return out;
}

}  // namespace

TensorMap parse_safetensors(std::string_view b, const std::string& what) {
  std::vector<Placed> placed;
  TensorMap out = parse_layout(b, b.size(), what, placed);
  const std::string_view data = b.substr(8 + load_le<uint64_t>(ubytes(b)));
  // Decoded only now, once the layout is known to be sound.
  for (const Placed& p : placed) {
    Tensor& t = out[p.name];
    t.values = decode(data.substr(p.begin, p.end - p.begin), t.dtype, t.numel());
  }
  return out;
}

TensorMap read_safetensors(const std::string& path) { return parse_safetensors(read_file(path), path); }

TensorMap read_safetensors_header(const std::string& path) {
  uint64_t size = 0;
  const std::string first = read_file_prefix(path, 8, &size);
  const std::string head = read_file_prefix(path, 8 + header_length(first, size, path), &size);
  std::vector<Placed> placed;
  return parse_layout(head, size, path, placed);
}

std::string safetensors_bytes(const TensorMap& tensors) {
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
  return out;
}

void write_safetensors(const std::string& path, const TensorMap& tensors) { write_file(path, safetensors_bytes(tensors)); }

}  // namespace chunkinv
