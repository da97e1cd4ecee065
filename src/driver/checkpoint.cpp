#include "driver/checkpoint.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nettle/sha2.h>

#include "core/error.hpp"
#include "core/output_file.hpp"
#include "driver/runner.hpp"

namespace chunkinv {
namespace {

using nlohmann::json;

constexpr char kMagic[4] = {'c', 'k', 'i', 'v'};
constexpr const char* kFormat = "chunkinv.checkpoint/2";  // /2: SHA-256 for FNV-1a
enum Kind : uint32_t { kIdentity = 1, kGroup = 2, kBlock = 3, kState = 4 };
constexpr size_t kHeader = 4 + 4 + 8, kTrailer = SHA256_DIGEST_SIZE;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A record's checksum: SHA-256 (nettle, a maintained Debian package) of
// its kind, length and payload, stronger against damage than the 64-bit
// FNV-1a of /1. No checksum stops a deliberate edit: the validation of the
// records against the run's own configuration does.
std::string checksum(const char* p, size_t n) {
  sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, n, reinterpret_cast<const uint8_t*>(p));
  std::string d(SHA256_DIGEST_SIZE, '\0');
  sha256_digest(&ctx, SHA256_DIGEST_SIZE, reinterpret_cast<uint8_t*>(d.data()));
  return d;
}

template <class T>
void put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
T get(const std::string& s, size_t& at) {
  if (at + sizeof(T) > s.size()) throw UsageError("a block is cut short");
  T v;
  std::memcpy(&v, s.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

// A sketch's state in binary: counts, min, max, the sum's hexadecimal
// digits, the buckets. Written straight from the buckets (a state can hold
// tens of thousands), read back with every length and key checked.
void put_sketch(std::string& p, const SketchState& s) {
  for (uint64_t n : {s.count, s.nan, s.neg_inf, s.pos_inf, s.zeros}) put(p, n);
  put(p, s.min);
  put(p, s.max);
  const std::string sum = s.sum.to_hex();
  put(p, uint64_t(sum.size()));
  p += sum;
  for (const std::vector<SketchBucket>* b : {&s.neg, &s.pos}) {
    put(p, uint64_t(b->size()));
    for (const SketchBucket& x : *b) {
      put(p, x.key);
      put(p, x.count);
    }
  }
}

SketchState get_sketch(const std::string& p, size_t& at) {
  SketchState s;
  for (uint64_t* n : {&s.count, &s.nan, &s.neg_inf, &s.pos_inf, &s.zeros}) *n = get<uint64_t>(p, at);
  s.min = get<double>(p, at);
  s.max = get<double>(p, at);
  const uint64_t digits = get<uint64_t>(p, at);
  if (digits > 1024 || digits > p.size() - at) throw UsageError("a state's sum is cut short");
  s.sum = ExactSum::from_hex(std::string_view(p).substr(at, digits));
  at += digits;
  uint64_t total = s.nan + s.neg_inf + s.pos_inf + s.zeros;
  for (std::vector<SketchBucket>* b : {&s.neg, &s.pos}) {
    const uint64_t n = get<uint64_t>(p, at);
    if (n > (p.size() - at) / 12) throw UsageError("a state's buckets are cut short");
    b->resize(n);
    for (SketchBucket& x : *b) {
      x.key = get<int32_t>(p, at);
      x.count = get<uint64_t>(p, at);
      if (x.key < kSketchKeyMin || x.key > kSketchKeyMax || (&x != b->data() && x.key <= (&x - 1)->key))
        throw UsageError("a state's bucket keys are out of range or order");
      total += x.count;
    }
  }
  if (total != s.count) throw UsageError("a state's counts do not add up");
  check_state_bounds(s);
  return s;
}

// A record whose payload follows kHeader bytes kept free at the start of
// `r`: the header goes into them and the checksum after (no copy of a
// large payload).
void frame(uint32_t kind, std::string& r) {
  const uint64_t len = r.size() - kHeader;
  std::memcpy(r.data(), kMagic, 4);
  std::memcpy(r.data() + 4, &kind, 4);
  std::memcpy(r.data() + 8, &len, 8);
  r += checksum(r.data() + 4, r.size() - 4);
}

std::string record(uint32_t kind, const std::string& payload) {
  std::string r(kHeader, '\0');
  r += payload;
  frame(kind, r);
  return r;
}

struct Record {
  uint32_t kind;
  std::string payload;
};

// The whole records of `bytes`; `valid` is where the last one ends (a
// record cut short or damaged, and everything after it, is dropped).
std::vector<Record> parse_records(const std::string& bytes, size_t& valid) {
  std::vector<Record> out;
  size_t at = 0;
  valid = 0;
  while (at + kHeader + kTrailer <= bytes.size() && std::memcmp(bytes.data() + at, kMagic, 4) == 0) {
    uint32_t kind;
    uint64_t len;
    std::memcpy(&kind, bytes.data() + at + 4, 4);
    std::memcpy(&len, bytes.data() + at + 8, 8);
    if (len > bytes.size() - at - kHeader - kTrailer) break;
    if (bytes.compare(at + kHeader + len, kTrailer, checksum(bytes.data() + at + 4, kHeader - 4 + len)) != 0) break;
    out.push_back({kind, bytes.substr(at + kHeader, len)});
    at += kHeader + len + kTrailer;
    valid = at;
  }
  return out;
}

std::string shorten(const std::string& s) { return s.size() <= 100 ? s : s.substr(0, 97) + "..."; }

// An entry's axes as name=value pairs; anything else as JSON.
std::string words(const json& v) {
  if (!v.is_object()) return shorten(v.dump());
  std::string s;
  for (const auto& [k, x] : v.items()) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, x.is_string() ? x.get<std::string>() : x.dump());
  return shorten(s);
}

// The first difference between two identities, in words.
std::string first_difference(const json& there, const json& here) {
  // The build first, then what a user types, then what follows from it.
  std::vector<std::string> keys{"version", "git_commit", "experiment", "paths", "seed", "samples", "per_sample", "entries"};
  for (const json* j : {&here, &there})
    for (const auto& [k, v] : j->items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const std::string& k : keys) {
    const json a = there.value(k, json()), b = here.value(k, json());
    if (a == b) continue;
    if (a.is_array() && b.is_array()) {
      for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
        const std::string x = i < a.size() ? words(a[i]) : "none", y = i < b.size() ? words(b[i]) : "none";
        if (x != y)
          return fmt::format("{} [{}]: {} there, {} here; {} there, {} here in all", k, i, x, y, a.size(), b.size());
      }
    }
    return fmt::format("{}: {} there, {} here", k, words(a), words(b));
  }
  return "";
}

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string no_checkpoint(const std::string& path) {
  return fmt::format("--resume: no checkpoint {} (the run finished, or never started); run without --resume", path);
}

// Opens the checkpoint at `path` (made empty where `create` and missing)
// and takes its exclusive lock without waiting. The lock is on the file
// the name holds when it is taken: a name replaced or removed in between
// (by the run that held it) is opened again. Only a regular file is
// opened for what it holds: a FIFO would block, /dev/zero never end.
int lock(const std::string& path, bool create) {
  for (int tries = 0; tries < 100; ++tries) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (create ? O_CREAT : 0), 0666);
    if (fd < 0) {
      if (errno == ENOENT && !create) throw UsageError(no_checkpoint(path));
      throw UsageError(fmt::format("checkpoint {}: cannot be opened ({})", path, std::strerror(errno)));
    }
    struct stat held {}, named {};
    if (::fstat(fd, &held) != 0 || !S_ISREG(held.st_mode)) {
      ::close(fd);
      throw UsageError(fmt::format("checkpoint {}: is {}, not a regular file; delete it", path, file_kind(held.st_mode)));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      ::close(fd);
      if (e == EWOULDBLOCK)
        throw UsageError(fmt::format("checkpoint {}: another run of this report holds it; let that one finish, or write "
                                     "the report elsewhere",
                                     path));
      throw UsageError(fmt::format("checkpoint {}: cannot be locked ({})", path, std::strerror(e)));
    }
    if (::stat(path.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino) return fd;
    ::close(fd);
  }
  throw UsageError(fmt::format("checkpoint {}: keeps being replaced while it is opened", path));
}

