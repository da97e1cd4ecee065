// The method registry: one line per method. A new method is one folder,
// src/methods/<name>/, that defines its MethodSpec, one line here, and its
// tests under tests/methods/<name>/.
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "methods/method.hpp"

namespace chunkinv {

extern const MethodSpec kExactMethod;
extern const MethodSpec kNeumannMethod;
extern const MethodSpec kFwdsubFp32Method;
extern const MethodSpec kFlaSolveTrilMethod;
extern const MethodSpec kBlockwiseMethod;
extern const MethodSpec kNeumannSeriesMethod;
extern const MethodSpec kDoublingMethod;
extern const MethodSpec kPatersonStockmeyerMethod;
extern const MethodSpec kHornerMethod;
extern const MethodSpec kBlockNestedMethod;
extern const MethodSpec kResidualNeumannMethod;
extern const MethodSpec kFlashkdaV1Method;
extern const MethodSpec kFlashkdaV2Method;

namespace {
const MethodSpec* const kMethods[] = {
    &kNeumannMethod,     // FP16 Neumann product form on tensor cores (FlashKDA v1, the article)
    &kFwdsubFp32Method,  // plain FP32 forward substitution, row by row
    &kFlaSolveTrilMethod,        // fla solve_tril: FP32 16x16 substitution, block-substitution merge
    &kBlockwiseMethod,           // cuDNN blockwise: 8/16 diagonal blocks, BF16 mma merges
    &kNeumannSeriesMethod,       // truncated Neumann series / product form, FP16/BF16/FP32
    &kDoublingMethod,            // tt-metal invert_doubling: (I+N)(I+N^2)(I+N^4)...
    &kPatersonStockmeyerMethod,  // tt-metal invert_block_ps4: Paterson-Stockmeyer
    &kHornerMethod,              // tt-metal Horner: I + N(I + N(...))
    &kBlockNestedMethod,         // tt-metal invert_block_nested: three nested block levels
    &kResidualNeumannMethod,     // "Good enough": masked truncated Neumann + residual correction
    &kFlashkdaV1Method,          // FlashKDA v1's inverse: `neumann` under FlashKDA's name
    &kFlashkdaV2Method,          // FlashKDA v2: FP32 8x8 column substitution, BF16 mma merges
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

namespace {

bool allowed(const MethodParam& p, const std::string& v, std::string* what) {
  if (!p.choices.empty()) {
    for (std::string_view c : p.choices)
      if (v == c) return true;
    *what = fmt::format("one of {}", fmt::join(p.choices, ", "));
    return false;
  }
  *what = fmt::format("an integer in {}..{}", p.lo, p.hi);
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) return false;
  const int x = std::stoi(v);
  return x >= p.lo && x <= p.hi;
}

// The method with every parameter at its default, not yet typed.
Method with_defaults(const MethodSpec& spec) {
  Method m{&spec, {}, {}};
  for (const MethodParam& p : spec.params) m.options[std::string(p.name)] = std::string(p.default_value);
  return m;
}

// The typed parameters, made once the options are complete and checked.
Method typed(Method m) {
  if (m.spec->parse) m.typed = m.spec->parse(m.options);
  return m;
}

}  // namespace

Method method_of(const MethodSpec& spec) { return typed(with_defaults(spec)); }

Method parse_method(std::string_view text) {
  size_t colon = text.find(':');
  Method m = with_defaults(find_method(text.substr(0, colon)));
  const MethodSpec& spec = *m.spec;
  while (colon != std::string_view::npos) {
    const size_t next = text.find(':', colon + 1);
    const std::string kv(text.substr(colon + 1, next == std::string_view::npos ? std::string_view::npos : next - colon - 1));
    colon = next;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
      throw UsageError(fmt::format("method {}: parameter \"{}\" must be name=value", spec.name, kv));
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    const MethodParam* param = nullptr;
    std::vector<std::string> names;
    for (const MethodParam& p : spec.params) {
      names.emplace_back(p.name);
      if (p.name == key) param = &p;
    }
    if (!param) {
      const std::string near = nearest_of(key, names);
      throw UsageError(names.empty() ? fmt::format("method {} takes no parameters (got \"{}\")", spec.name, key)
                       : near.empty()
                           ? fmt::format("method {}: unknown parameter \"{}\" (parameters: {})", spec.name, key,
                                         fmt::join(names, ", "))
                           : fmt::format("method {}: unknown parameter \"{}\" (did you mean \"{}\"?)", spec.name, key,
                                         near));
    }
    std::string what;
    if (!allowed(*param, value, &what))
      throw UsageError(fmt::format("method {}: {} = {} must be {}", spec.name, key, value, what));
    m.options[key] = value;
  }
  return typed(std::move(m));
}

std::string Method::label() const {
  std::string s(spec->name);
  for (const MethodParam& p : spec->params) {
    const auto it = options.find(std::string(p.name));
    if (it != options.end() && it->second != p.default_value) s += fmt::format(":{}={}", p.name, it->second);
  }
  return s;
}

const MethodSpec& default_method() { return kNeumannMethod; }
const MethodSpec& exact_method() { return kExactMethod; }

}  // namespace chunkinv
