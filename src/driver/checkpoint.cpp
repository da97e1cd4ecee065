#include "driver/checkpoint.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/output_file.hpp"

namespace chunkinv {
namespace {

using nlohmann::json;

constexpr char kMagic[4] = {'c', 'k', 'i', 'v'};
constexpr const char* kFormat = "chunkinv.checkpoint/1";
enum Kind : uint32_t { kIdentity = 1, kGroup = 2, kBlock = 3, kState = 4 };
constexpr size_t kHeader = 4 + 4 + 8, kTrailer = 8;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t fnv1a(const char* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ull;
  return h;
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
  put(r, fnv1a(r.data() + 4, r.size() - 4));
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
    uint64_t sum;
    std::memcpy(&sum, bytes.data() + at + kHeader + len, 8);
    if (sum != fnv1a(bytes.data() + at + 4, kHeader - 4 + len)) break;
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

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(fmt::format("--resume: no checkpoint {} (the run finished, or never started); run without --resume", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::create(const std::string& path, const json& identity, const json& run) {
  std::unique_ptr<Checkpoint> c(new Checkpoint);
  c->path_ = path;
  c->run_ = run;
  OutputFile(path).commit(record(kIdentity, json{{"format", kFormat}, {"identity", identity}, {"run", run}}.dump()));  // whole or nothing, like a report
  ::unlink(c->state_path().c_str());  // a state left by another run is not this run's
  c->reopen();
  c->last_write_ = now_s();
  return c;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& path, const json& identity) {
  const std::string bytes = read_all(path);
  size_t valid = 0;
  std::vector<Record> recs = parse_records(bytes, valid);
  const auto bad = [&](const std::string& why) {
    return UsageError(fmt::format("--resume: {} is not a checkpoint of chunkinv ({}); delete it to start over", path, why));
  };
  if (recs.empty() || recs[0].kind != kIdentity) throw bad("no identity record");
  json head;
  try {
    head = json::parse(recs[0].payload);
  } catch (const json::exception& e) {
    throw bad(e.what());
  }
  if (head.value("format", "") != kFormat || !head.contains("identity") || !head.contains("run"))
    throw bad("format " + head.value("format", std::string("?")));
  if (const std::string d = first_difference(head["identity"], identity); !d.empty())
    throw UsageError(fmt::format("--resume: {} was saved by another run ({}); delete it to start over", path, d));
  std::unique_ptr<Checkpoint> c(new Checkpoint);
  c->path_ = path;
  c->run_ = head["run"];
  try {
    for (size_t r = 1; r < recs.size(); ++r) {
      if (recs[r].kind == kGroup) {
        const json g = json::parse(recs[r].payload);
        std::vector<ReportEntry>& out = c->finished_[g.at("group").get<size_t>()];
        out.clear();
        for (const json& e : g.at("results")) out.push_back(entry_from_json(e));
      } else if (recs[r].kind == kBlock) {
        size_t at = 0;
        const std::string& p = recs[r].payload;
        const uint64_t g = get<uint64_t>(p, at), first = get<uint64_t>(p, at), count = get<uint64_t>(p, at),
                       tasks = get<uint64_t>(p, at);
        Partial& part = c->partial_[g];
        if (first != part.count) continue;  // blocks follow each other; never otherwise
        part.values.resize(tasks);
        for (uint64_t t = 0; t < tasks; ++t) {
          const uint64_t n = get<uint64_t>(p, at);
          if (at + n * 8 > p.size()) throw UsageError("a block is cut short");
          const size_t old = part.values[t].size();
          part.values[t].resize(old + n);
          std::memcpy(part.values[t].data() + old, p.data() + at, n * 8);
          at += n * 8;
        }
        part.count += count;
      }
    }
    // Streaming statistics: the state beside the file, unless its group has finished since.
    if (std::ifstream in(c->state_path(), std::ios::binary); in) {
      std::ostringstream bytes;
      bytes << in.rdbuf();
      size_t end = 0;
      for (Record& rec : parse_records(bytes.str(), end)) {
        if (rec.kind != kState) continue;
        size_t at = 0;
        const uint64_t g = get<uint64_t>(rec.payload, at), done = get<uint64_t>(rec.payload, at);
        if (!c->finished_.count(g)) c->states_[g] = {done, rec.payload.substr(at)};
      }
    }
  } catch (const json::exception& e) {
    throw bad(e.what());
  } catch (const UsageError& e) {
    throw bad(e.what());
  }
  for (const auto& [g, e] : c->finished_) c->partial_.erase(g);
  // Drop a record cut short by the kill, then append after the last whole one.
  if (valid < bytes.size() && ::truncate(path.c_str(), static_cast<off_t>(valid)) != 0)
    throw UsageError(fmt::format("--resume: {} cannot be written ({})", path, std::strerror(errno)));
  c->blocks_on_disk_ = !c->partial_.empty();
  c->reopen();
  c->last_write_ = now_s();
  return c;
}

Checkpoint::~Checkpoint() {
  if (fd_ >= 0) ::close(fd_);
}

void Checkpoint::reopen() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) throw UsageError(fmt::format("checkpoint {}: cannot be opened ({})", path_, std::strerror(errno)));
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
    if (tasks > p.size()) throw UsageError("a state is cut short");
    for (uint64_t t = 0; t < tasks; ++t) {
      const uint64_t metrics = get<uint64_t>(p, at);
      if (metrics > p.size()) throw UsageError("a state is cut short");
      states.emplace_back();
      for (uint64_t m = 0; m < metrics; ++m) {
        states.back().push_back(get_sketch(p, at));
        if (states.back().back().count != it->second.done) throw UsageError("a state's count is not its samples'");
      }
    }
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
  const std::string bytes = read_all(path_);
  size_t valid = 0;
  std::string kept;
  for (const Record& r : parse_records(bytes, valid))
    if (r.kind != kBlock) kept += record(r.kind, r.payload);
  OutputFile(path_).commit(kept);
  blocks_on_disk_ = false;
  reopen();
}

void Checkpoint::remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(state_path().c_str());
  ::unlink(path_.c_str());
}

}  // namespace chunkinv
