// Placeholder until the bench command lands; it is replaced, not kept.
#include "cli/commands.hpp"
#include "core/error.hpp"

namespace chunkinv::cli {
void set_bench_command(CLI::App& app) {
  app.add_subcommand("bench", "(not built yet)")->callback([] { throw UsageError("bench: not built yet"); });
}
}  // namespace chunkinv::cli
