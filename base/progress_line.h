// Rank 0's progress lines: on its stderr, starting with kProgressPrefix;
// the launcher shows them on its terminal (launcher/supervisor.h).

#ifndef LLAMA_BASE_PROGRESS_LINE_H_
#define LLAMA_BASE_PROGRESS_LINE_H_

namespace llama {

inline constexpr char kProgressPrefix[] = "progress: ";

}  // namespace llama

#endif  // LLAMA_BASE_PROGRESS_LINE_H_
