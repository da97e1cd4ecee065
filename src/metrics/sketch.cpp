#include "metrics/sketch.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <tuple>

namespace chunkinv {
namespace {

constexpr int kDrop = 52 - kSketchBits;  // significand bits below a bucket's
constexpr int32_t kBinade = int32_t{1} << kSketchBits;  // buckets per binade
// Buckets per page: an eighth of a binade, so that a value alone in the
// far tail costs 1 KiB, not the 8 KiB of a whole binade.
constexpr int kPageBits = kSketchBits - 3;
constexpr int32_t kPage = int32_t{1} << kPageBits;

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

// a and b merged: keys ascending, counts of a key added.
std::vector<SketchBucket> merged(const std::vector<SketchBucket>& a, const std::vector<SketchBucket>& b) {
  std::vector<SketchBucket> out;
  out.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].key < b[j].key)) out.push_back(a[i++]);
    else if (i == a.size() || b[j].key < a[i].key) out.push_back(b[j++]);
    else out.push_back({a[i].key, a[i++].count + b[j++].count});
  }
  return out;
}

}  // namespace

int32_t sketch_key(double a) {
  uint64_t u = std::bit_cast<uint64_t>(a);
  if (u >> 52 == 0) {  // subnormal: scaled by 2^64 (exact), bucketed as a normal, keys below 2^10
    u = std::bit_cast<uint64_t>(a * 0x1p64);
    return static_cast<int32_t>(u >> kDrop) - (64 << kSketchBits);
  }
  return static_cast<int32_t>(u >> kDrop);
}

double sketch_lower(int32_t key) {
  if (key >= kBinade) return std::bit_cast<double>(static_cast<uint64_t>(key) << kDrop);
  return std::bit_cast<double>(static_cast<uint64_t>(key + (64 << kSketchBits)) << kDrop) * 0x1p-64;
}

void SketchState::merge(const SketchState& o) {
  count += o.count;
  nan += o.nan;
  neg_inf += o.neg_inf;
  pos_inf += o.pos_inf;
  zeros += o.zeros;
  if (std::isnan(min) || o.min < min) min = o.min;
  if (std::isnan(max) || o.max > max) max = o.max;
  sum.add(o.sum);
  neg = merged(neg, o.neg);
  pos = merged(pos, o.pos);
}

double SketchState::order_statistic(uint64_t k) const {
  const uint64_t ordered = count - nan;
  if (k >= ordered) return NAN;
  if (k == 0) return min;
  if (k == ordered - 1) return max;
  const auto clamp = [&](double v) { return std::min(std::max(v, min), max); };
  uint64_t r = k;
  if (r < neg_inf) return -INFINITY;
  r -= neg_inf;
  for (auto b = neg.rbegin(); b != neg.rend(); ++b) {  // the largest magnitude is the least value
    if (r < b->count) return clamp(-sketch_lower(b->key));
    r -= b->count;
  }
  if (r < zeros) return 0.0;
  r -= zeros;
  for (const SketchBucket& b : pos) {
    if (r < b.count) return clamp(sketch_lower(b.key));
    r -= b.count;
  }
  return INFINITY;
}

double SketchState::quantile(double q) const {
  if (count == 0) return NAN;
  // The same positions and weights as quantile_sorted.
  const double h = (static_cast<double>(count) - 1.0) * q;
  const uint64_t lo = static_cast<uint64_t>(std::floor(h));
  const uint64_t hi = std::min(lo + 1, count - 1);
  const double frac = h - static_cast<double>(lo);
  if (frac == 0.0 || lo == hi) return order_statistic(lo);
  const double a = order_statistic(lo), b = order_statistic(hi);
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (std::isinf(a) || std::isinf(b)) return a == b ? a : std::isinf(a) && std::isinf(b) ? NAN : std::isinf(a) ? a : b;
  return a + frac * (b - a);
}

