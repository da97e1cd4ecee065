// chunkinv: a precision lab for the intra-chunk inverse (I + L)^-1.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/commands.hpp"
#include "api/meta.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/signals.hpp"
#include "core/text.hpp"

namespace chunkinv::cli {
namespace {
Invocation g_invocation;
int g_exit_status = 0;

constexpr const char* kExitCodes =
    "Exit status: 0 done; 1 check found a figure worse than the baseline (bench: a GPU path differs from the\n"
    "emulated one); 2 bad input or environment (a bad option, config, file or output, too little memory),\n"
    "one line on stderr naming the culprit, and no report written; 3 an internal error: a bug in chunkinv,\n"
    "please report it with the command line and `chunkinv --version`. Stopped by Ctrl-C or SIGTERM: the\n"
    "signal's own status (130, 143); temporary files are removed and `run -o FILE` says how to resume.";

// An installed binary finds its data beside it (<prefix>/share/chunkinv/data,
// where `cmake --install` puts it), before the source tree it was built
// from; CHUNKINV_DATA, when set, wins over both.
void find_installed_data() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("CHUNKINV_DATA"); env && *env) return;
#ifdef CHUNKINV_INSTALL_DATA
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return;
  const fs::path data = exe.parent_path().parent_path() / CHUNKINV_INSTALL_DATA;
  if (fs::exists(data / "gdn-gates", ec)) ::setenv("CHUNKINV_DATA", data.c_str(), 0);
#endif
}

// Whatever went to stdout must have arrived: `table R > /dev/full` fails.
int check_stdout(int status) {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return status;
  const int err = errno;  // 0 when the failed write was an earlier one
  std::fprintf(stderr, "chunkinv: standard output: write failed%s%s%s\n", err ? " (" : "", err ? std::strerror(err) : "",
               err ? ")" : "");
  return status == 0 || status == 1 ? 2 : status;
}

}  // namespace

void refuse_empty_values(CLI::App& app) {
  // A command reads an empty option as one not given (`--paths ''` would be
  // every path): an empty value is refused where it is parsed.
  const CLI::Validator non_empty(
      [](std::string& v) { return v.empty() ? std::string("an empty value; give one, or leave the option out") : std::string(); },
      "", "non-empty");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* o : sub->get_options())
      if (o->get_type_size() != 0) o->check(non_empty);
}

const Invocation& invocation() { return g_invocation; }
void set_exit_status(int status) { g_exit_status = status; }
}  // namespace chunkinv::cli

int main(int argc, char** argv) {
  using namespace chunkinv;
  timeline("main");
  // As text: a report holds the command line, and a JSON string only UTF-8.
  for (int i = 0; i < argc; ++i) cli::g_invocation.argv.push_back(printable(argv[i]));
  signals::install();
  cli::find_installed_data();

  CLI::App app{"chunkinv: precision lab for the intra-chunk triangular inverse (I + L)^-1"};
  app.set_version_flag("--version", api::version_line());
  app.footer(cli::kExitCodes);
  app.require_subcommand(1);
  cli::set_run_command(app);
  cli::set_info_command(app);
  cli::set_bench_command(app);
  cli::set_table_command(app);
  cli::set_check_command(app);
  cli::set_merge_command(app);
  cli::set_inspect_command(app);
  cli::set_search_command(app);
  cli::set_score_command(app);
  cli::set_seq_command(app);
  cli::set_calibrate_command(app);
  cli::refuse_empty_values(app);
  int status = 0;
  try {
    app.parse(argc, argv);
    status = cli::g_exit_status;
  } catch (const CLI::CallForHelp& e) {
    status = app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    status = app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    status = app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "chunkinv: %s\n", printable(e.what()).c_str());
    status = 2;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "chunkinv: %s\n", printable(e.what()).c_str());  // one line of text, whatever names it holds
    status = 2;
  } catch (const signals::Stopped& s) {
    cli::check_stdout(0);
    signals::end_by(s.signal);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "chunkinv: out of memory; use fewer samples or a smaller --batch, or free memory\n");
    status = 2;
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "chunkinv: the system refused: %s\n", printable(e.what()).c_str());
    status = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chunkinv: internal error (a bug: please report it with the command line and `chunkinv --version`): %s\n",
                 printable(e.what()).c_str());
    status = 3;
  }
  timeline("main returns");
  return cli::check_stdout(status);
}
