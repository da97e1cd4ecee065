#include "io/zip.hpp"

#include <algorithm>
#include <array>
#include <climits>
#include <set>

#include <fmt/format.h>

#ifdef CHUNKINV_HAVE_ZLIB
#include <zlib.h>
#endif

#include "core/error.hpp"
#include "io/npy.hpp"

namespace chunkinv {

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

bool zlib_available() {
#ifdef CHUNKINV_HAVE_ZLIB
  return true;
#else
  return false;
#endif
}

namespace {

constexpr uint32_t kLocalSig = 0x04034b50u, kCentralSig = 0x02014b50u, kEndSig = 0x06054b50u,
                   kZip64EndSig = 0x06064b50u, kZip64LocatorSig = 0x07064b50u;
constexpr uint64_t kLocalHeader = 30, kCentralHeader = 46, kEndRecord = 22, kZip64End = 56, kZip64Locator = 20;

// Exactly `out_size` bytes from the raw deflate stream `in`; a stream that
// ends early, runs on past the declared size or is corrupt is an error.
// `prefix`: the first out_size bytes of a longer stream (a member's header).
std::string inflate_raw(std::string_view in, uint64_t out_size, const std::string& where, bool prefix = false) {
#ifdef CHUNKINV_HAVE_ZLIB
  std::string out(out_size, '\0');
  z_stream zs{};
  if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) throw UsageError(where + ": zlib initialisation failed");
  struct End {
    z_stream& zs;
    ~End() { inflateEnd(&zs); }
  } end{zs};
  // zlib counts in uInt (32 bits): feed and drain in slices.
  constexpr uint64_t kSlice = uint64_t{1} << 30;
  uint64_t in_pos = 0, out_pos = 0;
  unsigned char spill = 0;  // one byte beyond the declared size, to notice a stream that goes on
  bool spilled = false;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs.avail_in == 0 && in_pos < in.size()) {
      const uint64_t n = std::min<uint64_t>(kSlice, in.size() - in_pos);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_pos));
      zs.avail_in = static_cast<uInt>(n);
      in_pos += n;
    }
    if (zs.avail_out == 0) {
      if (out_pos < out_size) {
        const uint64_t n = std::min<uint64_t>(kSlice, out_size - out_pos);
        zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_pos);
        zs.avail_out = static_cast<uInt>(n);
        out_pos += n;
      } else if (prefix) {
        break;
      } else if (!spilled) {
        zs.next_out = &spill;
        zs.avail_out = 1;
        spilled = true;
      } else {
        throw UsageError(fmt::format("{}: deflated data inflates to more than the {} bytes declared", where, out_size));
      }
    }
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc == Z_BUF_ERROR && zs.avail_in == 0 && in_pos == in.size())
      throw UsageError(fmt::format("{}: deflated data is truncated: it ends after {} of the {} bytes declared", where,
                                   static_cast<uint64_t>(zs.total_out), out_size));
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
      throw UsageError(fmt::format("{}: deflated data is corrupt (zlib code {}{}{})", where, rc, zs.msg ? ": " : "",
                                   zs.msg ? zs.msg : ""));
  }
  const auto produced = static_cast<uint64_t>(zs.total_out);
  if (prefix) {
    out.resize(produced);
    return out;
  }
  if (produced > out_size)
    throw UsageError(fmt::format("{}: deflated data inflates to more than the {} bytes declared", where, out_size));
  if (produced != out_size)
    throw UsageError(fmt::format("{}: deflated data inflates to {} bytes, not the {} declared", where, produced, out_size));
  return out;
#else
  (void)in;
  (void)out_size;
  (void)prefix;
  throw UsageError(where + ": member is deflated (np.savez_compressed) and this build has no zlib; "
                           "save with np.savez or rebuild with zlib");
#endif
}

}  // namespace