// From now on writes go to the end, after whatever is there.
void append_from_now(int fd, const std::string& path) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_APPEND) != 0)
    throw UsageError(fmt::format("checkpoint {}: cannot be opened for appending ({})", path, std::strerror(errno)));
}

// The whole of the regular file open at `fd`, from its start.
std::string read_all(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw UsageError(fmt::format("checkpoint {}: cannot be read ({})", path, std::strerror(errno)));
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::pread(fd, bytes.data() + got, bytes.size() - got, static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw UsageError(fmt::format("checkpoint {}: read failed ({})", path, std::strerror(errno)));
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  bytes.resize(got);
  return bytes;
}

// The state file beside a checkpoint, or "" where there is none; only a
// regular file is read.
std::string read_state(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == ENOENT) return "";
    throw UsageError(fmt::format("--resume: the saved statistics {} cannot be opened ({})", path, std::strerror(errno)));
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw UsageError(fmt::format("--resume: the saved statistics {} are {}, not a regular file; delete it", path,
                                 file_kind(st.st_mode)));
  return read_all(fd, path);
}

}  // namespace

Checkpoint::Layout Checkpoint::layout_of(const Plan& plan, const std::vector<PathChoice>& paths, uint64_t samples,
                                         bool stops_early) {
  Layout l;
  l.samples = samples;
  l.stops_early = stops_early;
  for (const Group& g : plan.groups) {
    l.axes.emplace_back();
    l.metrics.emplace_back();
    for (const Task& t : g.tasks) {
      l.axes.back().push_back(entry_axes(g, t, paths));
      l.metrics.back().push_back(t.metrics->size());
    }
  }
  return l;
}

