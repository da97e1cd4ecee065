// sep-CMA-ES: the Covariance Matrix Adaptation Evolution Strategy with a
// diagonal covariance (Ros & Hansen, "A simple modification in CMA-ES
// achieving linear time and space complexity", PPSN 2008), written from
// Hansen's tutorial ("The CMA Evolution Strategy: A Tutorial",
// arXiv:1604.00772, 2016: default parameters of its Table 1, the updates of
// its Fig. 6 with C diagonal). Diagonal because a search over a chunk's
// keys has n = C*d + 2C coordinates (2080 at C = 16, d = 128): the full
// covariance would cost n^2 memory and n^3 per eigendecomposition.
//
// It maximises. Ask/tell: ask() draws a population from Philox normals at
// counters fixed by (seed, stream, generation, candidate, coordinate), so a
// run is the same on every machine and thread count; tell() takes the
// objective values (+inf ranks first; NaN must be mapped by the caller).
// Restarts (IPOP, Auger & Hansen 2005) are the caller's: a new SepCmaes with
// twice the population.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace chunkinv {

struct CmaesOptions {
  int lambda = 0;        // population; 0: 4 + floor(3 ln n)
  double sigma0 = 1.0;   // initial step size
  uint64_t seed = 0;     // Philox key
  uint64_t stream = 0;   // which run of that seed (lane and restart): the sample counter of Rng
};

// Why a run stopped (Hansen's tutorial, appendix B.3); kNone while it runs.
enum class CmaesStop { kNone, kTolFun, kTolX, kStagnation, kCondition };
std::string cmaes_stop_name(CmaesStop s);

class SepCmaes {
 public:
  SepCmaes(std::vector<double> mean, const CmaesOptions& options);

  int lambda() const { return lambda_; }
  size_t dimension() const { return n_; }
  // The next population: lambda() points of dimension() each, row-major.
  const std::vector<double>& ask();
  // Objective values of the population ask() returned, in its order.
  void tell(std::span<const double> values);
  CmaesStop stopped() const { return stop_; }

  uint64_t generation() const { return gen_; }
  double sigma() const { return sigma_; }
  const std::vector<double>& mean() const { return mean_; }
  // Largest and smallest sqrt of the diagonal covariance (axis lengths).
  double max_axis() const;
  double min_axis() const;

 private:
  size_t n_;
  int lambda_, mu_;
  std::vector<double> weights_;
  double mueff_, cs_, ds_, cc_, c1_, cmu_, chi_n_;
  double sigma_, sigma0_;
  uint64_t seed_, stream_, gen_ = 0;
  std::vector<double> mean_, diag_c_, ps_, pc_;
  std::vector<double> z_, x_;       // the last population: standard normals and points
  std::vector<double> best_hist_;   // best value of each generation (tolerance and stagnation checks)
  CmaesStop stop_ = CmaesStop::kNone;
};

}  // namespace chunkinv
