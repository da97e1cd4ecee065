#include "search/cmaes.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <tuple>

#include "core/detmath.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"

namespace chunkinv {

std::string cmaes_stop_name(CmaesStop s) {
  switch (s) {
    case CmaesStop::kNone: return "none";
    case CmaesStop::kTolFun: return "tolfun";
    case CmaesStop::kTolX: return "tolx";
    case CmaesStop::kStagnation: return "stagnation";
    case CmaesStop::kCondition: return "condition";
  }
  return "?";
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t k = v.size() / 2;
  return v.size() % 2 ? v[k] : 0.5 * (v[k - 1] + v[k]);
}

}  // namespace

SepCmaes::SepCmaes(std::vector<double> mean, const CmaesOptions& o)
    : n_(mean.size()), sigma_(o.sigma0), sigma0_(o.sigma0), seed_(o.seed), stream_(o.stream), mean_(std::move(mean)) {
  if (n_ == 0) throw UsageError("cmaes: empty search space");
  const double n = static_cast<double>(n_);
  // Tutorial, Table 1 (defaults).
  lambda_ = o.lambda > 0 ? o.lambda : 4 + static_cast<int>(std::floor(3.0 * detmath::log(n)));
  lambda_ = std::max(lambda_, 2);
  mu_ = lambda_ / 2;
  weights_.resize(mu_);
  for (int i = 0; i < mu_; ++i) weights_[i] = detmath::log((lambda_ + 1) / 2.0) - detmath::log(i + 1.0);
  const double wsum = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  double w2 = 0;
  for (double& w : weights_) w /= wsum, w2 += w * w;
  mueff_ = 1.0 / w2;
  cs_ = (mueff_ + 2) / (n + mueff_ + 5);
  ds_ = 1 + 2 * std::max(0.0, std::sqrt((mueff_ - 1) / (n + 1)) - 1) + cs_;
  cc_ = (4 + mueff_ / n) / (n + 4 + 2 * mueff_ / n);
  const double c1 = 2 / ((n + 1.3) * (n + 1.3) + mueff_);
  const double cmu = std::min(1 - c1, 2 * (mueff_ - 2 + 1 / mueff_) / ((n + 2) * (n + 2) + mueff_));
  // sep-CMA (Ros & Hansen 2008): a diagonal learns n times faster, so the
  // learning rates are multiplied by (n + 2) / 3; together at most 1.
  c1_ = c1 * (n + 2) / 3;
  cmu_ = cmu * (n + 2) / 3;
  if (c1_ + cmu_ > 1) {
    const double s = 1 / (c1_ + cmu_);
    c1_ *= s, cmu_ *= s;
  }
  chi_n_ = std::sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n * n));
  diag_c_.assign(n_, 1.0);
  ps_.assign(n_, 0.0);
  pc_.assign(n_, 0.0);
}

double SepCmaes::max_axis() const { return std::sqrt(*std::max_element(diag_c_.begin(), diag_c_.end())); }
double SepCmaes::min_axis() const { return std::sqrt(*std::min_element(diag_c_.begin(), diag_c_.end())); }

const std::vector<double>& SepCmaes::ask() {
  // Normals of generation g, candidate k, coordinate i at counter
  // (g * lambda + k) * n + i of (seed, stream): nothing else moves them.
  const Rng rng(seed_, stream_, static_cast<Stream>(static_cast<uint32_t>(Stream::kUser) + 1));
  const size_t lam = static_cast<size_t>(lambda_);
  z_.resize(lam * n_);
  x_.resize(lam * n_);
  const uint64_t base = gen_ * lam * n_;
  for (size_t j = 0; j < lam * n_; j += 2) {
    const uint64_t c = base + j;
    if ((c & 1) == 0 && j + 1 < lam * n_) {
      std::tie(z_[j], z_[j + 1]) = rng.normal_pair(c >> 1);
    } else {  // base is even whenever lam * n is; otherwise one at a time
      z_[j] = rng.normal(c);
      if (j + 1 < lam * n_) z_[j + 1] = rng.normal(c + 1);
    }
  }
  for (size_t k = 0; k < lam; ++k)
    for (size_t i = 0; i < n_; ++i)
      x_[k * n_ + i] = mean_[i] + sigma_ * std::sqrt(diag_c_[i]) * z_[k * n_ + i];
  return x_;
}

