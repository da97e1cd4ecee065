// Path `candidate`: the L and/or INV that another kernel (Triton, CUDA, NPU)
// produced for the samples of a tensor set, read from a file and measured
// like every path (chunkinv score, docs/inputs.md "Scoring a kernel").
//
// Not in the path registry: it needs a file, so `--paths all` could never
// name it, and `score` is its front door. It is a PathSpec all the same: the
// runner, the metrics, reports, tables and check treat it as any path.
#pragma once
#include "core/matrix.hpp"
#include "paths/path.hpp"

namespace chunkinv {

// Options: file=PATH (required: L and/or INV, optionally decay and
// inv_decay), inputs=PATH and tail=pad|drop (needed where the file holds
// [B, T, H, C] matrices of a token-layout inputs set).
extern const PathSpec kCandidatePath;

namespace candidate {
// What the candidate path makes of one sample for `method`: L = l (or, when
// null, implied_l(*inv)), the method's CPU reference on L and on the gold L,
// and INV = *inv where given. decay and inv_decay may be null.
PathOutput output(const Mat* l, const Mat* inv, const std::vector<double>* decay,
                  const std::vector<double>* inv_decay, const Method& method, const GoldOutput& gold, bool keep);

// The L that `inv` inverts exactly: the strict lower part of inv^-1 - I,
// by an FP64 lower-triangular solve (a candidate that gave INV only).
Mat implied_l(const Mat& inv);
}  // namespace candidate

}  // namespace chunkinv
