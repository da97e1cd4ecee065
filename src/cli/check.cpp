// Placeholder until the check command lands; it is replaced, not kept.
#include "cli/commands.hpp"
#include "core/error.hpp"

namespace chunkinv::cli {
void set_check_command(CLI::App& app) {
  app.add_subcommand("check", "(not built yet)")->callback([] { throw UsageError("check: not built yet"); });
}
}  // namespace chunkinv::cli
