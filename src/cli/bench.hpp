// What `chunkinv bench` shares between its benchmarks (bench.cpp: the
// inverse's paths, --recurrence, --backward; bench_pipeline.cpp: --pipeline).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace chunkinv::cli {

struct BenchArgs {
  std::vector<std::string> axes;
  uint64_t samples = 65536;
  uint64_t cpu_samples = 4096;  // the CPU paths are timed on at most this many
  uint64_t validate = 256;
  int repeat = 5;
  uint64_t seed = 0;
  int threads = 0;
  std::string paths = "all";
  std::string format = "text";
  std::string output;
  bool quiet = false;
  // As given: read strictly (a negative --samples is an error) before any work.
  std::string samples_text, cpu_samples_text, validate_text, repeat_text, seed_text, threads_text, max_memory;
  // --recurrence and its shape (fla's names: B, T, H, K, V), as given.
  bool recurrence = false;
  // --pipeline: the GPU pipeline's stages against the device's peaks (bench_pipeline.cpp), and the metrics its
  // entries report, as run --metrics takes them.
  bool pipeline = false;
  std::string metrics;
  // --backward: the chunk, the variants and their storage preset, as given (T, K, V, the gating and h0 as above).
  bool backward = false;
  std::string chunk_text, variants_text, storage;
  std::string batch_text, seq_len_text, heads_text, key_dim_text, value_dim_text, block_text, gating, initial_state,
      kernel_version_text;
};

// A figure for the JSON: null where it is not finite.
nlohmann::json num(double x);
// The GPUs this process sees, by name and compute capability.
nlohmann::json device_names();
double median_of(std::vector<double> v);

// bench --pipeline (bench_pipeline.cpp).
void bench_pipeline(const BenchArgs& a);

}  // namespace chunkinv::cli
