// The `file` family: the samples of an imported tensor set, in file order.
// A set of the token layout ([B, T, H, K], fla/FlashKDA) is cut into chunks
// of the configuration's `chunk` first, never across a sequence boundary.
#include <map>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "core/error.hpp"
#include "inputs/data_families.hpp"

namespace chunkinv {

std::shared_ptr<const TensorSet> cached_tensor_set(const std::string& path) {
  // One load per path and process: a run makes every sample from the same
  // set, from many threads. Loading happens under the lock, so two threads
  // never read the same file twice.
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const TensorSet>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[path];
  if (!slot) {
    try {
      slot = std::make_shared<const TensorSet>(load_tensor_set(path));
    } catch (...) {
      cache.erase(path);
      throw;
    }
  }
  return slot;
}

std::shared_ptr<const std::vector<TokenChunk>> cached_chunks(const std::string& path, int chunk, Tail tail) {
  const auto set = cached_tensor_set(path);
  static std::mutex mu;
  static std::map<std::tuple<std::string, int, Tail>, std::shared_ptr<const std::vector<TokenChunk>>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[{path, chunk, tail}];
  if (!slot) {
    try {
      slot = std::make_shared<const std::vector<TokenChunk>>(chunk_tokens(*set, chunk, tail));
    } catch (...) {
      cache.erase({path, chunk, tail});
      throw;
    }
  }
  return slot;
}

std::string file_family_inputs(const Configuration& c) {
  const auto it = c.params.find("inputs");
  if (it == c.params.end() || it->is_null())
    throw UsageError("family file needs its inputs: -a inputs=PATH (a directory of .npy, an .npz or a .safetensors)");
  if (!it->is_string()) throw UsageError(fmt::format("axis inputs = {} must be a path (a string)", it->dump()));
  return it->get<std::string>();
}

Tail file_family_tail(const Configuration& c) {
  const auto it = c.params.find("tail");
  if (it == c.params.end() || it->is_null()) return Tail::kPad;
  if (!it->is_string()) throw UsageError(fmt::format("axis tail = {} is not pad or drop", it->dump()));
  return parse_tail(it->get<std::string>());
}

namespace {

class FileFamily : public Family {
 public:
  std::string name() const override { return "file"; }
  std::optional<DeviceDraw> device_draw(const Configuration& c, std::string* why) const override {
    return no_device_form(why, "family " + c.family + " reads its samples from data; nothing to generate");
  }
  std::string description() const override {
    return "the samples of a tensor set: keys [N,C,d], g [N,C], beta [N,C] (chunks), or keys [B,T,H,K], "
           "g [B,T,H], beta [B,T,H] and optional cu_seqlens (tokens, the fla/FlashKDA layout, cut into chunks of "
           "the chunk axis); a directory of .npy, an .npz or a .safetensors file; the seed is not used";
  }
  std::vector<FamilyParam> params() const override {
    return {{"inputs", nullptr, "path of the tensor set (directory, .npz or .safetensors); its dim, and for [N,C,d] its chunk"},
            {"tail", "pad", "token layout: a sequence's last chunk shorter than chunk is zero-padded (pad, as FlashKDA) or left out (drop)"}};
  }
  void complete(Configuration& c) const override {
    const auto set = cached_tensor_set(file_family_inputs(c));
    if (!set->token_layout) c.chunk = set->chunk;
    c.dim = set->dim;
  }
  void validate(const Configuration& c) const override {
    Family::validate(c);
    const auto set = cached_tensor_set(file_family_inputs(c));
    if ((!set->token_layout && c.chunk != set->chunk) || c.dim != set->dim)
      throw UsageError(fmt::format("family file: inputs {} hold C = {}, d = {}, not the configuration's C = {}, d = {}",
                                   set->source, set->chunk, set->dim, c.chunk, c.dim));
    const auto chunks = cached_chunks(set->source, c.chunk, file_family_tail(c));
    if (chunks->empty())
      throw UsageError(fmt::format("family file: inputs {} hold no whole chunk of {} tokens (tail=drop; tail=pad keeps "
                                   "the shorter ones)", set->source, c.chunk));
  }
  Sample make(const Configuration& c, uint64_t, uint64_t index) const override {
    const std::string p = file_family_inputs(c);
    const auto set = cached_tensor_set(p);
    if (!set->token_layout) return set->sample(index);
    const auto chunks = cached_chunks(p, c.chunk, file_family_tail(c));
    if (index >= chunks->size())
      throw UsageError(fmt::format("inputs {}: sample {} asked for, the file holds {} chunks of {} tokens (0..{})", p,
                                   index, chunks->size(), c.chunk, chunks->size() - 1));
    return chunk_sample(*set, (*chunks)[index], c.chunk);
  }
  std::optional<uint64_t> available_samples(const Configuration& c) const override {
    const std::string p = file_family_inputs(c);
    return cached_chunks(p, c.chunk, file_family_tail(c))->size();
  }
};

}  // namespace

std::unique_ptr<Family> make_file_family() { return std::make_unique<FileFamily>(); }

}  // namespace chunkinv
