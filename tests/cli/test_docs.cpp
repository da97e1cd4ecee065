// The docs name only what the binary has: every option of a `chunkinv SUB`
// command in docs/*.md (in a code span or a code block) is in `chunkinv SUB
// --help`; every other option in a code span is in some subcommand's help
// or a script's (scripts/*.py), or is another tool's (listed below); every
// schema name (`chunkinv.report/2`) is a string the binary holds.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "support/shell.hpp"

namespace fs = std::filesystem;
using chunkinv::testing::binary;
using chunkinv::testing::run_shell;
using chunkinv::testing::slurp;

namespace {

// Options a doc names of tools other than chunkinv and its scripts (the
// sanitizers, GoogleTest, CMake, the compilers, pip, git): not the binary's to have.
const std::set<std::string> kOtherTools{"--leak-check", "--racecheck-report", "--error-exitcode", "--tool",
                                        "--gtest",      "--build",            "--target",         "--config",
                                        "--use_fast_math", "--fmad", "--help", "--version", "--output-on-failure",
                                        "--break-system-packages", "--no-build-isolation", "--user", "--editable",
                                        "--sanitize", "--set", "--page", "--csv", "--trace", "--deps", "--stat"};

std::set<std::string> options_in(const std::string& text) {
  static const std::regex opt(R"((^|[^\w-])(--[a-z][a-z0-9_-]*))");
  std::set<std::string> out;
  for (std::sregex_iterator it(text.begin(), text.end(), opt), end; it != end; ++it) out.insert((*it)[2].str());
  return out;
}

const std::set<std::string>& help_of(const std::string& sub) {
  static std::map<std::string, std::set<std::string>> cache;
  auto it = cache.find(sub);
  if (it == cache.end()) it = cache.emplace(sub, options_in(run_shell(binary() + " " + sub + " --help 2>&1").out)).first;
  return it->second;
}

std::vector<std::string> subcommands() {
  // The "Subcommands:" list of the top-level help.
  const std::string help = run_shell(binary() + " --help 2>&1").out;
  std::vector<std::string> subs;
  const size_t at = help.find("SUBCOMMANDS:") != std::string::npos ? help.find("SUBCOMMANDS:") : help.find("Subcommands:");
  static const std::regex line(R"(\n  ([a-z][a-z-]*) )");
  const std::string rest = at == std::string::npos ? help : help.substr(at);
  for (std::sregex_iterator it(rest.begin(), rest.end(), line), end; it != end; ++it) subs.push_back((*it)[1].str());
  return subs;
}

// Code spans and code-block lines (a line ending in `\` joined to the next).
std::vector<std::string> code_of(const std::string& md) {
  std::vector<std::string> out;
  bool block = false;
  std::string pending;
  size_t pos = 0;
  while (pos < md.size()) {
    size_t end = md.find('\n', pos);
    if (end == std::string::npos) end = md.size();
    const std::string line = md.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("```", 0) == 0) {
      block = !block;
      continue;
    }
    if (block) {
      pending += line;
      if (!pending.empty() && pending.back() == '\\') {
        pending.pop_back();
        continue;
      }
      out.push_back(pending);
      pending.clear();
      continue;
    }
    static const std::regex span("`([^`]+)`");
    for (std::sregex_iterator it(line.begin(), line.end(), span), e; it != e; ++it) out.push_back((*it)[1].str());
  }
  return out;
}

std::set<std::string> script_options() {
  std::set<std::string> out;
  for (const auto& f : fs::directory_iterator(fs::path(CHUNKINV_SOURCE_DIR) / "scripts"))
    if (f.path().extension() == ".py" || f.path().extension() == ".sh") {
      const auto o = options_in(slurp(f.path().string()));
      out.insert(o.begin(), o.end());
    }
  return out;
}

}  // namespace

TEST(Docs, OptionsAreTheBinarys) {
  const auto subs = subcommands();
  ASSERT_GT(subs.size(), 5u) << "the top-level help lists the subcommands";
  std::set<std::string> any = help_of("");
  for (const auto& s : subs) any.insert(help_of(s).begin(), help_of(s).end());
  const std::set<std::string> scripts = script_options();
  static const std::regex command(R"((^|[\s/(])chunkinv\s+([a-z][a-z-]*)([^|;&#]*))");
  std::vector<std::string> stale;
  size_t commands = 0;
  for (const auto& f : fs::directory_iterator(fs::path(CHUNKINV_SOURCE_DIR) / "docs")) {
    if (f.path().extension() != ".md") continue;
    for (const std::string& code : code_of(slurp(f.path().string()))) {
      std::string rest = code;
      bool had_command = false;
      for (std::smatch m; std::regex_search(rest, m, command); rest = m.suffix().str()) {
        const std::string sub = m[2].str();
        if (std::find(subs.begin(), subs.end(), sub) == subs.end()) continue;  // prose: "chunkinv is ..."
        had_command = true;
        ++commands;
        for (const auto& o : options_in(m[3].str()))
          if (!help_of(sub).count(o) && !kOtherTools.count(o))
            stale.push_back(f.path().filename().string() + ": chunkinv " + sub + " " + o);
      }
      if (had_command || code.find("chunkinv") != std::string::npos) continue;
      for (const auto& o : options_in(code))
        if (!any.count(o) && !scripts.count(o) && !kOtherTools.count(o) &&
            std::none_of(kOtherTools.begin(), kOtherTools.end(), [&](const std::string& t) { return o.rfind(t, 0) == 0; }))
          stale.push_back(f.path().filename().string() + ": " + o + " in `" + code + "`");
    }
  }
  EXPECT_GT(commands, 50u) << "the docs' commands were found";
  std::string all;
  for (const auto& s : stale) all += "\n  " + s;
  EXPECT_TRUE(stale.empty()) << "options the docs name that the binary does not have:" << all;
}

TEST(Docs, SchemaNamesAreTheBinarys) {
  const std::string bin = slurp(CHUNKINV_BINARY);
  ASSERT_FALSE(bin.empty());
  static const std::regex schema(R"(chunkinv\.[a-z_]+/[0-9]+)");
  std::vector<std::string> stale;
  size_t found = 0;
  for (const auto& f : fs::directory_iterator(fs::path(CHUNKINV_SOURCE_DIR) / "docs")) {
    if (f.path().extension() != ".md") continue;
    const std::string md = slurp(f.path().string());
    for (std::sregex_iterator it(md.begin(), md.end(), schema), end; it != end; ++it) {
      ++found;
      if (bin.find("\"" + it->str() + "\"") == std::string::npos && bin.find(it->str()) == std::string::npos)
        stale.push_back(f.path().filename().string() + ": " + it->str());
    }
  }
  EXPECT_GT(found, 3u);
  std::string all;
  for (const auto& s : stale) all += "\n  " + s;
  EXPECT_TRUE(stale.empty()) << "schema names the docs give that the binary does not hold:" << all;
}
