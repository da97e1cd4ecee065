// cuBLAS opened on first use (gpu/cublas_api.cuh): the build's library and
// each entry point the cublas path calls. Needs the toolkit's libraries,
// not a GPU.
#include <gtest/gtest.h>

#include <string>

#ifdef CHUNKINV_HAVE_CUDA
#include "gpu/cublas_api.cuh"
#endif

TEST(CublasApi, OpensTheBuildsLibraryWithEveryEntryPoint) {
#ifndef CHUNKINV_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  using chunkinv::gpu::cublas;
  const chunkinv::gpu::CublasApi& a = cublas();
  EXPECT_NE(a.create, nullptr);
  EXPECT_NE(a.destroy, nullptr);
  EXPECT_NE(a.set_stream, nullptr);
  EXPECT_NE(a.set_workspace, nullptr);
  EXPECT_NE(a.set_math_mode, nullptr);
  EXPECT_NE(a.sgemm, nullptr);
  EXPECT_NE(a.sgemm_strided_batched, nullptr);
  EXPECT_NE(a.gemm_ex, nullptr);
  EXPECT_NE(a.gemm_strided_batched_ex, nullptr);
  ASSERT_NE(a.status_name, nullptr);
  // A call into the library that needs no GPU.
  EXPECT_EQ(std::string(a.status_name(CUBLAS_STATUS_NOT_INITIALIZED)), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_EQ(&cublas(), &a);  // opened once
#endif
}
