// One file per subcommand, each declaring its options into a plain struct
// and setting a callback; main only wires them.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace chunkinv::cli {

// What every command may want to put into a report's meta.
struct Invocation {
  std::vector<std::string> argv;
};
const Invocation& invocation();
// A command's own exit status when it succeeds but has a verdict (check: 1 = worse).
void set_exit_status(int status);

void set_run_command(CLI::App& app);
void set_info_command(CLI::App& app);
void set_bench_command(CLI::App& app);
void set_table_command(CLI::App& app);
void set_check_command(CLI::App& app);
void set_merge_command(CLI::App& app);
void set_inspect_command(CLI::App& app);
void set_search_command(CLI::App& app);
void set_score_command(CLI::App& app);
void set_seq_command(CLI::App& app);
void set_calibrate_command(CLI::App& app);  // hidden: calibrate-decay
// Every option of every command that takes a value refuses an empty one.
void refuse_empty_values(CLI::App& app);

}  // namespace chunkinv::cli
