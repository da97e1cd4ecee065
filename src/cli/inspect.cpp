// Placeholder until the inspect command lands; it is replaced, not kept.
#include "cli/commands.hpp"
#include "core/error.hpp"

namespace chunkinv::cli {
void set_inspect_command(CLI::App& app) {
  app.add_subcommand("inspect", "(not built yet)")->callback([] { throw UsageError("inspect: not built yet"); });
}
}  // namespace chunkinv::cli