Stats SketchState::stats(bool flag) const {
  Stats s;
  s.count = count;
  if (count == 0) return s;
  s.min = min;
  s.max = max;
  s.median = quantile(0.5);
  s.p10 = quantile(0.1);
  s.p90 = quantile(0.9);
  s.p99 = quantile(0.99);
  s.p999 = quantile(0.999);
  s.p999999 = quantile(0.999999);
  s.finite_count = finite();
  s.mean = s.finite_count ? sum.value() / static_cast<double>(s.finite_count) : NAN;
  if (flag) {
    uint64_t ones = 0;  // the bucket of 1 holds exactly the values 1 of a 0/1 metric
    const int32_t one = sketch_key(1.0);
    for (const SketchBucket& b : pos)
      if (b.key == one) ones = b.count;
    s.has_wilson = true;
    std::tie(s.wilson_low, s.wilson_high) = wilson95(ones, count);
  }
  return s;
}

bool SketchState::operator==(const SketchState& o) const {
  return count == o.count && nan == o.nan && neg_inf == o.neg_inf && pos_inf == o.pos_inf && zeros == o.zeros &&
         same_bits(min, o.min) && same_bits(max, o.max) && sum == o.sum && neg == o.neg && pos == o.pos;
}

void StreamStats::Pages::add(int32_t key, uint64_t n) {
  const int32_t p = key >> kPageBits;  // floor, for the negative keys of subnormals too
  if (pages.empty()) {
    first = p;
    pages.resize(1);
  } else if (p < first) {
    std::vector<std::unique_ptr<uint64_t[]>> wider(static_cast<size_t>(first - p) + pages.size());
    std::move(pages.begin(), pages.end(), wider.begin() + (first - p));
    pages = std::move(wider);
    first = p;
  } else if (static_cast<size_t>(p - first) >= pages.size()) {
    pages.resize(static_cast<size_t>(p - first) + 1);
  }
  std::unique_ptr<uint64_t[]>& page = pages[static_cast<size_t>(p - first)];
  if (!page) page = std::make_unique<uint64_t[]>(kPage);  // zeroed
  page[key & (kPage - 1)] += n;
}

void StreamStats::Pages::buckets(std::vector<SketchBucket>& out) const {
  size_t n = 0;  // counted first: a state is built at its size, without the slack of growing
  for (const auto& page : pages)
    if (page) n += static_cast<size_t>(std::count_if(page.get(), page.get() + kPage, [](uint64_t c) { return c != 0; }));
  out.clear();
  out.reserve(n);
  for (size_t i = 0; i < pages.size(); ++i) {
    if (!pages[i]) continue;
    for (int32_t j = 0; j < kPage; ++j)
      if (pages[i][j]) out.push_back({(first + static_cast<int32_t>(i)) * kPage + j, pages[i][j]});
  }
}

StreamStats::StreamStats(const SketchState& s)
    : count_(s.count), nan_(s.nan), neg_inf_(s.neg_inf), pos_inf_(s.pos_inf), zeros_(s.zeros), min_(s.min),
      max_(s.max), sum_(s.sum) {
  for (const SketchBucket& b : s.neg) neg_.add(b.key, b.count);
  for (const SketchBucket& b : s.pos) pos_.add(b.key, b.count);
}

void StreamStats::add(double x) {
  ++count_;
  if (std::isnan(x)) {
    ++nan_;
    return;
  }
  if (std::isnan(min_)) {
    min_ = max_ = x;
  } else {
    if (x < min_) min_ = x;
    if (x > max_) max_ = x;
  }
  if (std::isinf(x)) {
    ++(x > 0 ? pos_inf_ : neg_inf_);
  } else if (x == 0) {
    ++zeros_;
  } else {
    sum_.add(x);
    if (x > 0) pos_.add(sketch_key(x), 1);
    else neg_.add(sketch_key(-x), 1);
  }
}

SketchState StreamStats::state() const {
  SketchState s;
  s.count = count_;
  s.nan = nan_;
  s.neg_inf = neg_inf_;
  s.pos_inf = pos_inf_;
  s.zeros = zeros_;
  s.min = min_;
  s.max = max_;
  s.sum = sum_;
  neg_.buckets(s.neg);
  pos_.buckets(s.pos);
  return s;
}

}  // namespace chunkinv
