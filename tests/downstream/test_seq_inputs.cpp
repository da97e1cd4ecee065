// Bad sequences from a tensor set are one line naming the culprit, exit 2,
// nothing written, through `seq --inputs` and through `score --inputs`
// (which hands sequences to seq): cu_seqlens out of order, past the end or
// with an empty sequence, a non-finite or positive g, a sequence that is
// not a whole number of chunks, q missing, v of another shape.
#include <algorithm>
#include <filesystem>
#include <functional>

#include <gtest/gtest.h>

#include "io/zip.hpp"
#include "support/shell.hpp"
#include "support/usage_error.hpp"

namespace chunkinv {
namespace {

Tensor tensor(DType dtype, std::vector<int64_t> shape, double fill) {
  Tensor t;
  t.dtype = dtype;
  size_t n = 1;
  for (int64_t d : shape) n *= size_t(d);
  t.shape = std::move(shape);
  t.values.assign(n, fill);
  return t;
}

void set_cu(TensorMap& m, std::vector<double> cu) {
  m["cu_seqlens"].shape = {int64_t(cu.size())};
  m["cu_seqlens"].values = std::move(cu);
}

// One packed batch row of T = 128 tokens, one head, K = 8, V = 4: unit keys
// and queries (one channel set), g = -0.1, beta = 0.5.
TensorMap good(std::vector<double> cu) {
  const int64_t T = 128, K = 8, V = 4;
  TensorMap m;
  m["q"] = tensor(DType::kF32, {1, T, 1, K}, 0.0);
  m["k"] = tensor(DType::kF32, {1, T, 1, K}, 0.0);
  for (int64_t t = 0; t < T; ++t) m["q"].values[size_t(t * K + t % K)] = m["k"].values[size_t(t * K + (t + 1) % K)] = 1.0;
  m["v"] = tensor(DType::kF32, {1, T, 1, V}, 0.25);
  m["g"] = tensor(DType::kF64, {1, T, 1}, -0.1);
  m["beta"] = tensor(DType::kF64, {1, T, 1}, 0.5);
  Tensor c = tensor(DType::kI64, {int64_t(cu.size())}, 0.0);
  c.values = std::move(cu);
  m["cu_seqlens"] = c;
  return m;
}

TEST(SeqInputs, BadTensorsAreOneLine) {
  const std::string dir = testing::test_dir("seq-bad-inputs");
  write_npz(dir + "/ok.npz", good({0, 64, 128}));
  {
    const auto ok = testing::run_chunkinv_in(dir, "seq --inputs ok.npz -a chunk=16 --paths gold -q -o ok.json");
    ASSERT_EQ(ok.status, 0) << ok.out;
    EXPECT_EQ(testing::load_json(dir + "/ok.json")["results"][0]["samples"], 2);
  }
  const struct {
    const char* name;
    std::function<void(TensorMap&)> spoil;
    std::string expect;
  } cases[] = {
      {"order", [](TensorMap& m) { set_cu(m, {0, 96, 64, 128}); }, "entry [2] = 64 is below entry [1] = 96"},
      {"past", [](TensorMap& m) { set_cu(m, {0, 64, 144}); }, "last entry 144 is not the token count T = 128"},
      {"empty", [](TensorMap& m) { set_cu(m, {0, 64, 64, 128}); }, "sequence 1 has no token"},
      {"nan_g", [](TensorMap& m) { m["g"].values[70] = NAN; }, "is not finite"},
      {"inf_g", [](TensorMap& m) { m["g"].values[3] = -INFINITY; }, "is not finite"},
      {"positive_g", [](TensorMap& m) { m["g"].values[5] = 0.5; }, "g"},
      {"chunks", [](TensorMap& m) { set_cu(m, {0, 40, 128}); }, "has 40 tokens, not a whole number of chunks of 16"},
      {"no_q", [](TensorMap& m) { m.erase("q"); }, "q is missing"},
      {"v_shape", [](TensorMap& m) { m["v"] = tensor(DType::kF32, {1, 64, 1, 4}, 0.25); }, "[v]: shape"},
  };
  for (const auto& c : cases) {
    TensorMap m = good({0, 64, 128});
    c.spoil(m);
    const std::string file = std::string(c.name) + ".npz";
    write_npz(dir + "/" + file, m);
    std::vector<std::string> cmds{"seq --inputs " + file + " -a chunk=16 -o out.json"};
    // Without q the set is no sequences: score takes it for a chunk family's (tested there).
    if (std::string(c.name) != "no_q") cmds.push_back("score --inputs " + file + " --candidate ok.npz -a chunk=16 -o out.json");
    for (const std::string& cmd : cmds) {
      const auto r = testing::run_chunkinv_in(dir, cmd);
      EXPECT_EQ(r.status, 2) << c.name << ": " << cmd << "\n" << r.out;
      EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << c.name << ": " << cmd << "\n" << r.out;
      EXPECT_HAS(r.out, c.expect);
      EXPECT_FALSE(std::filesystem::exists(dir + "/out.json")) << c.name;
      EXPECT_FALSE(std::filesystem::exists(dir + "/out.json.ckpt")) << c.name;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chunkinv
