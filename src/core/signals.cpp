#include "core/signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace chunkinv::signals {
namespace {

std::atomic<int> g_received{0};
std::atomic<int> g_polling{0};

// Registered paths: written by the main thread before the slot is marked
// used, read by the handler only when it is.
constexpr int kSlots = 8;
constexpr size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
std::atomic<bool> g_used[kSlots];

void unlink_registered() {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load(std::memory_order_acquire)) ::unlink(g_paths[i]);
}

void handler(int sig) {
  const int first = g_received.exchange(sig) == 0;
  if (first && g_polling.load() > 0) {
    static const char msg[] = "\nchunkinv: stopping after this batch (again to stop at once)\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
    return;
  }
  unlink_registered();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install() {
  struct sigaction sa {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes are not cut short by the first signal
  for (int s : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    // A signal ignored by whoever started us (nohup, a background job) stays ignored.
    if (::sigaction(s, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(s, &sa, nullptr);
  }
}

int received() { return g_received.load(); }

StopPoint::StopPoint() { g_polling.fetch_add(1); }
StopPoint::~StopPoint() { g_polling.fetch_sub(1); }

TempPath::TempPath(const std::string& path) {
  if (path.size() >= kPathMax) return;
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load()) continue;
    std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
    g_used[i].store(true, std::memory_order_release);
    slot_ = i;
    return;
  }
}

TempPath::~TempPath() {
  if (slot_ >= 0) g_used[slot_].store(false, std::memory_order_release);
}

void end_by(int sig) {
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  std::_Exit(128 + sig);  // if the signal was blocked or ignored
}

std::string name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

}  // namespace chunkinv::signals
