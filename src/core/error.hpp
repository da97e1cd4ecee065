// Errors the user can fix (bad config, axis, file, path): reported as one
// line on stderr naming the culprit, exit code 2, and no report written.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>
#include <initializer_list>

namespace chunkinv {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The closest candidate to `word` by edit distance, or "" if none is close.
std::string nearest(const std::string& word, const std::initializer_list<std::string>& candidates);
std::string nearest_of(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace chunkinv
