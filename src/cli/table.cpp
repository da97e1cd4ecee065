// Placeholder until the table command lands; it is replaced, not kept.
#include "cli/commands.hpp"
#include "core/error.hpp"

namespace chunkinv::cli {
void set_table_command(CLI::App& app) {
  app.add_subcommand("table", "(not built yet)")->callback([] { throw UsageError("table: not built yet"); });
}
}  // namespace chunkinv::cli
