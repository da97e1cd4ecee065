// gpu/cublas_api.cuh: cuBLAS opened with dlopen on first use.
#include "gpu/cublas_api.cuh"

#include <dlfcn.h>

#include <filesystem>
#include <string>

#include <cuda_runtime.h>

#include "core/error.hpp"

namespace chunkinv::gpu {
namespace {

const std::string& library_name() {
  static const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  return name;
}

// Beside the CUDA runtime (every toolkit keeps cuBLAS in the runtime's
// folder), then by name through the loader's own search. Empty why: opened.
void* open_library(std::string& why) {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&cudaRuntimeGetVersion), &info) && info.dli_fname) {
    const std::filesystem::path beside = std::filesystem::path(info.dli_fname).parent_path() / library_name();
    if (void* h = dlopen(beside.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  }
  if (void* h = dlopen(library_name().c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  const char* e = dlerror();
  why = e ? e : "not found";
  return nullptr;
}

template <class F>
void resolve(void* lib, F& f, const char* symbol) {
  f = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!f) throw UsageError("cuBLAS: " + library_name() + " has no " + symbol + "; it is older than the build's headers");
}

// The pointer types are the exported declarations' (a mismatch does not
// compile); unevaluated, so nothing here links the library.
static_assert(sizeof(static_cast<decltype(CublasApi::gemm_ex)>(&cublasGemmEx)) > 0);
static_assert(sizeof(static_cast<decltype(CublasApi::gemm_strided_batched_ex)>(&cublasGemmStridedBatchedEx)) > 0);

CublasApi load() {
  std::string why;
  void* lib = open_library(why);
  if (!lib) throw UsageError("cuBLAS: cannot open " + library_name() + " (" + why + ")");
  CublasApi a{};
  resolve(lib, a.create, "cublasCreate_v2");
  resolve(lib, a.destroy, "cublasDestroy_v2");
  resolve(lib, a.set_stream, "cublasSetStream_v2");
  resolve(lib, a.set_workspace, "cublasSetWorkspace_v2");
  resolve(lib, a.set_math_mode, "cublasSetMathMode");
  resolve(lib, a.sgemm, "cublasSgemm_v2");
  resolve(lib, a.sgemm_strided_batched, "cublasSgemmStridedBatched");
  resolve(lib, a.gemm_ex, "cublasGemmEx");
  resolve(lib, a.gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  resolve(lib, a.status_name, "cublasGetStatusName");
  return a;  // the library stays open for the process's life
}

}  // namespace

const CublasApi& cublas() {
  static const CublasApi api = load();  // a throw leaves it for the next call
  return api;
}

}  // namespace chunkinv::gpu
