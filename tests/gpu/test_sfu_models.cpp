// The SFU instructions on the GPU against their CPU models
// (arith/activation.hpp) on every FP32 input: each instruction runs over all
// 2^32 bit patterns, in slices, and every result is compared with the model
// bit for bit, the differences counted per binade (sign and exponent of x)
// and printed. rsqrt and ex2 must agree everywhere; tanh wherever its model
// claims to be exact (tanh_model_is_exact), its residual elsewhere printed.
// Also re-measures the committed set tests/arith/sfu_measured.inc.
// Run: build/chunkinv_tests --gtest_filter='GpuSfuModels.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "arith/activation.hpp"
#include "core/thread_pool.hpp"
#include "gpu/gpu_test_common.hpp"
#ifdef CHUNKINV_HAVE_CUDA
#include "gpu/probes.hpp"
#endif

using namespace chunkinv;

#ifdef CHUNKINV_HAVE_CUDA
namespace {

using gpu::testing::SfuOp;

struct Measured {
  SfuOp op;
  uint32_t x, y;
};
constexpr Measured kMeasured[] = {
#include "../arith/sfu_measured.inc"
};

float model(SfuOp op, float x) {
  switch (op) {
    case SfuOp::kTanh: return tanh_approx_model(x);
    case SfuOp::kRsqrt: return rsqrt_approx_model(x);
    case SfuOp::kEx2: return ex2_approx_model(x);
  }
  return 0.0f;
}

const char* op_name(SfuOp op) {
  return op == SfuOp::kTanh ? "tanh.approx.f32" : op == SfuOp::kRsqrt ? "rsqrt.approx.ftz.f32" : "ex2.approx.ftz.f32";
}

// Per binade (index: the input's top 9 bits, sign and biased exponent).
struct Counts {
  std::vector<uint64_t> inputs = std::vector<uint64_t>(512), differ = std::vector<uint64_t>(512);
  std::vector<uint64_t> differ_claimed = std::vector<uint64_t>(512);  // where the model claims exactness
  std::vector<uint32_t> first = std::vector<uint32_t>(512, 0);         // first differing input
};

Counts scan(SfuOp op) {
  constexpr uint64_t kSlice = 1ull << 26, kPiece = 1ull << 16;
  ThreadPool pool(0);
  Counts c;
  std::vector<uint32_t> hw(kSlice);
  std::vector<Counts> piece(kSlice / kPiece);
  for (uint64_t first = 0; first < (1ull << 32); first += kSlice) {
    gpu::testing::sfu_range(op, uint32_t(first), kSlice, hw.data());
    pool.parallel_for(piece.size(), [&](size_t p) {
      Counts& pc = piece[p];
      std::fill(pc.inputs.begin(), pc.inputs.end(), 0);
      std::fill(pc.differ.begin(), pc.differ.end(), 0);
      std::fill(pc.differ_claimed.begin(), pc.differ_claimed.end(), 0);
      for (uint64_t i = p * kPiece; i < (p + 1) * kPiece; ++i) {
        const uint32_t xb = uint32_t(first + i);
        const float x = std::bit_cast<float>(xb);
        const uint32_t m = std::bit_cast<uint32_t>(model(op, x));
        const int bin = int(xb >> 23);
        ++pc.inputs[bin];
        if (m != hw[i]) {  // bits, NaNs included
          if (pc.differ[bin]++ == 0) pc.first[bin] = xb;
          if (op != SfuOp::kTanh || tanh_model_is_exact(x)) ++pc.differ_claimed[bin];
        }
      }
    });
    for (const Counts& pc : piece)  // in piece order: the first difference is the lowest input
      for (int b = 0; b < 512; ++b) {
        if (c.differ[b] == 0 && pc.differ[b] != 0) c.first[b] = pc.first[b];
        c.inputs[b] += pc.inputs[b];
        c.differ[b] += pc.differ[b];
        c.differ_claimed[b] += pc.differ_claimed[b];
      }
  }
  return c;
}

uint64_t report(SfuOp op, const Counts& c) {
  uint64_t differ = 0, claimed = 0;
  std::printf("%s, every FP32 input against the CPU model; binades with a difference:\n", op_name(op));
  std::printf("  %-5s %-8s %12s %12s %12s  %s\n", "sign", "exponent", "inputs", "differ", "claimed", "first");
  for (int b = 0; b < 512; ++b) {
    differ += c.differ[b];
    claimed += c.differ_claimed[b];
    if (c.differ[b] == 0) continue;
    std::printf("  %-5s %-8d %12llu %12llu %12llu  %08X\n", b >= 256 ? "-" : "+", (b & 255) - 127,
                (unsigned long long)c.inputs[b], (unsigned long long)c.differ[b],
                (unsigned long long)c.differ_claimed[b], c.first[b]);
  }
  std::printf("  total: %llu of 2^32 differ, %llu where the model claims exactness\n", (unsigned long long)differ,
              (unsigned long long)claimed);
  return claimed;
}

}  // namespace
#endif

TEST(GpuSfuModels, MeasuredSetIsWhatTheHardwareComputes) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  for (SfuOp op : {SfuOp::kTanh, SfuOp::kRsqrt, SfuOp::kEx2}) {
    std::vector<uint32_t> x, want;
    for (const Measured& m : kMeasured)
      if (m.op == op) x.push_back(m.x), want.push_back(m.y);
    std::vector<uint32_t> got(x.size());
    gpu::testing::sfu_apply(op, x.data(), got.data(), x.size());
    size_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i) differ += got[i] != want[i];
    std::printf("%s: %zu committed results, %zu differ from this GPU's\n", op_name(op), x.size(), differ);
    EXPECT_EQ(differ, 0u) << op_name(op);
  }
#endif
}

TEST(GpuSfuModels, RsqrtModelIsTheInstructionOnEveryInput) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  EXPECT_EQ(report(SfuOp::kRsqrt, scan(SfuOp::kRsqrt)), 0u);
#endif
}

TEST(GpuSfuModels, Ex2ModelIsTheInstructionOnEveryInput) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  EXPECT_EQ(report(SfuOp::kEx2, scan(SfuOp::kEx2)), 0u);
#endif
}

TEST(GpuSfuModels, TanhModelIsTheInstructionWhereItClaimsToBe) {
  CHUNKINV_REQUIRE_GPU();
#ifdef CHUNKINV_HAVE_CUDA
  EXPECT_EQ(report(SfuOp::kTanh, scan(SfuOp::kTanh)), 0u);
#endif
}
