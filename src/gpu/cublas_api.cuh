// cuBLAS, opened when the cublas path first needs it rather than at the
// process's start: linked in, libcublas and libcublasLt cost every command
// about 55 ms before main (device run 79) and 215 MB of resident memory
// (`chunkinv --version` peaked at 226,660 KB linked, 7,764 KB opened: runs 78, 80),
// though only the cublas path calls them. The library is the toolkit's of
// the build (libcublas.so.<CUBLAS_VER_MAJOR>), looked for beside the CUDA
// runtime this process loaded, then where the dynamic loader looks.
#pragma once
#include <cublas_v2.h>

namespace chunkinv::gpu {

struct CublasApi {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetWorkspace_v2) set_workspace;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSgemmStridedBatched) sgemm_strided_batched;
  // The exported forms, with cublasComputeType_t (the headers add inline
  // overloads taking cudaDataType for old code).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long int, const void*,
                                            cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                            long long int, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&cublasGetStatusName) status_name;
};

// The library's entry points, opened on the first call (thread-safe). A
// library that cannot be opened, or lacks one of them, is a UsageError
// naming it (and the loader's reason); the next call tries again.
const CublasApi& cublas();

}  // namespace chunkinv::gpu
