// The programs that one block of threads runs for one sample: the gold
// (compute_gold, and evaluate_reference in its tail), the metrics of a
// (path, neumann) entry (evaluate), of the kernel path's and the gold
// path's entries at once (pair_fast_program) and the gold's own
// (evaluate_reference, for the samples the gold's tail leaves). One source for the GPU
// (metrics/device_metrics.cu runs them with a __syncthreads barrier) and the
// CPU (the tests run the threads of a block one after another), so that the
// layout and indexing are checked here too, not only on a GPU.
//
// A program is a sequence of phases, `blk.each([&](int t) {...})`: every
// thread t runs the phase's function, then all wait. A phase reads only what
// earlier phases wrote. State a thread keeps from phase to phase lives in
// `blk.local<V>()[t]` (registers on the GPU, one V per thread on the CPU).
// Shared memory: `sm` (doubles, the sizes below) and `fl` (flags and counts).
//
// Work split, keeping every sum in the CPU's order:
//  - gold L: each pair's dot over k in order. A thread takes 2 x 2 tiles of
//    pairs (i, j) strictly below the tiles' diagonal, and one pair (2a + 1,
//    2a) of the diagonal's tiles (their only pair with j < i); keys (and
//    per-channel cumulated gates) staged in shared memory 32 channels at a
//    time, as doubles, channel-major;
//  - inverses: one thread per column (fp64::unit_lower_solve_column); the
//    threads of a warp walk the same (i, j) so that L's entry is one
//    broadcast read; on a finite L a warp skips the rows above its first
//    column (exact, see fp64_order.hpp); the gold's solve gives each
//    column two threads, one for each half of a panel's sums;
//  - residual product: in the full programs one thread per entry
//    (fp64::residual_entry over every k); in the fast ones 8 x 8 tiles on
//    the FP64 tensor cores, a warp a tile (residual_pass);
//  - each rel_rmse's sums are in classes (fp64::ChunkSums): in the full
//    programs (metrics_program, reference_program) over C^2 entries, the
//    metrics of a sample at once, one thread each, on different warps
//    where there are; in the fast programs (metrics_fast_program,
//    pair_fast_program, reference_fast_program and the gold's tail: the
//    samples whose matrices are zero above the diagonal) over the lower
//    triangle, a slab of terms formed by every thread, then each sum's
//    eight classes added side by side, a thread a class (add_classes).
//
// The programs by file: device_blocks_common.hpp (flags, tiles, slabs,
// shared-memory layouts), device_gold_program.hpp (the gold),
// device_metrics_program.hpp (the full programs), device_fast_programs.hpp
// (the fast ones and the pair).
#pragma once

#include "metrics/device_blocks_common.hpp"
#include "metrics/device_fast_programs.hpp"
#include "metrics/device_gold_program.hpp"
#include "metrics/device_metrics_program.hpp"
