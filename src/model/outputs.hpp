// What a path and a method produce for one sample. A path forms L (LForm);
// a method inverts it (InverseRun), once on the path's L and once on the
// gold L, so that the error of the inverse alone can be told apart from
// the error of L.
#pragma once
#include <string>
#include <vector>

#include "core/matrix.hpp"

namespace chunkinv {

// The reference of every error: L and (I + L)^-1 in FP64 (SPEC §2 "gold").
struct GoldOutput {
  Mat L;
  Mat inv;
};

// L as one path forms it. Decays per row (or per element for per-channel
// gates) as the path holds them; empty where the path forms none (gold).
struct LForm {
  std::vector<double> decay, inv_decay;
  Mat L;  // strict lower, each entry the exact value of the path's storage format
};

// A matrix a method built on the way (Neumann's powers, a substitution's
// diagonal blocks), kept only when asked for (inspect).
struct Intermediate {
  std::string label;  // "L^2", "X[0:8,0:8]", ...
  Mat m;
};

struct InverseRun {
  Mat inv;                                 // in the method's output format, as exact doubles
  std::vector<double> diagnostics;         // one per MethodSpec::diagnostics, in that order
  std::vector<Intermediate> intermediates; // only when asked for
};

struct PathOutput {
  LForm l;
  InverseRun on_path_l;  // the method on the path's L
  InverseRun on_gold_l;  // the same method, same arithmetic, on the gold L
};

}  // namespace chunkinv
