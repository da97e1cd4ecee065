// What `run` and `score` print once their report is written: the summary
// table (with its legend where asked), then the worst samples — beside a
// Markdown table on stdout, on stderr where stdout holds the report itself
// or a table for machines — and where the report went.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/output_file.hpp"
#include "report/table.hpp"

namespace chunkinv {

void print_summary(const std::vector<NamedReport>& shown, const OutputFile* out, TableFormat format, bool legend,
                   size_t worst, const std::string& worst_by);

}  // namespace chunkinv
