// Value families that push a sketch to its limits (values from 2^-1074 to
// 2^1023, subnormals, near the largest double, ties, many zeros, +inf
// tails, bucket edges, counts, flags, both signs): shared by the host's
// sketch tests and the device sketch's.
#pragma once
#include <cfloat>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace chunkinv::testing {

struct ValueFamily {
  std::string name;
  std::function<double(std::mt19937_64&)> draw;
};

inline std::vector<ValueFamily> adversarial_values() {
  using U = std::uniform_real_distribution<double>;
  using I = std::uniform_int_distribution<int>;
  return {
      {"log-uniform 2^-1074..2^1023", [](std::mt19937_64& r) { return std::ldexp(U(1, 2)(r), I(-1074, 1022)(r)); }},
      {"subnormals", [](std::mt19937_64& r) { return std::ldexp(std::floor(std::ldexp(1.0, I(0, 52)(r)) * U(1, 2)(r)), -1074); }},
      {"near DBL_MAX", [](std::mt19937_64& r) { return DBL_MAX * U(0.25, 1)(r); }},
      {"ties", [](std::mt19937_64& r) {
         static const double v[] = {1e-6, std::nextafter(1e-6, 1.0), 3.0, 3.0, 3.0, 7.25, 1e300, 0.1, 0.1};
         return v[I(0, 8)(r)];
       }},
      {"zeros and lognormal", [](std::mt19937_64& r) { return I(0, 9)(r) ? 0.0 : std::exp(std::normal_distribution<double>(-12, 3)(r)); }},
      {"+inf tail", [](std::mt19937_64& r) { return I(0, 19)(r) ? std::exp(std::normal_distribution<double>(-14, 2)(r)) : INFINITY; }},
      {"bucket edges", [](std::mt19937_64& r) {
         const double edge = std::ldexp(1.0 + I(0, 1023)(r) / 1024.0, I(-30, 30)(r));
         return I(0, 1)(r) ? edge : std::nextafter(edge, 0.0);
       }},
      {"counts 0..63", [](std::mt19937_64& r) { return double(I(0, 63)(r)); }},
      {"flags", [](std::mt19937_64& r) { return double(I(0, 99)(r) < 3); }},
      {"power magnitudes 0..inf", [](std::mt19937_64& r) {
         const int k = I(0, 99)(r);
         return k < 5 ? INFINITY : k < 10 ? 0.0 : std::ldexp(U(1, 2)(r), I(-40, 120)(r));
       }},
      {"both signs", [](std::mt19937_64& r) { return std::ldexp(U(-2, 2)(r), I(-200, 200)(r)); }},
  };
}

}  // namespace chunkinv::testing
