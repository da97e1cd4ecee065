#include "cli/summary.hpp"

#include <cstdio>
#include <iostream>

#include "core/text.hpp"
#include "report/worst.hpp"

namespace chunkinv {

void print_summary(const std::vector<NamedReport>& shown, const OutputFile* out, TableFormat format, bool legend,
                   size_t worst, const std::string& worst_by) {
  const std::string worst_list = worst ? worst_text(shown, worst, worst_by) : "";
  if (out && out->to_stdout()) {
    std::fputs(worst_list.c_str(), stderr);
    return;
  }
  const Table table = build_table(shown, "summary");
  std::cout << format_table(table, format) << (legend ? format_legend(table, format) : "");
  if (format == TableFormat::kMarkdown) {
    if (!worst_list.empty()) std::cout << "\n" << worst_list;
  } else {
    std::fputs(worst_list.c_str(), stderr);
  }
  if (out) std::fprintf(stderr, "report written to %s\n", printable(out->path()).c_str());
}

}  // namespace chunkinv
