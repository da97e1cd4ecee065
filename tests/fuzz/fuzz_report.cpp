// libFuzzer target: the report loader of `table` and `check` (strict JSON,
// schema, entries, statistics, duplicates), then what they make of a report
// it accepts: every table preset in every format, and the check of the
// report against itself (Markdown and JSON).
#include "fuzz_common.hpp"
#include "report/compare.hpp"
#include "report/report.hpp"
#include "report/table.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return chunkinv::fuzz::run([&] {
    using namespace chunkinv;
    const Report r = parse_report(fuzz::bytes_of(data, size), "fuzz.json");
    const std::vector<NamedReport> named{{"fuzz.json", r}};
    for (const std::string& preset : table_presets())
      for (const TableFormat f : {TableFormat::kMarkdown, TableFormat::kLatex, TableFormat::kCsv})
        format_table(build_table(named, preset, layout_for(f)), f);
    const CheckRules rules = default_check_rules();
    const CheckResult c = compare_reports(r, r, rules);
    check_markdown(c, false);
    (void)check_json(c, rules).dump();
  });
}
