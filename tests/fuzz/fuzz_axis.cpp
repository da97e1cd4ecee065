// libFuzzer target: the -a axis grammar (apply_axis: values, lists, ranges),
// then the expansion of the grids it made. Each line of the input is one
// `name=value`; a first line "#config" starts from a config of two grids
// (floor, weak_decay_correlated), so that -a replaces axes in both.
#include <string>

#include "driver/spec.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = chunkinv::fuzz::bytes_of(data, size);
  return chunkinv::fuzz::run([&] {
    chunkinv::ExperimentSpec spec;
    size_t pos = 0;
    if (text.starts_with("#config\n")) {
      spec = chunkinv::parse_config(
          R"({"experiments": [{"family": "floor", "chunk": [8, 16]}, {"family": "weak_decay_correlated"}]})", "two.json");
      pos = 8;
    }
    while (pos < text.size()) {
      const size_t end = std::min(text.find('\n', pos), text.size());
      chunkinv::apply_axis(spec, std::string(text.substr(pos, end - pos)));
      pos = end + 1;
    }
    if (!chunkinv::fuzz::reads_files(spec)) chunkinv::expand(spec);
  });
}
