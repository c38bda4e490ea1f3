// Trains, loads and runs SentencePiece through its Bazel binding.
//
// A file of its own because Debian's sentencepiece_processor.h declares
// `namespace absl { using std::string_view; }`, which clashes with the real
// Abseil headers (whose absl::string_view is a class of its own): no
// translation unit may include both. See third_party/README.md.

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

namespace {

// Feeds an in-memory corpus to the SentencePiece trainer.
class VectorSentenceIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(const std::vector<std::string>& lines) : lines_(lines) {}
  bool done() const override { return index_ >= lines_.size(); }
  void Next() override { ++index_; }
  const std::string& value() const override { return lines_[index_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& lines_;
  size_t index_ = 0;
};

TEST(BindingsTest, SentencePieceTrainsAndEncodes) {
  std::vector<std::string> corpus;
  for (int i = 0; i < 200; ++i) {
    corpus.push_back("the quick brown fox " + std::to_string(i) + " jumps over the lazy dog");
  }
  std::string model;
  VectorSentenceIterator iterator(corpus);
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--model_type=bpe --vocab_size=320 --byte_fallback=true --minloglevel=2", &iterator, &model);
  ASSERT_TRUE(status.ok()) << status.ToString();
  sentencepiece::SentencePieceProcessor processor;
  ASSERT_TRUE(processor.LoadFromSerializedProto(model).ok());
  std::vector<int> ids;
  ASSERT_TRUE(processor.Encode("the lazy fox", &ids).ok());
  std::string text;
  ASSERT_TRUE(processor.Decode(ids, &text).ok());
  EXPECT_EQ(text, "the lazy fox");
}

}  // namespace
