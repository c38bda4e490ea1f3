// One exit status for every binary of the project (launcher, worker,
// tools), so that a script or a scheduler can tell "fix what you gave me"
// from "try again" without reading the message:
//
//   0    success
//   1    the run failed: I/O, a worker or peer that died, a deadline, memory
//        or disk that ran out, an internal error. Retrying (later, elsewhere,
//        with more memory) may help.
//   2    the input is wrong: a flag, a path, a file's contents, a setting
//        the user gave. Retrying as is cannot help; fix the input.
//   130  cancelled (Ctrl-C, SIGTERM): what a shell reports for a program that
//        Ctrl-C ended (128 + SIGINT).
//
// Which absl codes are bad input follows how this code base returns them:
//   InvalidArgument     flags and file contents refused; nearly every one
//                       names the flag or the file.
//   NotFound            a path the user named, or one that follows from it
//                       (--ckpt_dir, the tokenizer, the prompts file, the
//                       shards for this world size, the worker binary).
//   FailedPrecondition  a state the user must change before a rerun can
//                       work: a port in use, an --output of another job, a
//                       tokenizer of another model, shards of another
//                       conversion, --device=cuda in a build without CUDA.
//                       A failure at run time (a store connection or NCCL
//                       communicator gone) is Unavailable instead, a
//                       writer used out of order (a bug) Internal.
//   PermissionDenied    a folder or file the user named that cannot be
//                       written, a job token the other ranks refuse, a
//                       download URL past its expiry.
//   Unimplemented       an input this build does not read (a big-endian
//                       checkpoint, an unknown rope_scaling, q8_0 shards on
//                       the GPU): another input, not a retry, gets past it.
//   OutOfRange, AlreadyExists, Unauthenticated: none returned today; absl
//                       defines each as a refusal of the request as made.
// Every other code is 1. DataLoss too, though a damaged checkpoint is the
// user's file: the same code marks a torn download, a read error and a
// garbled message between ranks, which a retry can fix, and the damaged
// checkpoint's message already says to download it again.
//
// A failure another process found is 1 where it is reported: the launcher's
// "rank R failed" (its log and exit status say what the rank found) and
// node 1's "node 0 could not convert". (A tool's ranks are forked copies of
// the tool reading its own flags, so their status is the tool's.) So is a
// job that ran but left some work undone (Aborted): a batch job whose
// prompts could not all run, a chat whose last turn failed. Their other
// answers are kept (a batch job's rerun resumes); 2 means the input was
// refused as a whole.

#ifndef LLAMA_BASE_EXIT_CODE_H_
#define LLAMA_BASE_EXIT_CODE_H_

#include "absl/status/status.h"

namespace llama {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitCancelled = 130;

// The exit status for a binary whose work ended with `status`.
int ExitCodeFor(const absl::Status& status);

}  // namespace llama

#endif  // LLAMA_BASE_EXIT_CODE_H_
