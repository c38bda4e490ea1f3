// Includes no Abseil header: see demo_tokenizer.h.
#include "launcher/demo_tokenizer.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <sentencepiece_trainer.h>

namespace llama::internal_demo {
namespace {

class Lines : public sentencepiece::SentenceIterator {
 public:
  explicit Lines(const std::vector<std::string>& lines) : lines_(lines) {}
  bool done() const override { return index_ >= lines_.size(); }
  void Next() override { ++index_; }
  const std::string& value() const override { return lines_[index_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& lines_;
  size_t index_ = 0;
};

// SentencePiece's trainer logs its command line to stderr before it reads
// --minloglevel: stderr goes to a temporary file while it runs, shown only
// if training fails, so the demo's output stays the launcher's own.
class CapturedStderr {
 public:
  CapturedStderr() : file_(std::tmpfile()), saved_(dup(2)) {
    if (file_ != nullptr && saved_ >= 0) {
      std::fflush(stderr);
      dup2(fileno(file_), 2);
    }
  }
  ~CapturedStderr() {
    Restore();
    if (file_ != nullptr) std::fclose(file_);
  }
  // Restores stderr and returns what was written meanwhile.
  std::string Restore() {
    if (saved_ < 0) return "";
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
    std::string text;
    if (file_ != nullptr) {
      std::rewind(file_);
      char buffer[4096];
      for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file_)) > 0;) text.append(buffer, n);
    }
    return text;
  }

 private:
  std::FILE* file_;
  int saved_;
};

}  // namespace

bool TrainTokenizer(const std::vector<std::string>& corpus, int vocab_size, const std::string& model_path,
                    std::string* error) {
  Lines lines(corpus);
  std::string model;
  CapturedStderr quiet;
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--model_type=bpe --vocab_size=" + std::to_string(vocab_size) +
          " --hard_vocab_limit=false --byte_fallback=true --split_digits=true --character_coverage=1.0"
          " --normalization_rule_name=identity --add_dummy_prefix=true --remove_extra_whitespaces=false"
          " --allow_whitespace_only_pieces=true --unk_id=0 --bos_id=1 --eos_id=2 --pad_id=-1 --num_threads=1"
          " --minloglevel=2",
      &lines, &model);
  const std::string trainer_log = quiet.Restore();
  if (!status.ok()) {
    *error = status.ToString() + (trainer_log.empty() ? "" : "; trainer output: " + trainer_log);
    return false;
  }
  std::ofstream out(model_path, std::ios::binary | std::ios::trunc);
  out.write(model.data(), model.size());
  if (!out) {
    *error = "cannot write " + model_path;
    return false;
  }
  return true;
}

}  // namespace llama::internal_demo
