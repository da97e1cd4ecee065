// Method `exact`: the gold's inverse, a unit-lower triangular solve in FP64
// (Eigen). On the gold L it is the reference of every error; on a path's L
// it isolates the error of L alone.
#include <Eigen/Dense>

#include "methods/method.hpp"

namespace chunkinv {

Mat unit_lower_inverse(const Mat& l) {
  const Eigen::Index c = l.rows();
  const Mat a = Mat::Identity(c, c) + l;
  return a.triangularView<Eigen::UnitLower>().solve(Mat::Identity(c, c));
}

namespace {
InverseRun invert_exact(const Mat& l, const Method&, bool) { return {unit_lower_inverse(l), {}, {}}; }
}  // namespace

extern const MethodSpec kExactMethod{
    .name = "exact",
    .arithmetic = "FP64 unit-lower triangular solve of I + L (Eigen), no rounding",
    .invert = invert_exact,
    .exact = true,
};

}  // namespace chunkinv
