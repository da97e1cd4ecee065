// The definitions live in core/detmath_hd.hpp, shared with the GPU; these
// out-of-line wrappers keep one compiled copy (and one set of flags) for the CPU.
#include "core/detmath.hpp"

#include "core/detmath_hd.hpp"

namespace chunkinv::detmath {

double log(double x) { return hd::log(x); }
double exp(double x) { return hd::exp(x); }
double exp2(double x) { return hd::exp2(x); }
double sigmoid(double x) { return hd::sigmoid(x); }
double expm1(double x) { return hd::expm1(x); }
double tanh(double x) { return hd::tanh(x); }

}  // namespace chunkinv::detmath
