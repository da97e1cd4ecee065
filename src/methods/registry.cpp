// The method registry: one line per method. A new method is one file that
// defines its MethodSpec, one line here, and its test.
#include <fmt/format.h>

#include "core/error.hpp"
#include "methods/method.hpp"

namespace chunkinv {

extern const MethodSpec kExactMethod;
extern const MethodSpec kNeumannMethod;
extern const MethodSpec kFwdsubFp32Method;

namespace {
const MethodSpec* const kMethods[] = {
    &kNeumannMethod,     // FP16 Neumann product form on tensor cores (FlashKDA v1, the article)
    &kFwdsubFp32Method,  // plain FP32 forward substitution, row by row
    &kExactMethod,       // FP64 triangular solve (the gold's own inverse)
};
}  // namespace

std::span<const MethodSpec* const> methods() { return kMethods; }

std::vector<std::string> method_names() {
  std::vector<std::string> n;
  for (const MethodSpec* m : kMethods) n.emplace_back(m->name);
  return n;
}

const MethodSpec& find_method(std::string_view name) {
  for (const MethodSpec* m : kMethods)
    if (m->name == name) return *m;
  const auto names = method_names();
  const std::string near = nearest_of(std::string(name), names);
  throw UsageError(near.empty()
                       ? fmt::format("unknown method \"{}\" (methods: {})", name, fmt::join(names, ", "))
                       : fmt::format("unknown method \"{}\" (did you mean \"{}\"?)", name, near));
}

const MethodSpec& default_method() { return kNeumannMethod; }
const MethodSpec& exact_method() { return kExactMethod; }

}  // namespace chunkinv
