// The token recurrence of docs/downstream.md on the GPU, in FP64, bit for
// bit the CPU's Recurrence (downstream/forward.hpp): the same operations in
// the same order (recurrence_dots), exp(g) by detmath's one source
// (core/detmath_hd.hpp). Streaming: a batch of sequences advances a block of
// tokens per call, the states stay on the device between calls, and the
// block's outputs come back: memory K V per sequence plus the block's
// inputs and outputs, never one state per token.
//
// Declared always; defined in gpu/recurrence.cu with CUDA, and by
// gpu/none.cpp (every call a UsageError) without.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chunkinv::gpu {

// "" where the GPU form runs K x V, else why not, in one line: K one of 16,
// 32, 64, 128 (each thread holds K / 8 rows of two columns in registers),
// V 1 to 512.
std::string recurrence_unsupported(int key_dim, int value_dim);

// A batch of n sequences on the device. Host arrays are packed per
// sequence: q, k [n][count][K], g [n][count][1 or K], beta [n][count],
// v [n][count][V], o [n][count][V]; states [n][K][V] (row-major K x V).
class DeviceRecurrence {
 public:
  // Every state starts at h0 (n K V values), or zero where h0 is null.
  // UsageError for an unsupported shape or without a usable GPU. `version`:
  // the kernel's (RecurrenceProblem::version); the same bits either way.
  DeviceRecurrence(int sequences, int key_dim, int value_dim, bool channel_gates, double scale, const double* h0,
                   int version = 1);
  ~DeviceRecurrence();
  DeviceRecurrence(const DeviceRecurrence&) = delete;
  DeviceRecurrence& operator=(const DeviceRecurrence&) = delete;
  // The next `count` tokens of every sequence: their outputs into o.
  void advance(int count, const double* q, const double* k, const double* g, const double* beta, const double* v,
               double* o);
  // The states after the last token advanced, into `out` (n K V values).
  void state(double* out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// `chunkinv bench --recurrence`: B x H sequences of T tokens in fla's
// layout [B, T, H, X] in host memory, put on the device once, then run
// whole (every token, blocks of `block` tokens a launch pair): first once,
// whose outputs and final states of the sequences `keep` (indices b H + h)
// go to `check`; where it returns true, `repeat` passes more, each timed
// by CUDA events from after its states' reset to its last output.
struct RecurrenceProblem {
  int batch = 0, tokens = 0, heads = 0, key_dim = 0, value_dim = 0;
  bool channel_gates = true;
  double scale = 0;
  const double *q = nullptr, *k = nullptr, *g = nullptr, *beta = nullptr, *v = nullptr;
  const double* h0 = nullptr;  // [B H][K][V], or null: zero states
  // The kernel's version (gpu/recurrence_block.hpp): 1, eight lanes a column
  // pair; 2, sixteen (half the registers a lane); 3, version 1 with one pass
  // over the state a token. Every version gives the same bits.
  int version = 1;
};
struct RecurrenceTiming {
  std::vector<double> pass_ms;                // one per timed pass
  double upload_ms = 0;                       // the inputs onto the device, wall time
  std::vector<std::vector<double>> o;         // per kept sequence: T x V, row-major
  std::vector<std::vector<double>> final_state;  // per kept sequence: K x V
  size_t device_bytes = 0;                    // what the run allocated on the device
  int registers = 0;                          // the recurrence kernel's, per thread
  int spill_bytes = 0;                        // its local memory per thread (0: no spills)
};
RecurrenceTiming time_recurrence(const RecurrenceProblem& p, int block, int repeat, const std::vector<int>& keep,
                                 const std::function<bool(const RecurrenceTiming&)>& check);

}  // namespace chunkinv::gpu
