// Placeholder until the info command lands; it is replaced, not kept.
#include "cli/commands.hpp"
#include "core/error.hpp"

namespace chunkinv::cli {
void set_info_command(CLI::App& app) {
  app.add_subcommand("info", "(not built yet)")->callback([] { throw UsageError("info: not built yet"); });
}
}  // namespace chunkinv::cli
