// libFuzzer target: experiment configs (strict JSON, sizes, keys, seed and
// samples, grids), then their expansion into points when no grid reads a
// tensor file (the `file` family would open whatever path the input names).
#include "driver/spec.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return chunkinv::fuzz::run([&] {
    const chunkinv::ExperimentSpec spec = chunkinv::parse_config(chunkinv::fuzz::bytes_of(data, size), "fuzz.json");
    if (!chunkinv::fuzz::reads_files(spec)) chunkinv::expand(spec);
  });
}
