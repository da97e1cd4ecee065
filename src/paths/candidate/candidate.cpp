// Path `candidate`: a kernel's own L and INV, read from a file.
//
// L is the file's L. For every method of the axis the path runs that
// method's CPU reference on it (diagnostics, and on the gold L its twin), and
// where the file holds INV, the INV measured is the file's: the method then
// names the arithmetic the candidate implements. A file with INV only has
// for L the one its INV inverts exactly, so l_rel_rmse is the INV's backward
// error. Decays come from the file's decay and inv_decay where it has them.
#include "paths/candidate/candidate.hpp"

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "inputs/data_families.hpp"
#include "inputs/tensor_set.hpp"

namespace chunkinv::candidate {

Mat implied_l(const Mat& inv) {
  const Eigen::Index c = inv.rows();
  Mat l = Mat(inv.triangularView<Eigen::Lower>().solve(Mat::Identity(c, c))) - Mat::Identity(c, c);
  return l.triangularView<Eigen::StrictlyLower>();
}

PathOutput output(const Mat* l, const Mat* inv, const std::vector<double>* decay,
                  const std::vector<double>* inv_decay, const Method& method, const GoldOutput& gold, bool keep) {
  PathOutput o;
  o.l.L = l ? *l : implied_l(*inv);
  if (decay) o.l.decay = *decay;
  if (inv_decay) o.l.inv_decay = *inv_decay;
  o.on_path_l = method.invert(o.l.L, keep);
  if (inv) o.on_path_l.inv = *inv;
  o.on_gold_l = method.invert(gold.L, keep);
  return o;
}

namespace {

class CandidatePath final : public Path {
 public:
  explicit CandidatePath(PathOptions o) : options_(std::move(o)) {}

  BatchTiming run_batch(const Batch& in, std::span<const Method* const> methods, std::span<PathOutput> out,
                        ThreadPool& pool, bool keep) override {
    const auto t0 = std::chrono::steady_clock::now();
    const size_t n = in.samples.size();
    if (n == 0) return {};
    const Matrices& c = load(in.samples[0].chunk);
    if (in.first + n > c.count)
      throw UsageError(fmt::format("candidate {}: holds {} matrices; samples {}..{} asked for", c.source, c.count,
                                   in.first, in.first + n - 1));
    pool.parallel_for(n, [&](size_t i) {
      const size_t k = in.first + i;
      for (size_t m = 0; m < methods.size(); ++m)
        out[m * n + i] = output(c.L.empty() ? nullptr : &c.L[k], c.INV.empty() ? nullptr : &c.INV[k],
                                c.decay.empty() ? nullptr : &c.decay[k], c.inv_decay.empty() ? nullptr : &c.inv_decay[k],
                                *methods[m], in.gold[i], keep);
    });
    BatchTiming t;
    t.host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return t;
  }

 private:
  // The file read once per chunk size (the matrices of a token-layout file
  // are cut like the inputs).
  struct Matrices {
    std::string source;
    uint64_t count = 0;
    std::vector<Mat> L, INV;
    std::vector<std::vector<double>> decay, inv_decay;
  };

  const Matrices& load(int chunk) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& slot = sets_[chunk];
    if (!slot) {
      const std::string file = options_.at("file");
      const auto it = options_.find("inputs");
      CandidateSet c;
      if (it != options_.end()) {
        const auto set = cached_tensor_set(it->second);
        const auto t = options_.find("tail");
        const auto chunks = cached_chunks(it->second, chunk, parse_tail(t == options_.end() ? "pad" : t->second));
        c = load_candidate(file, *set, *chunks, chunk);
      } else {
        c = load_candidate(file, TensorSet{}, {}, chunk);
      }
      slot = std::make_unique<Matrices>();
      slot->source = c.source;
      slot->count = c.count;
      for (const auto& v : c.L) slot->L.push_back(Eigen::Map<const Mat>(v.data(), chunk, chunk));
      for (const auto& v : c.INV) slot->INV.push_back(Eigen::Map<const Mat>(v.data(), chunk, chunk));
      slot->decay = std::move(c.decay);
      slot->inv_decay = std::move(c.inv_decay);
    }
    return *slot;
  }

  PathOptions options_;
  std::mutex mu_;
  std::map<int, std::unique_ptr<Matrices>> sets_;
};

std::string arithmetic() {
  return "another kernel's output, read from a file and taken exactly: its L (or, given INV only, the L its INV "
         "inverts exactly: the strict lower part of INV^-1 - I in FP64) and, where the file holds INV, that INV in "
         "place of the method's; the method names the arithmetic the kernel implements: its CPU reference on the "
         "file's L gives the diagnostics, and on the gold L the gold-L twin";
}

std::string available() { return ""; }

void check_options(const PathOptions& o) {
  for (const auto& [k, v] : o)
    if (k != "file" && k != "inputs" && k != "tail")
      throw UsageError(fmt::format("path candidate: option \"{}\" is not known (file, inputs, tail)", k));
  if (!o.count("file")) throw UsageError("path candidate needs its file: candidate:file=PATH");
  if (const auto t = o.find("tail"); t != o.end()) parse_tail(t->second);
}

std::unique_ptr<Path> make(const PathOptions& o) { return std::make_unique<CandidatePath>(o); }

}  // namespace
}  // namespace chunkinv::candidate

namespace chunkinv {
extern const PathSpec kCandidatePath{"candidate", Device::kCpu, false, candidate::arithmetic, nullptr,
                                     candidate::available, supports_every_method, candidate::check_options,
                                     candidate::make};
}  // namespace chunkinv