std::unique_ptr<Checkpoint> Checkpoint::create(const std::string& path, const json& identity, const json& run) {
  std::unique_ptr<Checkpoint> c(new Checkpoint);
  c->path_ = path;
  c->run_ = run;
  c->fd_ = c->lock_fd_ = lock(path, true);
  // Another run's records (it started between our look and our lock) are
  // not ours to replace; nothing whole is a start killed before its first record.
  size_t valid = 0;
  if (!parse_records(read_all(c->fd_, path), valid).empty())
    throw UsageError(fmt::format("checkpoint {}: holds an unfinished run; add --resume to finish it, or delete it to "
                                 "start over",
                                 path));
  if (::ftruncate(c->fd_, 0) != 0)
    throw UsageError(fmt::format("checkpoint {}: cannot be written ({})", path, std::strerror(errno)));
  append_from_now(c->fd_, path);
  ::unlink(c->state_path().c_str());  // a state left by another run is not this run's
  c->append(kIdentity, json{{"format", kFormat}, {"identity", identity}, {"run", run}}.dump());
  c->last_write_ = now_s();
  return c;
}

namespace {

// Why group `g`'s record does not fit the run, or "".
std::string misfit(const Checkpoint::Layout& l, size_t g, const std::vector<ReportEntry>& entries) {
  if (entries.size() != l.axes[g].size())
    return fmt::format("group {} holds {} entries; the run has {}", g, entries.size(), l.axes[g].size());
  for (size_t t = 0; t < entries.size(); ++t) {
    const ReportEntry& e = entries[t];
    if (e.axes != l.axes[g][t])
      return fmt::format("group {} entry {} is {}; the run's is {}", g, t, words(e.axes), words(l.axes[g][t]));
    if (e.samples > l.samples || (!l.stops_early && e.samples != l.samples))
      return fmt::format("group {} entry {} has {} samples; the run has {}", g, t, e.samples, l.samples);
    if (e.metrics.size() != l.metrics[g][t])
      return fmt::format("group {} entry {} has {} metrics; the run has {}", g, t, e.metrics.size(), l.metrics[g][t]);
  }
  return "";
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& path, const json& identity, const Layout& layout) {
  std::unique_ptr<Checkpoint> c(new Checkpoint);
  c->path_ = path;
  c->layout_ = layout;
  c->fd_ = c->lock_fd_ = lock(path, false);
  const std::string bytes = read_all(c->fd_, path);
  size_t valid = 0;
  std::vector<Record> recs = parse_records(bytes, valid);
  const auto bad = [&](const std::string& why) {
    return UsageError(fmt::format("--resume: {} is not a checkpoint of chunkinv ({}); delete it to start over", path, why));
  };
  const auto damaged = [&](const std::string& why) {
    return UsageError(fmt::format("--resume: {} does not fit this run ({}); delete it to start over", path, why));
  };
  if (recs.empty() || recs[0].kind != kIdentity) throw bad("no identity record");
  json head;
  try {
    head = json::parse(recs[0].payload);
  } catch (const json::exception& e) {
    throw bad(e.what());
  }
  if (!head.is_object() || head.value("format", "") != kFormat || !head.contains("identity") || !head.contains("run") ||
      !head["run"].is_object())
    throw bad("format " + (head.is_object() ? head.value("format", std::string("?")) : std::string("?")));
  if (const std::string d = first_difference(head["identity"], identity); !d.empty())
    throw UsageError(fmt::format("--resume: {} was saved by another run ({}); delete it to start over", path, d));
  c->run_ = head["run"];
  const size_t groups = layout.axes.size();
  try {
    for (size_t r = 1; r < recs.size(); ++r) {
      if (recs[r].kind == kGroup) {
        const json g = json::parse(recs[r].payload);
        if (!g.is_object() || !g.contains("group") || !g["group"].is_number_unsigned() || !g.contains("results") ||
            !g["results"].is_array())
          throw damaged(fmt::format("record {} is no group's", r));
        const uint64_t i = g["group"].get<uint64_t>();
        // Groups finish in order, each once.
        if (i != c->finished_.size() || i >= groups)
          throw damaged(fmt::format("record {} is of group {}, after {} of {} groups", r, i, c->finished_.size(), groups));
        std::vector<ReportEntry> out;
        for (const json& e : g["results"]) out.push_back(entry_from_json(e));
        if (const std::string why = misfit(layout, i, out); !why.empty()) throw damaged(why);
        c->finished_[i] = std::move(out);
      } else if (recs[r].kind == kBlock) {
        size_t at = 0;
        const std::string& p = recs[r].payload;
        const uint64_t g = get<uint64_t>(p, at), first = get<uint64_t>(p, at), count = get<uint64_t>(p, at),
                       tasks = get<uint64_t>(p, at);
        if (g < c->finished_.size()) continue;  // its group's record followed: a kill before the blocks went
        Partial& part = c->partial_[g];
        // Blocks are the next group's samples, one after the other, of its every task.
        if (g != c->finished_.size() || g >= groups || first != part.count || count > layout.samples - first ||
            tasks != layout.metrics[g].size())
          throw damaged(fmt::format("record {}: a block of group {} (samples {} + {}, {} tasks) after {} samples of {} "
                                    "groups saved",
                                    r, g, first, count, tasks, part.count, c->finished_.size()));
        part.values.resize(tasks);
        for (uint64_t t = 0; t < tasks; ++t) {
          const uint64_t n = get<uint64_t>(p, at);
          if (n != count * layout.metrics[g][t])
            throw damaged(fmt::format("record {}: a block of {} samples holds {} values of task {}, not {}", r, count, n,
                                      t, count * layout.metrics[g][t]));
          if (n > (p.size() - at) / 8) throw UsageError("a block is cut short");
          const size_t old = part.values[t].size();
          part.values[t].resize(old + n);
          std::memcpy(part.values[t].data() + old, p.data() + at, n * 8);
          at += n * 8;
        }
        if (at != p.size()) throw damaged(fmt::format("record {}: bytes after a block", r));
        part.count += count;
      } else if (recs[r].kind != kIdentity || r != 0) {
        throw damaged(fmt::format("record {} is of kind {}", r, recs[r].kind));
      }
    }
    // Streaming statistics: the state beside the file, unless its group has finished since.
    size_t end = 0;
    for (Record& rec : parse_records(read_state(c->state_path()), end)) {
      if (rec.kind != kState) continue;
      size_t at = 0;
      const uint64_t g = get<uint64_t>(rec.payload, at), done = get<uint64_t>(rec.payload, at);
      if (g < c->finished_.size()) continue;
      if (g != c->finished_.size() || g >= groups || done > layout.samples)
        throw damaged(fmt::format("the saved statistics are of {} samples of group {}, after {} of {} groups", done, g,
                                  c->finished_.size(), groups));
      c->states_[g] = {done, rec.payload.substr(at)};
    }
  } catch (const json::exception& e) {
    throw bad(e.what());
  } catch (const UsageError& e) {
    if (std::string_view(e.what()).starts_with("--resume: ")) throw;
    throw bad(e.what());
  }
  for (const auto& [g, e] : c->finished_) c->partial_.erase(g);
  // Drop a record cut short by the kill, then append after the last whole one.
  if (valid < bytes.size() && ::ftruncate(c->fd_, static_cast<off_t>(valid)) != 0)
    throw UsageError(fmt::format("--resume: {} cannot be written ({})", path, std::strerror(errno)));
  append_from_now(c->fd_, path);
  c->blocks_on_disk_ = !c->partial_.empty();
  c->last_write_ = now_s();
  return c;
}

Checkpoint::~Checkpoint() {
  if (fd_ >= 0) ::close(fd_);
  if (lock_fd_ >= 0 && lock_fd_ != fd_) ::close(lock_fd_);
}

const std::vector<ReportEntry>* Checkpoint::finished(size_t g) const {
  const auto it = finished_.find(g);
  return it == finished_.end() ? nullptr : &it->second;
}

uint64_t Checkpoint::take_partial(size_t g, std::vector<std::vector<double>>& values) {
  const auto it = partial_.find(g);
  if (it == partial_.end()) return 0;
  values = std::move(it->second.values);
  it->second.values.clear();
  return it->second.count;
}

uint64_t Checkpoint::partial_samples(size_t g) const {
  if (const auto s = states_.find(g); s != states_.end()) return s->second.done;
  const auto it = partial_.find(g);
  return it == partial_.end() ? 0 : it->second.count;
}

uint64_t Checkpoint::take_state(size_t g, States& states) {
  const auto it = states_.find(g);
  if (it == states_.end() || it->second.payload.empty()) return 0;
  const std::string& p = it->second.payload;
  states.clear();
  try {
    size_t at = 0;
    const uint64_t tasks = get<uint64_t>(p, at);
    if (tasks != layout_.metrics[g].size())
      throw UsageError(fmt::format("{} tasks; the run has {}", tasks, layout_.metrics[g].size()));
    for (uint64_t t = 0; t < tasks; ++t) {
      const uint64_t metrics = get<uint64_t>(p, at);
      if (metrics != layout_.metrics[g][t])
        throw UsageError(fmt::format("{} metrics of task {}; the run has {}", metrics, t, layout_.metrics[g][t]));
      states.emplace_back();
      for (uint64_t m = 0; m < metrics; ++m) {
        states.back().push_back(get_sketch(p, at));
        if (states.back().back().count != it->second.done) throw UsageError("a state's count is not its samples'");
      }
    }
    if (at != p.size()) throw UsageError("bytes after the state");
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("--resume: {}: the saved statistics cannot be read ({}); delete it to start over", path_,
                                 e.what()));
  }
  it->second.payload.clear();
  return it->second.done;
}

