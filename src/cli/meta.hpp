// The report's meta block, shared by every command that writes a report.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "paths/path.hpp"

namespace chunkinv::cli {

std::string utc_now();  // ISO 8601, seconds, "Z"
// "chunkinv 0.1.0 (3f2a9c01d2e4)": what --version and info print.
std::string version_line();
// {"version", "git_commit"}: the build, as a checkpoint's identity holds it.
nlohmann::json build_identity();
// tool, version, git commit, argv, compiler, host, threads, paths and
// methods in words, the paths' fidelity, devices (when a GPU path ran), times.
nlohmann::json make_meta(const std::vector<PathChoice>& paths, int threads, const std::string& started);

}  // namespace chunkinv::cli