std::vector<ZipMember> zip_directory(std::string_view z, const std::string& what) {
  const auto* p = ubytes(z);
  const uint64_t size = z.size();
  const auto bad = [&](const std::string& msg) { return UsageError(fmt::format("{}: not a valid .npz (zip) file: {}", what, msg)); };
  if (size < kEndRecord) throw bad("too short");
  // End of central directory: the last signature within the final 64 KiB.
  uint64_t eocd = UINT64_MAX;
  for (uint64_t i = size - kEndRecord + 1; i-- > 0 && size - i <= kEndRecord + 65535;) {
    if (load_le<uint32_t>(p + i) == kEndSig) {
      eocd = i;
      break;
    }
  }
  if (eocd == UINT64_MAX) throw bad("no end-of-central-directory record (truncated?)");
  uint64_t entries = load_le<uint16_t>(p + eocd + 10);
  uint64_t cd_size = load_le<uint32_t>(p + eocd + 12);
  uint64_t cd_off = load_le<uint32_t>(p + eocd + 16);
  if ((entries == 0xFFFF || cd_off == 0xFFFFFFFFu || cd_size == 0xFFFFFFFFu) && eocd >= kZip64Locator &&
      load_le<uint32_t>(p + eocd - kZip64Locator) == kZip64LocatorSig) {
    const uint64_t z64 = load_le<uint64_t>(p + eocd - kZip64Locator + 8);
    if (!in_bounds(z64, kZip64End, eocd - kZip64Locator))
      throw bad(fmt::format("ZIP64 end record at byte {} does not fit in the file ({} bytes; truncated?)", z64, size));
    if (load_le<uint32_t>(p + z64) != kZip64EndSig) throw bad(fmt::format("no ZIP64 end record at byte {}", z64));
    entries = load_le<uint64_t>(p + z64 + 32);
    cd_size = load_le<uint64_t>(p + z64 + 40);
    cd_off = load_le<uint64_t>(p + z64 + 48);
  }
  if (!in_bounds(cd_off, cd_size, size))
    throw bad(fmt::format("central directory at byte {} ({} bytes) lies beyond the end of the file ({} bytes; truncated?)",
                          cd_off, cd_size, size));
  if (entries > cd_size / kCentralHeader)
    throw bad(fmt::format("a central directory of {} bytes cannot hold {} entries", cd_size, entries));
  const uint64_t cd_end = cd_off + cd_size;
  std::vector<ZipMember> members;
  members.reserve(entries);
  std::set<std::string> names;
  const uint64_t limit = max_tensor_bytes();
  uint64_t total = 0;
  uint64_t q = cd_off;
  for (uint64_t e = 0; e < entries; ++e) {
    if (!in_bounds(q, kCentralHeader, cd_end) || load_le<uint32_t>(p + q) != kCentralSig)
      throw bad(fmt::format("corrupt central directory (entry {} at byte {})", e, q));
    ZipMember m;
    const uint16_t flags = load_le<uint16_t>(p + q + 8);
    m.method = load_le<uint16_t>(p + q + 10);
    m.crc = load_le<uint32_t>(p + q + 16);
    m.csize = load_le<uint32_t>(p + q + 20);
    m.usize = load_le<uint32_t>(p + q + 24);
    const uint16_t nlen = load_le<uint16_t>(p + q + 28), xlen = load_le<uint16_t>(p + q + 30),
                   clen = load_le<uint16_t>(p + q + 32);
    m.offset = load_le<uint32_t>(p + q + 42);
    if (!in_bounds(q + kCentralHeader, uint64_t{nlen} + xlen + clen, cd_end))
      throw bad(fmt::format("corrupt central directory (entry {} at byte {} runs past its end)", e, q));
    m.name.assign(z.substr(q + kCentralHeader, nlen));
    if (flags & 1) throw UsageError(fmt::format("{}: member {} is encrypted", what, m.name));
    // ZIP64 extra field: the 64-bit values of the fields saturated above, in
    // this order, each present only if its field is saturated.
    const uint64_t extra_end = q + kCentralHeader + nlen + xlen;
    for (uint64_t x = q + kCentralHeader + nlen; x + 4 <= extra_end;) {
      const uint16_t id = load_le<uint16_t>(p + x), len = load_le<uint16_t>(p + x + 2);
      const uint64_t field_end = std::min<uint64_t>(x + 4 + len, extra_end);
      if (id == 0x0001) {
        uint64_t f = x + 4;
        for (uint64_t* field : {&m.usize, &m.csize, &m.offset}) {
          if (*field == 0xFFFFFFFFu && f + 8 <= field_end) {
            *field = load_le<uint64_t>(p + f);
            f += 8;
          }
        }
      }
      x += 4 + uint64_t{len};
    }
    q = extra_end + clen;
    const std::string where = fmt::format("{}[{}]", what, m.name);
    if (!names.insert(m.name).second) throw UsageError(where + ": the archive holds two members of this name");
    // The local header's own name and extra lengths say where the data starts.
    if (!in_bounds(m.offset, kLocalHeader, size) || load_le<uint32_t>(p + m.offset) != kLocalSig)
      throw UsageError(fmt::format("{}: no local header at byte {} (truncated?)", where, m.offset));
    m.data = m.offset + kLocalHeader + load_le<uint16_t>(p + m.offset + 26) + load_le<uint16_t>(p + m.offset + 28);
    if (!in_bounds(m.data, m.csize, size))
      throw UsageError(fmt::format("{}: data of {} bytes at byte {} lies beyond the end of the file ({} bytes; truncated?)",
                                   where, m.csize, m.data, size));
    // Declared sizes against the limit, before anything is allocated.
    if (m.usize > limit - total)
      throw UsageError(fmt::format("{}: declared size of {} bytes{} {}", where, m.usize,
                                   total ? fmt::format(" (after {} bytes in the members before it)", total) : "",
                                   tensor_limit_text()));
    total += m.usize;
    members.push_back(std::move(m));
  }
  // Members must not share bytes: overlapping members are how a small
  // archive claims gigabytes many times over.
  std::vector<const ZipMember*> by_offset;
  for (const ZipMember& m : members) by_offset.push_back(&m);
  std::sort(by_offset.begin(), by_offset.end(), [](const ZipMember* a, const ZipMember* b) { return a->offset < b->offset; });
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const ZipMember& m = *by_offset[i];
    const bool last = i + 1 == by_offset.size();
    const uint64_t next = !last ? by_offset[i + 1]->offset : m.offset < cd_off ? cd_off : size;
    if (m.data + m.csize > next)
      throw UsageError(fmt::format("{}[{}]: data at bytes [{}, {}) overlaps the {} at byte {}", what, m.name, m.data,
                                   m.data + m.csize,
                                   !last ? "member " + by_offset[i + 1]->name
                                         : std::string(m.offset < cd_off ? "central directory" : "end of the file"),
                                   next));
  }
  return members;
}

