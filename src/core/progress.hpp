// A progress bar on stderr: share done, a bar, samples per second and the
// time left (from the rate so far), and what is being done. Drawn only when
// stderr is a terminal, at most five times a second; finish() clears it.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace chunkinv {

class ProgressBar {
 public:
  // `total` units of work (any unit: samples, or samples weighted by cost).
  ProgressBar(double total, bool wanted);
  ~ProgressBar() { finish(); }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Work done before this process started (a resumed run): not counted in the rate.
  void skip(double units);
  // `samples`: how many samples the units were, for the rate (0: not shown).
  void advance(double units, const std::string& what = std::string(), uint64_t samples = 0);
  void finish();
  bool shown() const { return enabled_; }

 private:
  void draw(bool force);
  using Clock = std::chrono::steady_clock;
  bool enabled_ = false, drawn_ = false;
  double total_ = 0, done_ = 0, skipped_ = 0;
  uint64_t samples_ = 0;
  std::string what_;
  Clock::time_point start_, last_;
};

// Start-up and tear-down times, for tuning: with CHUNKINV_TIMELINE set,
// prints "timeline: LABEL T" on stderr, T the wall clock in seconds since
// the epoch (a script subtracts the time it started the process at).
void timeline(const char* label);

// "45 s", "3 min 20 s", "2 h 05 min".
std::string format_duration(double seconds);
// "950", "12.3k", "4.56M", "1.2G": a rate or count with three digits.
std::string format_rate(double per_second);

}  // namespace chunkinv
