// A method's typed parameters (src/methods/<name>/params.hpp) are made once
// per Method, from the axis value: parse_method checks every value against
// the spec's MethodParam table (a one-line UsageError naming the parameter
// and what it allows) and then hands the checked strings to the method's
// parse, which only converts them. The CPU reference and the GPU form read
// the struct (Method::params<P>()), never the strings.
#pragma once
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "methods/method.hpp"

namespace chunkinv {

// The checked value of parameter key (parse_method filled in every one).
inline const std::string& param_text(const MethodOptions& options, std::string_view key) {
  const auto it = options.find(std::string(key));
  if (it == options.end()) throw std::logic_error("method parameter " + std::string(key) + " missing");
  return it->second;
}

// An integer parameter (its range checked by parse_method).
inline int int_param(const MethodOptions& options, std::string_view key) { return std::stoi(param_text(options, key)); }

// A parameter with choices, as the value its choice stands for.
template <class T>
T choice_param(const MethodOptions& options, std::string_view key,
               std::initializer_list<std::pair<std::string_view, T>> choices) {
  const std::string& v = param_text(options, key);
  for (const auto& [name, value] : choices)
    if (v == name) return value;
  throw std::logic_error("method parameter " + std::string(key) + " = " + v + " has no typed value");
}

}  // namespace chunkinv