bool Checkpoint::due() const { return now_s() - last_write_ >= interval_s; }

void Checkpoint::save_state(size_t g, uint64_t done, const std::vector<size_t>& metrics,
                            const std::function<SketchState(size_t, size_t)>& state) {
  // One metric's state at a time, straight into the record; its size is
  // close to the last one's (buckets are only ever added).
  std::string r(kHeader, '\0');
  r.reserve(last_state_bytes_ + last_state_bytes_ / 8 + 4096);
  put(r, uint64_t(g));
  put(r, done);
  put(r, uint64_t(metrics.size()));
  for (size_t t = 0; t < metrics.size(); ++t) {
    put(r, uint64_t(metrics[t]));
    for (size_t m = 0; m < metrics[t]; ++m) put_sketch(r, state(t, m));
  }
  frame(kState, r);
  last_state_bytes_ = r.size();
  // Each state replaces the one before, whole or not at all, in a file of
  // its own: nothing is read back or rewritten while the group goes on.
  OutputFile(state_path()).commit(r);
  states_[g] = {done, std::string()};
  last_write_ = now_s();
}

std::string Checkpoint::state_path() const { return sibling_path(path_, ".state"); }

void Checkpoint::append(uint32_t kind, const std::string& payload) { append_framed(record(kind, payload)); }