std::string zip_extract(std::string_view z, const ZipMember& m, const std::string& what) {
  const std::string where = fmt::format("{}[{}]", what, m.name);
  if (!in_bounds(m.data, m.csize, z.size())) throw UsageError(where + ": data beyond the end of the file (truncated?)");
  const std::string_view raw = z.substr(m.data, m.csize);
  std::string data;
  if (m.method == 0) {
    if (m.csize != m.usize) throw UsageError(where + ": stored member with inconsistent sizes");
    data.assign(raw);
  } else if (m.method == 8) {
    // Deflate expands at most 1032:1; a larger claim is a lie about the size.
    if (m.usize / 1032 > m.csize + 1) throw UsageError(where + ": corrupt sizes (more than deflate can expand to)");
    data = inflate_raw(raw, m.usize, where);
  } else {
    throw UsageError(fmt::format("{}: compression method {} is not supported (stored or deflated only)", where, m.method));
  }
  if (crc32_of(data) != m.crc) throw UsageError(where + ": CRC mismatch (corrupt file)");
  return data;
}

TensorMap parse_npz(std::string_view z, const std::string& what) {
  TensorMap out;
  std::map<std::string, std::string> member_of;  // tensor name -> member name
  for (const ZipMember& m : zip_directory(z, what)) {
    if (m.name.empty() || m.name.back() == '/') continue;  // directory entry
    std::string name = m.name;
    if (name.size() > 4 && name.ends_with(".npy")) name.resize(name.size() - 4);
    const auto [it, fresh] = member_of.emplace(name, m.name);
    if (!fresh)
      throw UsageError(fmt::format("{}[{}]: tensor '{}' is also given by member {}", what, m.name, name, it->second));
    out[name] = parse_npy(zip_extract(z, m, what), fmt::format("{}[{}]", what, m.name));
  }
  return out;
}

TensorMap read_npz(const std::string& path) { return parse_npz(read_file(path), path); }

TensorMap read_npz_headers(const std::string& path) {
  const MappedFile file(path);
  const std::string_view z = file.bytes();
  TensorMap out;
  for (const ZipMember& m : zip_directory(z, path)) {
    if (m.name.empty() || m.name.back() == '/') continue;
    const std::string where = fmt::format("{}[{}]", path, m.name);
    if (!in_bounds(m.data, m.csize, z.size())) throw UsageError(where + ": data beyond the end of the file (truncated?)");
    const uint64_t n = std::min(m.usize, kMaxHeaderPrefix);
    std::string head;
    if (m.method == 0) head.assign(z.substr(m.data, std::min(m.csize, n)));
    else if (m.method == 8) head = inflate_raw(z.substr(m.data, m.csize), n, where, true);
    else throw UsageError(fmt::format("{}: compression method {} is not supported (stored or deflated only)", where, m.method));
    std::string name = m.name;
    if (name.size() > 4 && name.ends_with(".npy")) name.resize(name.size() - 4);
    out[name] = npy_header(head, m.usize, where);
  }
  return out;
}

std::string npz_bytes(const TensorMap& tensors, const std::string& what) {
  std::string z, cd;
  uint16_t count = 0;
  for (const auto& [name, t] : tensors) {
    const std::string member = name + ".npy";
    const std::string data = npy_bytes(t);
    if (data.size() >= 0xFFFFFFFFu || z.size() >= 0xFFFFFFFFu)
      throw UsageError(what + ": tensors too large for a plain zip (4 GiB); use .safetensors");
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
    store_le<uint32_t>(z, kLocalSig);
    common(z);
    z += member;
    z += data;
    store_le<uint32_t>(cd, kCentralSig);
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
  store_le<uint32_t>(z, kEndSig);
  store_le<uint16_t>(z, 0);
  store_le<uint16_t>(z, 0);
  store_le<uint16_t>(z, count);
  store_le<uint16_t>(z, count);
  store_le<uint32_t>(z, static_cast<uint32_t>(cd.size()));
  store_le<uint32_t>(z, cd_off);
  store_le<uint16_t>(z, 0);
  return z;
}

void write_npz(const std::string& path, const TensorMap& tensors) { write_file(path, npz_bytes(tensors, path)); }

}  // namespace chunkinv
