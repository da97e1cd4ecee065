#include "core/limits.hpp"

#include <sys/resource.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"

namespace chunkinv {
namespace {

// A "Key:   123 kB" line of a /proc file, in bytes; 0 if absent.
uint64_t proc_kb(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::strtoull(line.c_str() + key.size() + 1, nullptr, 10) * 1024;
  return 0;
}

// A cgroup file holding a number ("max": none).
bool cgroup_number(const std::string& file, uint64_t& v) {
  std::ifstream in(file);
  std::string s;
  if (!(in >> s) || s == "max") return false;
  v = std::strtoull(s.c_str(), nullptr, 10);
  return v > 0 && v < (uint64_t{1} << 62);
}

void lower(MemoryBudget& b, uint64_t bytes, const char* source) {
  if (bytes < b.bytes) b = {bytes, source};
}

}  // namespace

MemoryBudget memory_budget(int threads) {
  MemoryBudget b;
  if (const uint64_t avail = proc_kb("/proc/meminfo", "MemAvailable")) lower(b, avail, "MemAvailable");
  // cgroup v2: this process's group, as /proc/self/cgroup names it ("0::/path").
  std::ifstream cg("/proc/self/cgroup");
  std::string line, group;
  while (std::getline(cg, line))
    if (line.rfind("0::", 0) == 0) group = line.substr(3);
  uint64_t max = 0, cur = 0;
  if (!group.empty() && cgroup_number("/sys/fs/cgroup" + group + "/memory.max", max)) {
    cgroup_number("/sys/fs/cgroup" + group + "/memory.current", cur);
    lower(b, max > cur ? max - cur : 0, "cgroup memory.max");
  } else if (cgroup_number("/sys/fs/cgroup/memory/memory.limit_in_bytes", max)) {  // cgroup v1
    cgroup_number("/sys/fs/cgroup/memory/memory.usage_in_bytes", cur);
    lower(b, max > cur ? max - cur : 0, "cgroup memory limit");
  }
  // Address space: what is mapped counts, and each thread may map a 64 MiB malloc arena.
  const uint64_t mapped = proc_kb("/proc/self/status", "VmSize") + uint64_t(std::max(threads, 1)) * (64u << 20);
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    lower(b, rl.rlim_cur > mapped ? rl.rlim_cur - mapped : 0, "ulimit -v");
  if (::getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const uint64_t data = proc_kb("/proc/self/status", "VmData");
    lower(b, rl.rlim_cur > data ? rl.rlim_cur - data : 0, "ulimit -d");
  }
  return b;
}

uint64_t parse_size(const std::string& option, const std::string& text) {
  const auto bad = [&] {
    return UsageError(fmt::format("{} {}: not a size; give bytes or a number with K, M, G or T (e.g. 800M, 2G)", option, text));
  };
  // Digits, a fraction, a unit: no sign, exponent, hexadecimal or space
  // (strtod would take 0x100 and inf), read exactly.
  size_t i = 0;
  unsigned __int128 whole = 0, frac = 0, tenths = 1;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i)
    if ((whole = whole * 10 + unsigned(text[i] - '0')) > UINT64_MAX) throw bad();
  if (i == 0) throw bad();
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i)
      if (tenths < (unsigned __int128)1e18) frac = frac * 10 + unsigned(text[i] - '0'), tenths *= 10;
  }
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.ends_with("IB") && unit.size() == 3) unit.resize(1);
  else if (unit.ends_with("B") && unit.size() == 2) unit.resize(1);
  int shift = 0;
  if (!unit.empty() && unit != "B") {
    const size_t p = std::string("KMGT").find(unit[0]);
    if (unit.size() != 1 || p == std::string::npos) throw bad();
    shift = 10 * int(p + 1);
  }
  const unsigned __int128 bytes = (whole << shift) + ((frac << shift) / tenths);  // a fraction of a byte dropped
  if (bytes == 0 || bytes > UINT64_MAX) throw bad();
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(double bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} bytes", bytes) : fmt::format("{:.{}f} {}", bytes, bytes < 10 ? 1 : 0, units[u]);
}

uint64_t parse_count(const std::string& option, const std::string& text, uint64_t lo, uint64_t hi) {
  const auto bad = [&] { return UsageError(fmt::format("{} {}: must be a whole number from {} to {}", option, text, lo, hi)); };
  std::string s = text;
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s[0]))) throw bad();
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
    const uint64_t d = uint64_t(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) throw bad();
    v = v * 10 + d;
  }
  if (i < s.size()) {  // 1e6, 2.5e3: exact decimal arithmetic, whole results only
    std::string frac;
    if (s[i] == '.') {
      for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) frac += s[i];
    }
    if (i >= s.size() || (s[i] != 'e' && s[i] != 'E')) throw bad();
    const std::string exp_digits = s.substr(i + 1);
    if (exp_digits.empty() || exp_digits.size() > 2 ||
        exp_digits.find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    int e = std::stoi(exp_digits);
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    if (int(frac.size()) > e) throw bad();  // not whole
    for (char c : frac) {
      const uint64_t d = uint64_t(c - '0');
      if (v > (UINT64_MAX - d) / 10) throw bad();
      v = v * 10 + d;
      --e;
    }
    for (; e > 0; --e) {
      if (v > UINT64_MAX / 10) throw bad();
      v *= 10;
    }
  }
  if (v < lo || v > hi) throw bad();
  return v;
}

}  // namespace chunkinv
