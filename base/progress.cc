#include "base/progress.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llama {

std::string HumanBytes(double bytes) {
  static constexpr const char* kUnits[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 4) {
    bytes /= 1000;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%.0f %s", bytes, kUnits[unit]);
  return absl::StrFormat("%.2f %s", bytes, kUnits[unit]);
}

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes, FILE* out)
    : label_(std::move(label)),
      total_(total_bytes),
      out_(out),
      terminal_(out != nullptr && isatty(fileno(out))),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

void ProgressBar::Add(uint64_t bytes) {
  done_ += bytes;
  const auto now = std::chrono::steady_clock::now();
  // 10 redraws a second on a terminal; a log line every 5 s otherwise.
  if (now - last_draw_ >= (terminal_ ? std::chrono::milliseconds(100) : std::chrono::seconds(5))) {
    last_draw_ = now;
    Draw(false);
  }
}

void ProgressBar::Finish() { Draw(true); }

void ProgressBar::Note(const std::string& line) {
  if (out_ == nullptr) return;
  std::fprintf(out_, terminal_ ? "\r\033[K%s\n" : "%s\n", line.c_str());
  if (terminal_) Draw(false);
  std::fflush(out_);
}

void ProgressBar::Draw(bool final) {
  if (out_ == nullptr) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = seconds > 0 ? done_ / seconds : 0;
  const double percent = total_ > 0 ? 100.0 * done_ / total_ : 100.0;
  std::string line = absl::StrFormat("%s: %s / %s (%.0f%%), %s/s", label_, HumanBytes(done_),
                                     HumanBytes(total_), percent, HumanBytes(rate));
  if (!final && rate > 0 && total_ > done_) {
    absl::StrAppendFormat(&line, ", %.0f s left", (total_ - done_) / rate);
  }
  if (final) absl::StrAppendFormat(&line, " in %.1f s", seconds);
  if (!final && !detail_.empty()) absl::StrAppend(&line, " | ", detail_);
  if (terminal_) {
    std::fprintf(out_, "\r\033[K%s%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace llama
