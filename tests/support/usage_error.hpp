// The message of the UsageError a callable throws, for tests of one-line
// refusals; the test fails when it throws none.
#pragma once
#include <string>

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace chunkinv::testing {

template <typename F>
std::string usage_error(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UsageError";
  return "";
}

}  // namespace chunkinv::testing

// `text` contains `part`; prints `text` when not.
#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)
