// One matrix type for every path: the exact double of each entry's value in
// the path's storage format (BF16/FP16/FP32 values are exact in double).
#pragma once
#include <Eigen/Core>

namespace chunkinv {

using Mat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Vec = Eigen::VectorXd;

}  // namespace chunkinv
