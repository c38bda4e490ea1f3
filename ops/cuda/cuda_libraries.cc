#include "ops/cuda/cuda_libraries.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace llama::cuda {
namespace {

// The soname first, then the usual toolkit folders.
absl::StatusOr<void*> Open(const std::string& soname) {
  std::vector<std::string> tried = {soname};
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    tried.push_back(absl::StrCat(home, "/lib64/", soname));
  }
  tried.push_back("/usr/local/cuda/lib64/" + soname);
  std::string first_error;
  for (const std::string& name : tried) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL); handle != nullptr) return handle;
    if (first_error.empty()) first_error = dlerror();
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "cannot open %s (tried %s: %s); it comes with the CUDA toolkit: put its folder in LD_LIBRARY_PATH or set "
      "CUDA_HOME",
      soname, absl::StrJoin(tried, ", "), first_error));
}

// A function's name after cublas_v2.h's macros, as a string.
#define LLAMA_STRINGIFY(x) LLAMA_STRINGIFY_NAME(x)
#define LLAMA_STRINGIFY_NAME(x) #x
// Resolves library.function unless an earlier one was missing.
#define LLAMA_RESOLVE(function)                                                                                 \
  if (missing == nullptr) {                                                                                     \
    library.function = reinterpret_cast<decltype(library.function)>(dlsym(handle, LLAMA_STRINGIFY(function))); \
    if (library.function == nullptr) missing = LLAMA_STRINGIFY(function);                                      \
  }

// `resolve(handle, library)` fills the library's functions and returns the
// name of the first one missing, or null.
template <typename Library, typename Resolve>
absl::StatusOr<const Library*> OpenLibrary(const std::string& soname, Resolve resolve) {
  ASSIGN_OR_RETURN(void* handle, Open(soname));
  Library library;
  if (const char* missing = resolve(handle, library); missing != nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s has no function %s: it is older than the toolkit this binary was built with", soname, missing));
  }
  return new Library(library);  // Lives as long as the process, as the opened library does.
}

}  // namespace

absl::StatusOr<const CublasLibrary*> Cublas() {
  static const absl::StatusOr<const CublasLibrary*> library =
      OpenLibrary<CublasLibrary>(absl::StrCat("libcublas.so.", CUBLAS_VER_MAJOR), [](void* handle, CublasLibrary& library) {
        const char* missing = nullptr;
        LLAMA_CUBLAS_FUNCTIONS(LLAMA_RESOLVE)
        LLAMA_RESOLVE(cublasGemmEx)
        return missing;
      });
  return library;
}

absl::StatusOr<const NcclLibrary*> Nccl() {
  static const absl::StatusOr<const NcclLibrary*> library =
      OpenLibrary<NcclLibrary>(absl::StrCat("libnccl.so.", NCCL_MAJOR), [](void* handle, NcclLibrary& library) {
        const char* missing = nullptr;
        LLAMA_NCCL_FUNCTIONS(LLAMA_RESOLVE)
        return missing;
      });
  return library;
}

}  // namespace llama::cuda
