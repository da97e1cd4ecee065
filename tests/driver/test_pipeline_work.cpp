// The pipeline's work model (driver/pipeline_work) against counts written
// out by hand from the code, one case at a time: the buffers each stage
// reads and writes, the gold's dot products (linear in d, on the FP64
// units or the tensor cores by C), the solves (cubic in C), the kernel's
// tensor-core tiles, and the pair of entries against the two apart.
#include <gtest/gtest.h>

#include <numbers>
#include <stdexcept>
#include <string>

#include "driver/pipeline_work.hpp"

using namespace chunkinv;

namespace {

// The operation counts docs/roofline.md gives ("Counting"), in FP64 FLOPs.
constexpr double kDiv = 15, kSqrt = 13;
constexpr double kExp = kDiv + 36;                                   // 51
constexpr double kLog = kDiv + 36;                                   // 51
constexpr double kSigmoid = kExp + 1 + kDiv;                         // 67
constexpr double kNormalPair = 4 / std::numbers::pi * 9 + (3 + kLog + 1 + kDiv + kSqrt + 2);

PipelineWorkShape shape(int chunk, int dim = 128, int gate_width = 1) {
  PipelineWorkShape s;
  s.chunk = chunk;
  s.dim = dim;
  s.gate_width = gate_width;
  s.kernel_entry.present = true;
  s.gold_entry.present = true;
  return s;
}

double packed(int C) { return C * (C + 1) / 2.0; }

TEST(PipelineWork, UnknownStagesAndShapesThrow) {
  EXPECT_THROW(stage_work("metrics", shape(16)), std::invalid_argument);
  EXPECT_THROW(stage_work("Gold", shape(16)), std::invalid_argument);
  EXPECT_THROW(stage_work("", shape(16)), std::invalid_argument);
  auto bad = [](auto change) {
    PipelineWorkShape s = shape(16);
    change(s);
    EXPECT_THROW(stage_work("gold", s), std::invalid_argument);
  };
  bad([](PipelineWorkShape& s) { s.chunk = 1; });
  bad([](PipelineWorkShape& s) { s.chunk = 65; });
  bad([](PipelineWorkShape& s) { s.dim = 100; });
  bad([](PipelineWorkShape& s) { s.gate_width = 64; });
  bad([](PipelineWorkShape& s) {
    s.family = DeviceDraw::Kind::kWeakDecayCorrelated;
    s.gate_width = s.dim;
  });
  bad([](PipelineWorkShape& s) { s.pad = 24; });
  bad([](PipelineWorkShape& s) { s.kernel_version = 3; });
  bad([](PipelineWorkShape& s) { s.gold_l_fp16 = false; });  // gold_run reads it
  bad([](PipelineWorkShape& s) { s.gold_run = false; });     // the gold path's entry is that run
  bad([](PipelineWorkShape& s) { s.folded_values = -1; });
  for (const char* stage :
       {"inputs", "gold", "kernel", "metrics(kernel, gold)", "metrics(kernel)", "metrics(gold)", "fold"})
    EXPECT_NO_THROW(stage_work(stage, shape(16))) << stage;
}

TEST(PipelineWork, StageWorkAddsEveryResource) {
  StageWork a{1, 2, 3, 4, 5}, b{10, 20, 30, 40, 50};
  a += b;
  EXPECT_EQ(a.fp64, 11);
  EXPECT_EQ(a.fp64_mma, 22);
  EXPECT_EQ(a.fp16_mma, 33);
  EXPECT_EQ(a.fp32, 44);
  EXPECT_EQ(a.bytes, 55);
}

// C = 16, d = 128, per-token gates: each stage's buffers, byte by byte.
TEST(PipelineWork, BytesAreTheBuffersOfOneCase) {
  const PipelineWorkShape s = shape(16);
  // inputs: keys 16 x 128 BF16 (4096), g 16 doubles (128), beta 16 doubles
  // (128), fp16(beta) (32), written.
  EXPECT_EQ(stage_work("inputs", s).bytes, 4096 + 128 + 128 + 32);
  // gold: keys, g, beta read (4352); gold L and inverse (2 x 2048),
  // fp16(gold L) (512), the reference's 4 values (32) written.
  EXPECT_EQ(stage_work("gold", s).bytes, 4352 + 4096 + 512 + 32);
  // kernel, the whole samples: keys, g, fp16(beta) (4256); decays and
  // inverse decays (64), L and INV (1024), highest power and power max (8).
  // The runs on the gold L: fp16(gold L) (512); their INV (512) and two
  // diagnostics (8).
  EXPECT_EQ(stage_work("kernel", s).bytes, 4256 + 64 + 1024 + 8 + 512 + 512 + 8);
  // metrics(kernel): decays (64), the kernel's L (512), the gold L (2048),
  // the gold inverse (2048), INV (512), the run (512), four diagnostics
  // (16); 13 values (104).
  EXPECT_EQ(stage_work("metrics(kernel)", s).bytes, 64 + 512 + 2048 + 2048 + 512 + 512 + 16 + 104);
  // metrics(gold): the gold L (2048), the gold inverse (2048), the run as
  // INV and as itself, once (512), its two diagnostics (8); 13 values.
  EXPECT_EQ(stage_work("metrics(gold)", s).bytes, 2048 + 2048 + 512 + 8 + 104);
  // The pair: every operand once; both rows of values.
  EXPECT_EQ(stage_work("metrics(kernel, gold)", s).bytes, 64 + 512 + 2048 + 2048 + 512 + 512 + 16 + 208);

  PipelineWorkShape lean = s;  // no run on the gold L, no gold entry, no reference
  lean.gold_run = lean.gold_l_fp16 = lean.reference = lean.gold_entry.present = false;
  EXPECT_EQ(stage_work("gold", lean).bytes, 4352 + 4096);
  EXPECT_EQ(stage_work("kernel", lean).bytes, 4256 + 64 + 1024 + 8);
  EXPECT_EQ(stage_work("metrics(kernel)", lean).bytes, 64 + 512 + 2048 + 2048 + 512 + 8 + 104);
  EXPECT_EQ(stage_work("metrics(gold)", lean).bytes, 0);
  EXPECT_EQ(stage_work("metrics(kernel, gold)", lean).fp64, 0);

  // Per-channel gates: g is 16 x 128 doubles, the decays 16 x 128 BF16 each.
  const PipelineWorkShape ch = shape(16, 128, 128);
  EXPECT_EQ(stage_work("inputs", ch).bytes, 4096 + 16384 + 128 + 32);
  EXPECT_EQ(stage_work("kernel", ch).bytes, 4096 + 16384 + 32 + 2 * 4096 + 1024 + 8 + 512 + 512 + 8);
}

// The kernel's launch without the runs on the gold L (the peer's work):
// the memory floors docs/notes/gpu-notes.md computed for runs 84-86, d = 128.
TEST(PipelineWork, KernelBytesAreTheNotesMemoryFloor) {
  const double floor[] = {5352, 12744, 33672};
  int i = 0;
  for (int C : {16, 32, 64}) {
    PipelineWorkShape s = shape(C);
    s.gold_run = s.gold_l_fp16 = s.gold_entry.present = false;
    EXPECT_EQ(stage_work("kernel", s).bytes, floor[i++]) << C;
  }
}

// Above C = 32 the kernel entry's inv_method_only is a program of its own,
// which reads the kernel's L and INV (FP16) a second time; at C <= 32 the
// fast program forms it from what it has staged.
TEST(PipelineWork, DeferredMethodReadsTheKernelsLAndInvAgain) {
  auto method_bytes = [](int C) {
    PipelineWorkShape on = shape(C), off = shape(C);
    off.kernel_entry.method_only = false;
    return stage_work("metrics(kernel)", on).bytes - stage_work("metrics(kernel)", off).bytes;
  };
  EXPECT_EQ(method_bytes(32), 0);
  EXPECT_EQ(method_bytes(33), 33 * 33 * 4);
  EXPECT_EQ(method_bytes(64), 64 * 64 * 4);
}

TEST(PipelineWork, FoldReadsEachValueOnce) {
  PipelineWorkShape s = shape(32);
  s.folded_values = 13 + 13 + 4;
  const StageWork w = stage_work("fold", s);
  EXPECT_EQ(w.bytes, 30 * 8);
  EXPECT_EQ(w.fp64 + w.fp64_mma + w.fp16_mma + w.fp32, 0);
}

// The gold at C = 8, d = 16, per-token gates, written out term by term.
TEST(PipelineWork, GoldOfOneChunkByHand) {
  PipelineWorkShape s = shape(8, 16);
  s.reference = false;
  // G cumulated: 8 adds. Dot products on the FP64 units: 32 threads, each
  // one 2 x 2 tile and one diagonal pair, 5 FMAs a channel: 2 x 32 x 5 x 16.
  // L: 28 pairs, an exp and 3 FLOPs each. The solve: 8 columns, rows 0..7,
  // 3 FLOPs a term (28 terms), rows 4..7 adding their panel sum and their
  // two accumulators (2 each).
  const double cum = 8, dots = 2 * 32 * 5 * 16, l = 28 * (kExp + 3), solve = 8 * (3 * 28 + 4 * 2);
  EXPECT_EQ(stage_work("gold", s).fp64, cum + dots + l + solve);
  EXPECT_EQ(stage_work("gold", s).fp64_mma, 0);
  // The reference's residual at C = 8: one 8 x 8 tile, two m8n8k4 (k = 0..3
  // and 4..7); the lanes form the 36 entries of I + L on and below the
  // diagonal with an add each, then each of the 36 lower entries takes
  // r - y, its square and the sum's add.
  s.reference = true;
  EXPECT_EQ(stage_work("gold", s).fp64, cum + dots + l + solve + 36 + 3 * 36);
  EXPECT_EQ(stage_work("gold", s).fp64_mma, 2 * 512);
}

TEST(PipelineWork, GoldDotProductsScaleWithDim) {
  // The gold without its reference (whose residual is on the tensor cores too).
  auto shape = [](int C, int d = 128, int gw = 1) {
    PipelineWorkShape s = ::shape(C, d, gw);
    s.reference = false;
    return s;
  };
  // Per-token gates up to C = 16: the FP64 units' FMAs, 2 x 32 x 5 a channel.
  const StageWork a = stage_work("gold", shape(16, 128)), b = stage_work("gold", shape(16, 256));
  EXPECT_EQ(b.fp64 - a.fp64, 2 * 32 * 5 * 128);
  EXPECT_EQ(b.fp64_mma, 0);
  // Above, the tensor cores: (C / 8)(C / 8 + 1) / 2 tiles of 512 FLOPs, d / 4 steps.
  for (int C : {32, 64}) {
    const StageWork x = stage_work("gold", shape(C, 128)), y = stage_work("gold", shape(C, 256));
    const double tiles = (C / 8) * (C / 8 + 1) / 2;
    EXPECT_EQ(x.fp64_mma, 512 * tiles * 32) << C;
    EXPECT_EQ(y.fp64_mma, 2 * x.fp64_mma) << C;
    EXPECT_EQ(y.fp64, x.fp64) << C;  // nothing else of the gold reads d
  }
  // C = 17 pads its rows to 24: 6 tiles.
  EXPECT_EQ(stage_work("gold", shape(17, 16)).fp64_mma, 512 * 6 * 4);
  // Per-channel gates: every pair's term carries an exp (C = 8: 28 pairs),
  // and the gates are cumulated per channel (8 adds a channel).
  const StageWork c = stage_work("gold", shape(8, 128, 128)), d = stage_work("gold", shape(8, 256, 256));
  EXPECT_EQ(d.fp64 - c.fp64, 128 * (28 * (1 + kExp + 2 + 1) + 8));
  EXPECT_EQ(c.fp64_mma, 0);
}

TEST(PipelineWork, SolvesScaleWithTheCubeOfTheChunk) {
  // The gold's solve at C = 32, per-token gates, reference off: the rest is
  // 32 adds of G and 496 pairs of L. Each of 32 columns: 3 FLOPs a term
  // (496 terms) and 2 for each of rows 4..31.
  PipelineWorkShape s = shape(32);
  s.reference = false;
  EXPECT_EQ(stage_work("gold", s).fp64 - 32 - 496 * (kExp + 3), 32 * (3 * 496 + 28 * 2));
  // The kernel entry's exact inverse of I + L (inv_method_only), then its
  // terms: at C = 16, 16 columns of 3 x 120 + 12 x 2; a difference, two
  // squares and two sums' adds an entry of the lower triangle.
  auto method_cost = [](int C) {
    PipelineWorkShape on = shape(C), off = shape(C);
    off.kernel_entry.method_only = false;
    return stage_work("metrics(kernel)", on).fp64 - stage_work("metrics(kernel)", off).fp64;
  };
  EXPECT_EQ(method_cost(16), 16 * (3 * 120 + 12 * 2) + 5 * packed(16));
  const double ratio = method_cost(32) / method_cost(16);
  EXPECT_GT(ratio, 7.0);  // (32 / 16)^3 = 8, less the lower-order terms
  EXPECT_LT(ratio, 8.5);
  // Above C = 32 each column's solve starts at row c & ~31: less than cubic.
  EXPECT_LT(method_cost(64) / method_cost(32), 7.0);
  // The gold's X keeps only rows from c & ~3 above C = 32 (X by columns):
  // column c solves rows x_kept(c) = c & ~3 to 63, each summing from row
  // x_first(c) = c & ~31: 71,872 terms of 3 FLOPs; rows past their
  // column's first panel add 2 more (2,144 rows).
  PipelineWorkShape g64 = shape(64);
  g64.reference = false;
  EXPECT_EQ(stage_work("gold", g64).fp64 - 64 - 2016 * (kExp + 3), 3 * 71872 + 2 * 2144);
}

TEST(PipelineWork, KernelTilesAsIssued) {
  // C = 16 (one 16 x 16 block): L 2 m16n8k16 a k-block, 8 k-blocks; three
  // squarings, each a square and an update of 2 m16n8k16: 12. The run on
  // the gold L: the 12 again. 4096 FLOPs each.
  EXPECT_EQ(stage_work("kernel", shape(16)).fp16_mma, 4096 * (2 * 8 + 12 + 12));
  // C = 64: 4 x 5 / 2 row-and-column blocks of 2 MMAs, 8 k-blocks (160);
  // five squarings of 2 x (4 x 8 x 4) each (1280), twice.
  EXPECT_EQ(stage_work("kernel", shape(64)).fp16_mma, 4096 * (160 + 1280 + 1280));
  // C = 2: no squaring, L alone.
  EXPECT_EQ(stage_work("kernel", shape(2)).fp16_mma, 4096 * 2 * 8);
  // C = 9 padded to 32 (pad=32): 2 row blocks, three squarings.
  PipelineWorkShape p = shape(9);
  p.pad = 32;
  EXPECT_EQ(stage_work("kernel", p).fp16_mma, 4096 * (6 * 8 + 2 * 4 * 3 * 8));
  // The version changes how the keys are scaled (FP32-pipe), not the tiles.
  PipelineWorkShape v1 = shape(64);
  v1.kernel_version = 1;
  EXPECT_EQ(stage_work("kernel", v1).fp16_mma, stage_work("kernel", shape(64)).fp16_mma);
  EXPECT_NE(stage_work("kernel", v1).fp32, stage_work("kernel", shape(64)).fp32);
  // The FP64 in the kernel: g log2(e), one product a gate.
  EXPECT_EQ(stage_work("kernel", shape(64)).fp64, 64);
  EXPECT_EQ(stage_work("kernel", shape(64, 128, 128)).fp64, 64 * 128);
}

TEST(PipelineWork, PairIsTheTwoEntriesLessWhatTheyShare) {
  for (int C : {4, 8, 16, 32, 64}) {
    const PipelineWorkShape s = shape(C);
    const StageWork k = stage_work("metrics(kernel)", s), g = stage_work("metrics(gold)", s),
                    p = stage_work("metrics(kernel, gold)", s);
    // Shared terms: the gold L's and gold inverse's squares and their adds
    // (4), and the run's error sum, which is the gold path's INV's (3):
    // 7 FLOPs fewer an entry of the lower triangle. The residuals' passes
    // are the same two.
    EXPECT_EQ(p.fp64, k.fp64 + g.fp64 - 7 * packed(C)) << C;
    EXPECT_EQ(p.fp64_mma, k.fp64_mma + g.fp64_mma) << C;
    // Shared operands: the gold L, the gold inverse, the run and its two
    // diagnostics, read once instead of twice; above C = 32 the kernel
    // entry alone reads its L and INV a second time (its inv_method_only
    // program), which the pair, forming it from what it staged, does not.
    const double again = C > 32 ? 4.0 * C * C : 0.0;
    EXPECT_EQ(p.bytes, k.bytes + g.bytes - (8.0 + 8 + 2) * C * C - 8 - again) << C;
    EXPECT_EQ(p.fp16_mma + p.fp32, 0) << C;
  }
}

TEST(PipelineWork, EntriesAskingForLessDoLess) {
  // The kernel entry with only inv_total (and inv_gold_l, the run being
  // there): inv_total's difference, square, reference square and two adds,
  // inv_gold_l's difference, square and add, each a lower entry; no L read.
  PipelineWorkShape s = shape(16);
  s.kernel_entry = {.present = true, .l_rel_rmse = false, .method_only = false, .residual = false, .l_finite = false};
  const StageWork w = stage_work("metrics(kernel)", s);
  EXPECT_EQ(w.fp64, packed(16) * (5 + 3));
  EXPECT_EQ(w.bytes, 2048 + 512 + 512 + 64 + 16 + 104);
  // The residual alone adds its product and its terms, and the gold L's reads.
  s.kernel_entry.residual = true;
  const StageWork r = stage_work("metrics(kernel)", s);
  // At C = 16, row blocks 0 and 1: tiles (0, 0) and (1, 1) two m8n8k4
  // each, (1, 0) four; their lanes form the entries of I + L they read on
  // and below the diagonal, 36 in each diagonal tile and 9 + 10 + ... + 16
  // = 100 in (1, 0); then r - y, its square and the add, 3 a lower entry.
  EXPECT_EQ(r.fp64 - w.fp64, 36 + 36 + 100 + 3 * packed(16));
  EXPECT_EQ(r.fp64_mma - w.fp64_mma, 8 * 512);
  EXPECT_EQ(r.bytes - w.bytes, 2048);
  // The pair reads no flag: every value of both entries.
  s.gold_entry = s.kernel_entry;
  EXPECT_EQ(stage_work("metrics(kernel, gold)", s).fp64, stage_work("metrics(kernel, gold)", shape(16)).fp64);
}

TEST(PipelineWork, InputsByFamily) {
  // weak_decay_correlated, d = 16: one key row of 8 normal pairs, its norm
  // (32), a square root, a reciprocal and 16 products; no beta or gates drawn.
  PipelineWorkShape w = shape(8, 16);
  w.family = DeviceDraw::Kind::kWeakDecayCorrelated;
  const double row = 8 * kNormalPair + 32 + kSqrt + kDiv + 16;
  EXPECT_NEAR(stage_work("inputs", w).fp64, row, 1e-9);
  // floor: 8 such rows, and 4 threads of beta: a pair and two sigmoids each.
  PipelineWorkShape f = w;
  f.family = DeviceDraw::Kind::kFloor;
  const double beta = 4 * (kNormalPair + 2 * kSigmoid);
  EXPECT_NEAR(stage_work("inputs", f).fp64, 8 * row + beta, 1e-9);
  // model_like adds the gates: per token another pair and two sigmoids
  // and products; per channel a pair of normals every two channels and a
  // sigmoid and a product every gate.
  PipelineWorkShape m = f;
  m.family = DeviceDraw::Kind::kModelLike;
  EXPECT_NEAR(stage_work("inputs", m).fp64, 8 * row + beta + 4 * (kNormalPair + 2 * (kSigmoid + 1)), 1e-9);
  m.gate_width = f.gate_width = 16;
  EXPECT_NEAR(stage_work("inputs", m).fp64, 8 * row + beta + 8 * (8 * kNormalPair + 16 * (kSigmoid + 1)), 1e-9);
  EXPECT_NEAR(stage_work("inputs", f).fp64, 8 * row + beta, 1e-9);  // the floor's gates are copies
  // The same buffers whatever the family.
  EXPECT_EQ(stage_work("inputs", w).bytes, stage_work("inputs", shape(8, 16)).bytes);
}

}  // namespace
