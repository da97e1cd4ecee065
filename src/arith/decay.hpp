// bf16(ex2.approx.ftz.f32(x)), the kernel's decay (SPEC §2 step 2), on the
// CPU: bf16 of the correctly rounded FP32 exp2 with FTZ, corrected by a table
// of the inputs where the hardware's approximation rounds differently
// (measured on the H200; see decay_exceptions.inc).
#pragma once

namespace chunkinv {

// bf16(ftz(RN_fp32(2^x))) for an FP32 value x (exact double of a float).
double exp2_ftz_bf16_reference(float x);
// The kernel's value: the reference, or the table's entry where it has one.
double ex2_approx_ftz_bf16(float x);
// Number of entries in the exception table (0 until it has been measured).
int decay_exception_count();

}  // namespace chunkinv
