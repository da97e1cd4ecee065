// Method `block_nested`: tt-metal's `invert_block_nested` (PR #55626, the fix
// of issue #55420), which nests three block levels so that every product
// keeps one strictly lower factor and no large power of N is formed. With
// N = -L and masks of N by block:
//   level 1: N1 = N inside the 4-row diagonal blocks; N1^4 = 0, so
//            A = (I - N1)^-1 = I + N1 (I + N1 (I + N1))      (2 products);
//   level 2: L2 = N inside the 8-row diagonal blocks but outside the 4-row
//            ones; M2 = A L2 has M2^2 = 0, so B = (I + M2) A = A + M2 A  (2);
//   level 3: L3 = N outside the 8-row diagonal blocks; M3 = B L3 is nilpotent
//            of index ceil(C/8), so (I - N)^-1 = (I + M3)(I + M3^2)...(I + M3^(2^(f-1))) B
//            with 2^f >= ceil(C/8): the kernel's C = 32 has f = 2 (4 products,
//            8 in all); other chunks are this project's generalisation.
// precision: as `doubling` (methods/precision.hpp).
#include <cmath>
#include <string>

#include "methods/block_nested/params.hpp"
#include "methods/method.hpp"
#include "methods/precision.hpp"

namespace chunkinv {
namespace {

const MetricInfo kDiagnostics[] = {
    {"work_max", MetricKind::kValue,
     "max |entry| over N, A, B, M2, M3, its powers, the factor product and the result; inf if any is non-finite"},
};

const MethodParam kParams[] = {
    {"precision", "fp32", prec::kTtPrecisionChoices, 0, 0, prec::kTtPrecisionHelp},
};

// N restricted to the entries (i, j) for which keep(i, j) holds.
template <class Keep>
Mat masked(const Mat& n, Keep keep) {
  Mat m = Mat::Zero(n.rows(), n.cols());
  for (Eigen::Index i = 0; i < n.rows(); ++i)
    for (Eigen::Index j = 0; j < n.cols(); ++j)
      if (keep(i, j)) m(i, j) = n(i, j);
  return m;
}

InverseRun invert_block_nested(const Mat& l_in, const Method& method, bool keep) {
  const prec::Arith arith = method.params<BlockNestedParams>().arith;
  const int c = static_cast<int>(l_in.rows());
  const Mat n = -prec::round_input(l_in, arith);
  const Mat id = Mat::Identity(c, c);
  InverseRun run;
  double work_max = prec::max_abs(n);
  auto note = [&](const Mat& m) { work_max = std::fmax(work_max, prec::max_abs(m)); };

  const Mat n1 = masked(n, [](Eigen::Index i, Eigen::Index j) { return i / 4 == j / 4; });
  Mat a = prec::add(id, n1, arith);
  for (int step = 0; step < 2; ++step) a = prec::add(id, prec::matmul(n1, a, arith), arith);
  note(a);
  if (keep) run.intermediates.push_back({"A (4-row blocks)", a});

  const Mat l2 = masked(n, [](Eigen::Index i, Eigen::Index j) { return i / 8 == j / 8 && i / 4 != j / 4; });
  const Mat m2 = prec::matmul(a, l2, arith);
  const Mat m2a = prec::matmul(m2, a, arith);
  const Mat b = prec::add(a, m2a, arith);
  note(m2);
  note(m2a);
  note(b);
  if (keep) run.intermediates.push_back({"B (8-row blocks)", b});

  Mat inv = b;
  const int blocks = (c + 7) / 8;
  if (blocks > 1) {
    const Mat l3 = masked(n, [](Eigen::Index i, Eigen::Index j) { return i / 8 != j / 8; });
    Mat m3 = prec::matmul(b, l3, arith);
    note(m3);
    Mat prod = prec::add(id, m3, arith);
    for (int reach = 2; reach < blocks; reach *= 2) {  // prod covers M3^0..M3^(reach-1)
      m3 = prec::matmul(m3, m3, arith);
      note(m3);
      prod = prec::matmul(prod, prec::add(id, m3, arith), arith);
      note(prod);
    }
    if (keep) run.intermediates.push_back({"(I + M3)(I + M3^2)...", prod});
    inv = prec::matmul(prod, b, arith);
  }
  note(inv);
  run.inv = inv;
  run.diagnostics = {work_max};
  return run;
}

}  // namespace

extern const MethodSpec kBlockNestedMethod{
    .name = "block_nested",
    .arithmetic = "tt-metal invert_block_nested: N = -L; A = (I - N1)^-1 on 4-row blocks by I + N1(I + N1(I + N1)); B "
                  "= A + (A L2) A joins them into 8-row blocks; M3 = B L3, INV = (I + M3)(I + M3^2)... B across the "
                  "8-row blocks; precision=fp32 (FMA chain), tf32 or bf16 operands, FP32 accumulation and sums",
    .diagnostics = kDiagnostics,
    .invert = invert_block_nested,
    .params = kParams,
    .parse = parse_as<BlockNestedParams>,
};

}  // namespace chunkinv
