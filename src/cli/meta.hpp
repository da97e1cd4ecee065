// The report's meta block, shared by every command that writes a report.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace chunkinv::cli {

std::string utc_now();  // ISO 8601, seconds, "Z"
// tool, version, git commit, argv, compiler, host, threads, paths in words,
// fidelity of the emulated path, devices (when a GPU path ran), times.
nlohmann::json make_meta(const std::vector<std::string>& paths, int threads, const std::string& started);

}  // namespace chunkinv::cli