void Checkpoint::append_framed(const std::string& records) {
  size_t off = 0;
  while (off < records.size()) {
    const ssize_t w = ::write(fd_, records.data() + off, records.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw UsageError(fmt::format("checkpoint {}: write failed ({})", path_, std::strerror(errno)));
    }
    off += static_cast<size_t>(w);
  }
}

void Checkpoint::add_block(size_t g, uint64_t first, uint64_t count, const std::vector<std::vector<double>>& values) {
  std::string p;
  put(p, uint64_t(g));
  put(p, first);
  put(p, count);
  put(p, uint64_t(values.size()));
  for (const auto& v : values) {
    put(p, uint64_t(v.size()));
    p.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  }
  pending_ += record(kBlock, p);
  pending_group_ = g;
  pending_samples_ += count;
  if (now_s() - last_write_ >= interval_s || pending_.size() > (size_t{256} << 20)) flush();
}

void Checkpoint::flush() {
  if (!pending_.empty()) {
    append_framed(pending_);  // records already framed: written as they are
    pending_.clear();
    blocks_on_disk_ = true;
    partial_[pending_group_].count += pending_samples_;  // what a resume would find
    pending_samples_ = 0;
  }
  last_write_ = now_s();
}

void Checkpoint::finish_group(size_t g, const std::vector<ReportEntry>& entries) {
  pending_.clear();
  pending_samples_ = 0;
  Report r;
  r.results = entries;
  append(kGroup, json{{"group", g}, {"results", report_to_json(r)["results"]}}.dump());
  finished_[g] = entries;
  partial_.erase(g);
  if (states_.erase(g)) ::unlink(state_path().c_str());  // after the group's record: a kill between keeps a state it ignores
  if (blocks_on_disk_) compact();
  last_write_ = now_s();
}

