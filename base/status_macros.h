// The project's one error idiom: a call that returns absl::Status or
// absl::StatusOr<T> inside a function that returns either.
//
//   RETURN_IF_ERROR(communicator->AllReduceSum(x, n));
//   ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(weights));
//
// Debian's Abseil (20220623) has no such macros; these are the usual
// shape (as in tensorstore and gemma.cpp's absl-based code): the expression
// is evaluated once, and the error is returned unchanged. ASSIGN_OR_RETURN
// is several statements: give it braces under an if. Annotate adds the
// caller's context to an error it passes on.

#ifndef LLAMA_BASE_STATUS_MACROS_H_
#define LLAMA_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define LLAMA_STATUS_CONCAT_INNER_(a, b) a##b
#define LLAMA_STATUS_CONCAT_(a, b) LLAMA_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                                         \
  do {                                                                \
    if (::absl::Status llama_status_ = (expr); !llama_status_.ok()) { \
      return llama_status_;                                           \
    }                                                                 \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr) \
  LLAMA_ASSIGN_OR_RETURN_IMPL_(LLAMA_STATUS_CONCAT_(llama_statusor_, __LINE__), lhs, expr)

#define LLAMA_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

namespace llama {

// `status` with `context` before its message ("context: message"), its
// code kept; OK stays OK.
inline absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace llama

#endif  // LLAMA_BASE_STATUS_MACROS_H_
