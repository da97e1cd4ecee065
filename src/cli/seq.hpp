// What `score` hands to seq: a kernel's outputs on sequences (score
// --inputs SEQ --candidate OUT, where SEQ holds q and v beside k, g and
// beta) are scored by seq's own scoring (seq --inputs SEQ --candidate OUT),
// one code path for both commands.
#pragma once
#include <string>
#include <vector>

namespace chunkinv::cli {

struct SeqScoreRequest {
  std::string inputs, candidate, output, table_format = "md";
  std::vector<std::string> axes;  // chunk, storage, window, method
  int threads = 0;
  bool quiet = false;
};
void score_sequences(const SeqScoreRequest& r);

}  // namespace chunkinv::cli
