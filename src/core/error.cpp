#include "core/error.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace chunkinv {

std::string nearest_of(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    // Levenshtein distance, one row at a time.
    std::vector<size_t> row(c.size() + 1);
    for (size_t j = 0; j <= c.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= c.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (word[i - 1] != c[j - 1])});
        diag = up;
      }
    }
    if (row[c.size()] < best_d) {
      best_d = row[c.size()];
      best = c;
    }
  }
  // Close enough to be a typo: at most a third of the word changed.
  return best_d <= std::max<size_t>(2, word.size() / 3) ? best : std::string();
}

std::string nearest(const std::string& word, const std::initializer_list<std::string>& candidates) {
  return nearest_of(word, std::vector<std::string>(candidates));
}

}  // namespace chunkinv
