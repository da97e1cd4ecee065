// How a step's stages deal their elements to the threads of a block (the
// forward's and the backward's steps, downstream/forward_step.hpp and
// backward_step.hpp): each element formed by one thread, the same
// operations whichever, so any thread count gives the same bits. A context
// `X` gives the thread's index and the block's size.
#pragma once
#include <cstddef>

#include "core/hd.hpp"

namespace chunkinv::stages {

// One thread, no barrier: a step as the CPU runs it.
struct Serial {
  int thread() const { return 0; }
  int threads() const { return 1; }
  void sync() const {}
};

// Threads of the block take the elements [tid, tid + threads, ...) of each stage.
template <class X, class F>
CHUNKINV_HD inline void each(X& x, size_t n, F&& f) {
  for (size_t i = size_t(x.thread()); i < n; i += size_t(x.threads())) f(i);
}
// The elements (r, c) of a rows x cols stage, f(r, c, r cols + c): one thread takes them in row order
// without a division, several as each() deals them.
template <class X, class F>
CHUNKINV_HD inline void each2(X& x, int rows, int cols, F&& f) {
  if (x.threads() == 1) {
    for (int r = 0, i = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c, ++i) f(r, c, i);
    return;
  }
  each(x, size_t(rows) * cols, [&](size_t i) { f(int(i / cols), int(i % cols), int(i)); });
}

// Elements (r, e0 .. e0 + 3) of a rows x cols stage, a thread each group of four: f(r, e0, m).
template <class X, class F>
CHUNKINV_HD inline void each4(X& x, int rows, int cols, F&& f) {
  const int groups = (cols + 3) / 4;
  each(x, size_t(rows) * groups, [&](size_t i) {
    const int r = int(i / groups), e0 = int(i % groups) * 4;
    f(r, e0, cols - e0 < 4 ? cols - e0 : 4);
  });
}

}  // namespace chunkinv::stages
