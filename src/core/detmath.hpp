// Elementary functions built from IEEE +, -, *, / and ldexp only, so that the
// same inputs give the same bits on every machine and standard library
// (libm's exp/log/cos may differ in the last place between platforms).
// Accuracy: within about 1 ulp of double, far below anything measured here.
// One source with the GPU: core/detmath_hd.hpp.
#pragma once

namespace chunkinv::detmath {

double log(double x);    // natural log, x > 0
double exp(double x);    // e^x; 0 below about -745, inf above about 709.78
double exp2(double x);   // 2^x
double sigmoid(double x);  // 1 / (1 + e^-x)
double expm1(double x);    // e^x - 1, accurate near 0
double tanh(double x);     // hyperbolic tangent, accurate near 0

}  // namespace chunkinv::detmath
