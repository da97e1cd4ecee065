// Ctrl-C, SIGTERM, SIGHUP: temporary files are removed, and a long run
// stops where it can be resumed. The handler is async-signal-safe: it sets
// a flag and unlinks paths registered beforehand (fixed slots, no
// allocation), then, unless someone polls the flag, ends the process with
// the signal's default action (the exit status a shell expects).
#pragma once
#include <string>

namespace chunkinv::signals {

void install();  // SIGINT, SIGTERM, SIGHUP
int received();  // the first signal received, or 0

// While a StopPoint lives, the first signal only sets the flag: its owner
// polls received() and stops cleanly at the next point it can resume
// from. A second signal ends the process at once.
class StopPoint {
 public:
  StopPoint();
  ~StopPoint();
  StopPoint(const StopPoint&) = delete;
  StopPoint& operator=(const StopPoint&) = delete;
};

// A file the handler removes when a signal ends the process while this
// lives (a temporary being written).
class TempPath {
 public:
  explicit TempPath(const std::string& path);
  ~TempPath();
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;

 private:
  int slot_ = -1;
};

// Thrown where a run stops at a signal (after saving what it can).
struct Stopped {
  int signal = 0;
};

// Ends the process as the signal's default action would (after the
// caller's cleanup): `kill -INT` gives status 130 in a shell.
[[noreturn]] void end_by(int signal);

std::string name(int signal);  // "SIGINT", ...

}  // namespace chunkinv::signals