// Rewrites the file without its blocks (all of finished groups now).
void Checkpoint::compact() {
  const std::string bytes = read_all(fd_, path_);
  size_t valid = 0;
  std::string kept;
  for (const Record& r : parse_records(bytes, valid))
    if (r.kind != kBlock) kept += record(r.kind, r.payload);
  // The new file is locked before it takes the name: no other run can
  // open it unlocked in between.
  int next = -1;
  OutputFile(path_).commit(kept, [&](int fd) {
    if (next >= 0) ::close(next);
    next = ::dup(fd);
    if (next < 0 || ::flock(next, LOCK_EX | LOCK_NB) != 0)
      throw UsageError(fmt::format("checkpoint {}: cannot be locked ({})", path_, std::strerror(errno)));
  });
  // The new file, locked and in place, opened again to be read and appended to.
  const int rw = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (rw < 0) {
    ::close(next);
    throw UsageError(fmt::format("checkpoint {}: cannot be opened ({})", path_, std::strerror(errno)));
  }
  if (lock_fd_ != fd_) ::close(lock_fd_);
  ::close(fd_);
  fd_ = rw;
  lock_fd_ = next;
  append_from_now(fd_, path_);
  blocks_on_disk_ = false;
}

void Checkpoint::remove() {
  ::unlink(state_path().c_str());
  ::unlink(path_.c_str());
  if (lock_fd_ >= 0 && lock_fd_ != fd_) ::close(lock_fd_);  // the lock goes last
  if (fd_ >= 0) ::close(fd_);
  fd_ = lock_fd_ = -1;
}

}  // namespace chunkinv
