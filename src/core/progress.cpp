#include "core/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace chunkinv {

ProgressBar::ProgressBar(double total, bool wanted)
    : enabled_(wanted && total > 0 && ::isatty(STDERR_FILENO)), total_(total), start_(Clock::now()), last_(start_) {}

void ProgressBar::skip(double units) {
  skipped_ += units;
  done_ += units;
}

void ProgressBar::advance(double units, const std::string& what, uint64_t samples) {
  done_ += units;
  samples_ += samples;
  if (!what.empty()) what_ = what;
  draw(false);
}

void ProgressBar::draw(bool force) {
  if (!enabled_) return;
  const auto now = Clock::now();
  if (!force && drawn_ && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  const double share = std::clamp(done_ / total_, 0.0, 1.0);
  constexpr int kWidth = 24;
  const int full = static_cast<int>(share * kWidth);
  std::string bar(static_cast<size_t>(full), '=');
  if (full < kWidth) bar += '>' + std::string(static_cast<size_t>(kWidth - full - 1), ' ');
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = (done_ - skipped_) / std::max(elapsed, 1e-9);
  std::string eta = done_ > skipped_ && elapsed > 0.5 ? format_duration((total_ - done_) / rate) + " left" : "";
  if (samples_ && elapsed > 0.5) eta = format_rate(double(samples_) / elapsed) + " samples/s  " + eta;
  std::fprintf(stderr, "\r\033[K%3.0f%% [%s] %s%s%s", 100 * share, bar.c_str(), eta.c_str(), eta.empty() ? "" : "  ",
               what_.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
  enabled_ = false;
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = std::lround(s);
  if (t < 60) return fmt::format("{} s", t);
  if (t < 3600) return fmt::format("{} min {:02} s", t / 60, t % 60);
  return fmt::format("{} h {:02} min", t / 3600, t % 3600 / 60);
}

std::string format_rate(double x) {
  if (!std::isfinite(x) || x < 0) return "?";
  static const char* const kSuffix[] = {"", "k", "M", "G", "T"};
  int u = 0;
  while (x >= 999.5 && u < 4) x /= 1000, ++u;
  if (u == 0) return fmt::format("{:.0f}", x);
  return fmt::format("{:.{}f}{}", x, x < 9.995 ? 2 : x < 99.95 ? 1 : 0, kSuffix[u]);
}

void timeline(const char* label) {
  static const bool on = std::getenv("CHUNKINV_TIMELINE") != nullptr;
  if (!on) return;
  const double t = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(stderr, "timeline: %s %.4f\n", label, t);
}

}  // namespace chunkinv
