// chunkinv: a precision lab for the intra-chunk inverse (I + L)^-1.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/error.hpp"

namespace chunkinv::cli {
namespace {
Invocation g_invocation;
int g_exit_status = 0;
}  // namespace
const Invocation& invocation() { return g_invocation; }
void set_exit_status(int status) { g_exit_status = status; }
}  // namespace chunkinv::cli

int main(int argc, char** argv) {
  using namespace chunkinv;
  for (int i = 0; i < argc; ++i) cli::g_invocation.argv.emplace_back(argv[i]);

  CLI::App app{"chunkinv: precision lab for the intra-chunk triangular inverse (I + L)^-1"};
  app.set_version_flag("--version", std::string(CHUNKINV_VERSION) + " (" + CHUNKINV_GIT_COMMIT_STR + ")");
  app.require_subcommand(1);
  cli::set_run_command(app);
  cli::set_info_command(app);
  cli::set_bench_command(app);
  cli::set_table_command(app);
  cli::set_check_command(app);
  cli::set_inspect_command(app);
  cli::set_calibrate_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "chunkinv: %s\n", e.what());
    return 2;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "chunkinv: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chunkinv: internal error: %s\n", e.what());
    return 3;
  }
  return cli::g_exit_status;
}
