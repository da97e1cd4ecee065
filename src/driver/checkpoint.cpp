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

std::string record(uint32_t kind, const std::string& payload) {
  std::string r(kMagic, 4);
  put(r, kind);
  put(r, uint64_t(payload.size()));
  r += payload;
  put(r, fnv1a(r.data() + 4, r.size() - 4));
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
      } else if (recs[r].kind == kState) {  // the last one of a group holds its statistics so far
        const std::string& p = recs[r].payload;
        size_t at = 0;
        const uint64_t g = get<uint64_t>(p, at), done = get<uint64_t>(p, at);
        c->states_[g] = {done, p.substr(at)};
        c->stale_bytes_ += c->last_state_bytes_;
        c->last_state_bytes_ = kHeader + p.size() + kTrailer;
      }
    }
  } catch (const json::exception& e) {
    throw bad(e.what());
  } catch (const UsageError& e) {
    throw bad(e.what());
  }
  for (const auto& [g, e] : c->finished_) {
    c->partial_.erase(g);
    c->states_.erase(g);
  }
  // Drop a record cut short by the kill, then append after the last whole one.
  if (valid < bytes.size() && ::truncate(path.c_str(), static_cast<off_t>(valid)) != 0)
    throw UsageError(fmt::format("--resume: {} cannot be written ({})", path, std::strerror(errno)));
  c->blocks_on_disk_ = !c->partial_.empty() || !c->states_.empty();
  c->written_bytes_ = valid;
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

uint64_t Checkpoint::take_state(size_t g, std::string& state) {
  const auto it = states_.find(g);
  if (it == states_.end()) return 0;
  state = std::move(it->second.payload);
  it->second.payload.clear();
  return it->second.done;
}

bool Checkpoint::due() const { return now_s() - last_write_ >= interval_s; }

void Checkpoint::save_state(size_t g, uint64_t done, const std::string& state) {
  std::string p;
  put(p, uint64_t(g));
  put(p, done);
  p += state;
  const std::string r = record(kState, p);
  append_framed(r);
  states_[g] = {done, std::string()};
  // Each state replaces the one before: rewrite the file once the states
  // it no longer needs outweigh the rest, so that it stays within twice
  // its live size whatever the length of the group.
  stale_bytes_ += last_state_bytes_;
  last_state_bytes_ = r.size();
  blocks_on_disk_ = true;
  if (stale_bytes_ > written_bytes_ / 2) compact();
  last_write_ = now_s();
}

void Checkpoint::append(uint32_t kind, const std::string& payload) { append_framed(record(kind, payload)); }

void Checkpoint::append_framed(const std::string& records) {
  written_bytes_ += records.size();
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
  states_.erase(g);
  if (blocks_on_disk_) compact();
  last_write_ = now_s();
}

// Rewrites the file without its blocks (all of finished groups then) and
// with only the last state of an unfinished group.
void Checkpoint::compact() {
  const std::string bytes = read_all(path_);
  size_t valid = 0;
  const std::vector<Record> recs = parse_records(bytes, valid);
  size_t last_state = recs.size();
  for (size_t i = 0; i < recs.size(); ++i)
    if (recs[i].kind == kState) last_state = i;
  std::string kept;
  bool state_kept = false;
  for (size_t i = 0; i < recs.size(); ++i) {
    if (recs[i].kind == kBlock || (recs[i].kind == kState && i != last_state)) continue;
    if (recs[i].kind == kState) {
      size_t at = 0;
      if (finished_.count(get<uint64_t>(recs[i].payload, at))) continue;  // its group's entries are in
      state_kept = true;
    }
    kept += record(recs[i].kind, recs[i].payload);
  }
  OutputFile(path_).commit(kept);
  blocks_on_disk_ = state_kept;
  stale_bytes_ = 0;
  written_bytes_ = kept.size();
  if (!state_kept) last_state_bytes_ = 0;
  reopen();
}

void Checkpoint::remove() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(path_.c_str());
}

}  // namespace chunkinv