void SepCmaes::tell(std::span<const double> values) {
  const size_t lam = static_cast<size_t>(lambda_);
  if (values.size() != lam) throw std::logic_error("SepCmaes::tell: one value per candidate expected");
  std::vector<size_t> order(lam);
  std::iota(order.begin(), order.end(), size_t(0));
  // Largest first; ties keep the candidates' order (deterministic).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] > values[b]; });

  // Recombination (tutorial eq. 41-42): y_w and z_w = C^-1/2 y_w.
  std::vector<double> zw(n_, 0.0), yw(n_, 0.0);
  for (int r = 0; r < mu_; ++r) {
    const double* z = z_.data() + order[r] * n_;
    for (size_t i = 0; i < n_; ++i) zw[i] += weights_[r] * z[i];
  }
  for (size_t i = 0; i < n_; ++i) {
    yw[i] = std::sqrt(diag_c_[i]) * zw[i];
    mean_[i] += sigma_ * yw[i];
  }
  // Step-size path (eq. 43) and h_sigma.
  const double a = std::sqrt(cs_ * (2 - cs_) * mueff_);
  double ps2 = 0;
  for (size_t i = 0; i < n_; ++i) {
    ps_[i] = (1 - cs_) * ps_[i] + a * zw[i];
    ps2 += ps_[i] * ps_[i];
  }
  const double ps_norm = std::sqrt(ps2);
  // 1 - (1 - cs)^(2(g+1)), through detmath so that it is the same everywhere.
  const double attenuation = 1 - detmath::exp(2.0 * static_cast<double>(gen_ + 1) * detmath::log(1 - cs_));
  const bool hsig = ps_norm / std::sqrt(std::max(attenuation, 1e-300)) < (1.4 + 2 / (static_cast<double>(n_) + 1)) * chi_n_;
  // Covariance path (eq. 45) and the diagonal update (eq. 47 with C diagonal).
  const double b = hsig ? std::sqrt(cc_ * (2 - cc_) * mueff_) : 0.0;
  const double dh = hsig ? 0.0 : c1_ * cc_ * (2 - cc_);
  for (size_t i = 0; i < n_; ++i) {
    pc_[i] = (1 - cc_) * pc_[i] + b * yw[i];
    double rank_mu = 0;
    for (int r = 0; r < mu_; ++r) {
      const double z = z_[order[r] * n_ + i];
      rank_mu += weights_[r] * z * z;  // y^2 / c_ii = z^2
    }
    diag_c_[i] = (1 - c1_ - cmu_ + dh) * diag_c_[i] + c1_ * pc_[i] * pc_[i] + cmu_ * diag_c_[i] * rank_mu;
  }
  // Step size (eq. 44).
  sigma_ *= detmath::exp((cs_ / ds_) * (ps_norm / chi_n_ - 1));
  ++gen_;

  // Termination (tutorial, appendix B.3), on the best value of each generation.
  const double best = values[order[0]], worst = values[order[lam - 1]];
  best_hist_.push_back(best);
  const double n = static_cast<double>(n_);
  const size_t tolfun_window = 10 + static_cast<size_t>(std::ceil(30 * n / lambda_));
  if (std::isfinite(best) && best_hist_.size() >= tolfun_window) {
    const auto first = best_hist_.end() - static_cast<long>(tolfun_window);
    const auto [lo, hi] = std::minmax_element(first, best_hist_.end());
    const double tol = 1e-12 * std::max(std::fabs(*hi), 1e-300);
    if (*hi - *lo <= tol && best - worst <= tol) stop_ = CmaesStop::kTolFun;
  }
  if (sigma_ * max_axis() < 1e-11 * sigma0_) stop_ = CmaesStop::kTolX;
  if (max_axis() > 1e7 * min_axis()) stop_ = CmaesStop::kCondition;
  // Stagnation: over the last 20% of generations, but at least 120 + 30 n /
  // lambda and at most 20000, the median of the newest 30% of generation
  // bests is not above the median of the oldest 30%.
  const size_t window = std::min<size_t>(
      20000, std::max<size_t>(120 + static_cast<size_t>(30 * n / lambda_), best_hist_.size() / 5));
  if (best_hist_.size() >= window && window >= 10) {
    const auto start = best_hist_.end() - static_cast<long>(window);
    const size_t part = window * 3 / 10;
    const double old_med = median(std::vector<double>(start, start + static_cast<long>(part)));
    const double new_med = median(std::vector<double>(best_hist_.end() - static_cast<long>(part), best_hist_.end()));
    if (!(new_med > old_med)) stop_ = CmaesStop::kStagnation;
  }
  if (best_hist_.size() > 40000) best_hist_.erase(best_hist_.begin(), best_hist_.begin() + 20000);
}

}  // namespace chunkinv
