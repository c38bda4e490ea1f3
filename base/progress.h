// A byte-progress display for long operations (conversion, downloads):
// done / total, percent, rate and time left. On a terminal it redraws one
// line; otherwise (logs, CI) it prints a line every few seconds.

#ifndef LLAMA_BASE_PROGRESS_H_
#define LLAMA_BASE_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace llama {

// Not thread-safe.
class ProgressBar {
 public:
  // `out` null disables all output.
  ProgressBar(std::string label, uint64_t total_bytes, FILE* out);
  void Add(uint64_t bytes);
  // Text shown after the totals (e.g. per-file progress), from the next redraw.
  void set_detail(std::string detail) { detail_ = std::move(detail); }
  // Prints `line` on a line of its own (above the bar on a terminal).
  void Note(const std::string& line);
  // Prints the final line (with the average rate).
  void Finish();

 private:
  void Draw(bool final);

  std::string label_;
  std::string detail_;
  uint64_t total_;
  uint64_t done_ = 0;
  FILE* out_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

// "1.25 GB", "512.0 MB", ... (decimal units, as disks are sold).
std::string HumanBytes(double bytes);

}  // namespace llama

#endif  // LLAMA_BASE_PROGRESS_H_
