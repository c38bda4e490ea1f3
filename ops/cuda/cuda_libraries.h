// cuBLAS and NCCL opened at run time (dlopen) instead of linked, so a
// worker built with CUDA starts, and runs --device=cpu, on a machine that
// has neither (a release folder on any x86-64 Linux, tools/release.sh); a
// GPU run that lacks one says which. The CUDA runtime is linked statically
// (libcudart_static.a) and itself finds the driver, libcuda.so.1, at run
// time: no CUDA library is needed to start.
//
// A library is looked for by its soname (LD_LIBRARY_PATH, the loader's
// cache), then in $CUDA_HOME/lib64 and /usr/local/cuda/lib64. Its
// functions keep their names: `cublas->cublasGemmEx(...)` (cublas_v2.h's
// macros rename both sides alike, e.g. cublasCreate to cublasCreate_v2).

#ifndef LLAMA_OPS_CUDA_CUDA_LIBRARIES_H_
#define LLAMA_OPS_CUDA_CUDA_LIBRARIES_H_

#include <cublas_v2.h>
#include <nccl.h>

#include "absl/status/statusor.h"

namespace llama::cuda {

// cublasGemmEx is declared apart: C++ sees a second, inline overload of it
// in cublas_api.h (a wrapper for an older compute-type argument).
#define LLAMA_CUBLAS_FUNCTIONS(X)                                                               \
  X(cublasCreate) X(cublasDestroy) X(cublasSetStream) X(cublasSetMathMode) X(cublasSetWorkspace) \
  X(cublasSgemm) X(cublasGetStatusString) X(cublasGetStatusName)

#define LLAMA_NCCL_FUNCTIONS(X)                                                                          \
  X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommInitAll) X(ncclCommGetAsyncError) X(ncclCommAbort) \
  X(ncclCommFinalize) X(ncclCommDestroy) X(ncclAllReduce) X(ncclAllGather) X(ncclBroadcast)               \
  X(ncclGetErrorString) X(ncclGetLastError)

#define LLAMA_CUDA_LIBRARY_MEMBER(function) decltype(&::function) function = nullptr;

struct CublasLibrary {
  LLAMA_CUBLAS_FUNCTIONS(LLAMA_CUDA_LIBRARY_MEMBER)
  cublasStatus_t (*cublasGemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                 const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                 cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
};

struct NcclLibrary {
  LLAMA_NCCL_FUNCTIONS(LLAMA_CUDA_LIBRARY_MEMBER)
};

#undef LLAMA_CUDA_LIBRARY_MEMBER

// Opened on first use, then the same answer for the process's life: the
// library, or why it could not be opened (its file names tried and the
// loader's message) or lacks a function.
absl::StatusOr<const CublasLibrary*> Cublas();
absl::StatusOr<const NcclLibrary*> Nccl();

}  // namespace llama::cuda

#endif  // LLAMA_OPS_CUDA_CUDA_LIBRARIES_H_
