// Whether the tests (and so the chunkinv binary, built with the same flags)
// run under AddressSanitizer (scripts/sanitize.sh). Its shadow memory takes
// terabytes of address space: nothing built with it starts under an
// address-space limit (`ulimit -v`, RLIMIT_AS), so tests of such limits skip.
#pragma once

namespace chunkinv::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

}  // namespace chunkinv::testing
