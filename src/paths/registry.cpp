// The path registry: one line per path, and what every path shares.
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/thread_pool.hpp"
#include "paths/path.hpp"

namespace chunkinv {

extern const PathSpec kGoldPath;
extern const PathSpec kEmulatedPath;
extern const PathSpec kKernelPath;
extern const PathSpec kCublasPath;

namespace {
const PathSpec* const kPaths[] = {
    &kGoldPath,      // FP64 L, the reference (CPU)
    &kEmulatedPath,  // the kernel's arithmetic, modelled bit for bit (CPU)
    &kKernelPath,    // FlashKDA's arithmetic on tensor cores (CUDA)
    &kCublasPath,    // the article's cuBLAS simulation (CUDA)
};
}  // namespace

std::span<const PathSpec* const> paths() { return kPaths; }

std::vector<std::string> path_names() {
  std::vector<std::string> n;
  for (const PathSpec* p : kPaths) n.emplace_back(p->name);
  return n;
}

std::vector<std::string> path_names_usable() {
  std::vector<std::string> n;
  for (const PathSpec* p : kPaths)
    if (p->unavailable().empty()) n.emplace_back(p->name);
  return n;
}

const PathSpec* find_path_or_null(std::string_view name) {
  for (const PathSpec* p : kPaths)
    if (p->name == name) return p;
  return nullptr;
}

const PathSpec& find_path(std::string_view name) {
  if (const PathSpec* p = find_path_or_null(name)) return *p;
  const auto names = path_names();
  const std::string near = nearest_of(std::string(name), names);
  throw UsageError(near.empty() ? fmt::format("unknown path \"{}\" (paths: {}, all)", name, fmt::join(names, ", "))
                                : fmt::format("unknown path \"{}\" (did you mean \"{}\"?)", name, near));
}

const PathSpec& reference_path() { return kGoldPath; }
const PathSpec& cpu_model_path() { return kEmulatedPath; }

std::string PathChoice::label() const {
  std::string s(spec->name);
  for (const auto& [k, v] : options) s += ":" + k + "=" + v;
  return s;
}

std::vector<PathChoice> parse_paths(const std::string& list) {
  std::vector<PathChoice> out;
  auto add = [&](PathChoice c) {
    for (const auto& o : out)
      if (o.spec == c.spec) {
        if (o.options != c.options)
          throw UsageError(fmt::format("path {} is given twice with different options", c.spec->name));
        return;
      }
    out.push_back(std::move(c));
  };
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string::npos) end = list.size();
    const std::string token = list.substr(pos, end - pos);
    pos = end + 1;
    if (token.empty()) continue;
    if (token == "all") {
      for (const PathSpec* p : kPaths)
        if (p->unavailable().empty()) add({p, {}});
      continue;
    }
    // name[:key=value]...
    size_t colon = token.find(':');
    PathChoice c{&find_path(token.substr(0, colon)), {}};
    while (colon != std::string::npos) {
      const size_t next = token.find(':', colon + 1);
      const std::string kv = token.substr(colon + 1, next == std::string::npos ? std::string::npos : next - colon - 1);
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
        throw UsageError(fmt::format("path {}: option \"{}\" must be key=value", c.spec->name, kv));
      c.options[kv.substr(0, eq)] = kv.substr(eq + 1);
      colon = next;
    }
    c.spec->check_options(c.options);
    if (const std::string why = c.spec->unavailable(); !why.empty())
      throw UsageError(fmt::format("path {} needs a CUDA GPU: {}", c.spec->name, why));
    add(std::move(c));
  }
  if (out.empty()) throw UsageError(fmt::format("no path given (paths: {}, all)", fmt::join(path_names(), ", ")));
  return out;
}

std::unique_ptr<Path> make_path(const PathChoice& choice) {
  if (const std::string why = choice.spec->unavailable(); !why.empty())
    throw UsageError(fmt::format("path {} needs a CUDA GPU: {}", choice.spec->name, why));
  choice.spec->check_options(choice.options);
  return choice.spec->make(choice.options);
}

BatchTiming CpuPath::run_batch(const Batch& in, std::span<const Method* const> methods, std::span<PathOutput> out,
                               ThreadPool& pool, bool keep) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = in.samples.size();
  pool.parallel_for(n, [&](size_t i) {
    std::optional<LForm> forms[2];  // by LStorage, formed when a method first asks
    for (size_t m = 0; m < methods.size(); ++m) {
      const LStorage storage = methods[m]->spec->l_storage;
      std::optional<LForm>& f = forms[static_cast<int>(storage)];
      if (!f) f = form_l(in.samples[i], in.gold[i], storage);
      const LForm& l = *f;
      PathOutput& o = out[m * n + i];
      o.l = l;
      o.on_path_l = methods[m]->invert(l.L, keep);
      o.on_gold_l = forms_gold_l() ? o.on_path_l : methods[m]->invert(in.gold[i].L, keep);
    }
  });
  BatchTiming t;
  t.host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return t;
}

bool supports_every_method(const Configuration&, const Method&, std::string*) { return true; }

void takes_no_options(const PathOptions& o) {
  if (!o.empty()) throw UsageError(fmt::format("path option \"{}\" is not known: this path takes none", o.begin()->first));
}

}  // namespace chunkinv
