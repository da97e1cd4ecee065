// Limits checked before anything is allocated: what memory this process
// may still use, and numbers on the command line read strictly (a
// negative --samples is an error, not 2^64 - 5).
#pragma once
#include <cstdint>
#include <string>

namespace chunkinv {

struct MemoryBudget {
  uint64_t bytes = UINT64_MAX;
  std::string source;  // what limits it: "ulimit -v", "cgroup memory.max", "MemAvailable", "--max-memory"
};
// The least of: the address-space and data limits (ulimit -v, -d) less
// what is mapped now (and `threads` malloc arenas), the cgroup's memory.max
// less its usage, and the machine's MemAvailable.
MemoryBudget memory_budget(int threads);

// "800M", "2G", "1.5GiB", "65536": bytes (K, M, G, T are powers of 1024).
uint64_t parse_size(const std::string& option, const std::string& text);
std::string format_bytes(double bytes);  // "1.5 GiB"

// A whole number in [lo, hi]: digits, or a power-of-ten form such as 1e6
// or 2.5e3 when it is whole. Throws UsageError("OPTION TEXT: must be a
// whole number from LO to HI") otherwise.
uint64_t parse_count(const std::string& option, const std::string& text, uint64_t lo, uint64_t hi);

}  // namespace chunkinv
