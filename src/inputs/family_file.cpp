// The `file` family: the samples of an imported tensor set, in file order.
#include <map>
#include <mutex>

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

namespace {

class FileFamily : public Family {
 public:
  std::string name() const override { return "file"; }
  std::string description() const override {
    return "the samples of a tensor set (keys [N,C,d], g [N,C], beta [N,C]) in a directory of .npy, an .npz or a "
           ".safetensors file; the seed is not used";
  }
  std::vector<FamilyParam> params() const override {
    return {{"inputs", nullptr, "path of the tensor set (directory, .npz or .safetensors); sets chunk and dim"}};
  }
  void complete(Configuration& c) const override {
    const auto set = cached_tensor_set(path(c));
    c.chunk = set->chunk;
    c.dim = set->dim;
  }
  void validate(const Configuration& c) const override {
    Family::validate(c);
    const auto set = cached_tensor_set(path(c));
    if (c.chunk != set->chunk || c.dim != set->dim)
      throw UsageError(fmt::format("family file: inputs {} hold C = {}, d = {}, not the configuration's C = {}, d = {}",
                                   set->source, set->chunk, set->dim, c.chunk, c.dim));
  }
  Sample make(const Configuration& c, uint64_t, uint64_t index) const override {
    return cached_tensor_set(path(c))->sample(index);
  }
  std::optional<uint64_t> available_samples(const Configuration& c) const override {
    return cached_tensor_set(path(c))->count;
  }

 private:
  static std::string path(const Configuration& c) {
    const auto it = c.params.find("inputs");
    if (it == c.params.end() || it->is_null())
      throw UsageError("family file needs its inputs: -a inputs=PATH (a directory of .npy, an .npz or a .safetensors)");
    if (!it->is_string()) throw UsageError(fmt::format("axis inputs = {} must be a path (a string)", it->dump()));
    return it->get<std::string>();
  }
};

}  // namespace

std::unique_ptr<Family> make_file_family() { return std::make_unique<FileFamily>(); }

}  // namespace chunkinv
