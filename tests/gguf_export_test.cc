// //tools:convert --format=gguf: the file read back by checkpoint/
// gguf_reader (structure, metadata, every tensor's bytes against our own
// shards), and loaded by llama.cpp itself (node-llama-cpp's prebuilt
// library), whose greedy tokens must be PyTorch's golden ones.

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/process.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/shard_format.h"
#include "ops/cast.h"
#include "tests/fixtures/test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_fixture.h"

namespace llama {
namespace {

namespace fs = std::filesystem;
using ::llama::testing::CheckpointFixturePath;
using ::llama::testing::NodeToolsDir;
using ::llama::testing::ReadFileOrEmpty;
using ::llama::testing::TokenizerFixturePath;
using ::testing::HasSubstr;

std::string TempDir() { return getenv("TEST_TMPDIR"); }

// The file read back by checkpoint/gguf_reader (written from the
// specification, ggml docs/gguf.md; it shares only the format's constants
// with the writer), with its metadata by key and its bytes.
struct ReadBack {
  std::unique_ptr<GgufFile> file;
  std::map<std::string, nlohmann::json> metadata;
  std::string bytes;
};

ReadBack ReadGguf(const std::string& path) {
  ReadBack read;
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return read;
  read.file = *std::move(file);
  for (const auto& [key, value] : read.file->metadata()) read.metadata[key] = value;
  read.bytes = ReadFileOrEmpty(path);
  return read;
}

// Bytes of `count` elements of a ggml type: F32, F16/BF16, Q8_0 (blocks of 32 in 34 bytes).
uint64_t GgmlBytes(uint32_t type, uint64_t count) { return type == 0 ? 4 * count : type == 8 ? count / 32 * 34 : 2 * count; }

// Runs //tools:convert with `args` (plus --weights_dtype when given); it must succeed.
void RunConvert(std::vector<std::string> args, const std::string& dtype, const std::string& log) {
  ProcessOptions options;
  options.argv = {"tools/convert", "--progress=false"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  if (!dtype.empty()) options.argv.push_back("--weights_dtype=" + dtype);
  options.stderr_path = log;
  absl::StatusOr<std::unique_ptr<Process>> convert = Process::Spawn(options);
  ASSERT_TRUE(convert.ok()) << convert.status();
  absl::StatusOr<ExitStatus> exit = (*convert)->Wait(std::chrono::seconds(60));
  EXPECT_TRUE(exit.ok() && exit->success()) << ReadFileOrEmpty(log);
}

std::string ConvertToGguf(const std::string& ckpt, const std::string& name, const std::string& dtype = "",
                          const std::string& tokenizer = TokenizerFixturePath("tokenizer.model")) {
  const std::string out = TempDir() + "/" + name + ".gguf";
  RunConvert({"--ckpt_dir=" + ckpt, "--format=gguf", "--out=" + out, "--tokenizer_path=" + tokenizer}, dtype,
             TempDir() + "/" + name + ".stderr");
  return out;
}

std::string ConvertToShard(const std::string& ckpt, const std::string& name, const std::string& dtype = "") {
  const std::string out = TempDir() + "/" + name + "_shards";
  RunConvert({"--ckpt_dir=" + ckpt, "--out_dir=" + out}, dtype, TempDir() + "/" + name + ".shard.stderr");
  return out + "/" + ShardFileName(0, 1);
}

// Our tensor names, as llama.cpp's llama architecture names them.
std::string OurName(const std::string& gguf) {
  static const std::map<std::string, std::string> kNames = {
      {"token_embd.weight", "tok_embeddings.weight"}, {"output_norm.weight", "norm.weight"},
      {"output.weight", "output.weight"},             {"attn_q.weight", "attention.wq.weight"},
      {"attn_k.weight", "attention.wk.weight"},       {"attn_v.weight", "attention.wv.weight"},
      {"attn_output.weight", "attention.wo.weight"},  {"ffn_gate.weight", "feed_forward.w1.weight"},
      {"ffn_down.weight", "feed_forward.w2.weight"},  {"ffn_up.weight", "feed_forward.w3.weight"},
      {"attn_norm.weight", "attention_norm.weight"},  {"ffn_norm.weight", "ffn_norm.weight"},
  };
  if (kNames.count(gguf)) return kNames.at(gguf);
  const size_t dot = gguf.find('.', 4);
  return "layers." + gguf.substr(4, dot - 4) + "." + kNames.at(gguf.substr(dot + 1));
}

// The file is well-formed and holds the shard's model: every tensor, its
// bytes (the norms widened to f32), the config and the vocabulary.
void ExpectGgufHoldsTheShard(const std::string& gguf_path, const std::string& shard_path, uint32_t weight_type) {
  ReadBack gguf = ReadGguf(gguf_path);
  ASSERT_NE(gguf.file, nullptr);
  absl::StatusOr<std::unique_ptr<ShardReader>> shard = ShardReader::Open(shard_path);
  ASSERT_TRUE(shard.ok()) << shard.status();
  const shard::ModelConfig& c = (*shard)->index().config();
  EXPECT_EQ(gguf.file->version(), 3u);
  auto& m = gguf.metadata;
  EXPECT_EQ(m["general.architecture"], "llama");
  EXPECT_EQ(m["llama.block_count"], c.n_layers());
  EXPECT_EQ(m["llama.embedding_length"], c.dim());
  EXPECT_EQ(m["llama.attention.head_count"], c.n_heads());
  EXPECT_EQ(m["llama.attention.head_count_kv"], c.n_kv_heads());
  EXPECT_EQ(m["llama.feed_forward_length"], ModelConfigFromProto(c).ffn_hidden_dim());
  EXPECT_EQ(m["llama.rope.dimension_count"], c.dim() / c.n_heads());
  EXPECT_FLOAT_EQ(m["llama.attention.layer_norm_rms_epsilon"].get<float>(), c.norm_eps());
  EXPECT_FLOAT_EQ(m["llama.rope.freq_base"].get<float>(), c.rope_theta());
  EXPECT_EQ(m["general.file_type"], weight_type == 0 ? 0 : weight_type == 1 ? 1 : weight_type == 8 ? 7 : 32);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(TokenizerFixturePath("tokenizer.model"));
  ASSERT_TRUE(tokenizer.ok());
  ASSERT_EQ(m["tokenizer.ggml.tokens"].size(), static_cast<size_t>(c.vocab_size()));
  EXPECT_EQ(m["tokenizer.ggml.model"], "llama");
  EXPECT_EQ(m["tokenizer.ggml.bos_token_id"], (*tokenizer)->bos_id());
  EXPECT_EQ(m["tokenizer.ggml.eos_token_id"], (*tokenizer)->eos_id());
  for (int id = 0; id < c.vocab_size(); ++id) {
    EXPECT_EQ(m["tokenizer.ggml.tokens"][id], (*tokenizer)->GetPiece(id).text);
  }
  EXPECT_EQ(m["tokenizer.ggml.token_type"][1], 3) << "BOS is a control token";

  ASSERT_EQ(gguf.file->tensors().size(), static_cast<size_t>((*shard)->index().tensors_size()));
  const uint64_t data_start = gguf.file->data_offset();
  EXPECT_EQ(data_start % 32, 0u);
  uint64_t end = 0;
  for (const GgufTensorInfo& info : gguf.file->tensors()) {
    SCOPED_TRACE(info.name);
    EXPECT_EQ(info.offset % 32, 0u);
    EXPECT_GE(info.offset, end) << "overlaps the previous tensor";
    absl::StatusOr<ShardTensor> ours = (*shard)->Tensor(OurName(info.name));
    ASSERT_TRUE(ours.ok()) << ours.status();
    const std::vector<int64_t>& shape = info.shape;
    EXPECT_EQ(shape, std::vector<int64_t>(ours->entry->shape().begin(), ours->entry->shape().end()));
    uint64_t count = 1;
    for (int64_t d : shape) count *= d;
    const uint32_t type = info.ggml_type;
    const uint64_t size = GgmlBytes(type, count);
    end = info.offset + size;
    ASSERT_LE(data_start + end, gguf.bytes.size());
    const char* data = gguf.bytes.data() + data_start + info.offset;
    if (info.name == "token_embd.weight" && weight_type == 8) {
      EXPECT_EQ(static_cast<int>(type), 0) << "int8 exports keep the embedding as stored (f32 here)";
      ASSERT_EQ(size, ours->bytes.size());
      EXPECT_EQ(std::memcmp(data, ours->bytes.data(), size), 0);
    } else if (shape.size() == 1) {
      // Norms stay f32 (exact from an f32 or 16-bit source); in the shard's
      // type they are the shard's values.
      EXPECT_EQ(type, 0u) << "norms are f32";
      std::vector<uint8_t> narrowed(ours->bytes.size());
      ASSERT_TRUE(CastElements(data, DType::kF32, narrowed.data(), ours->dtype, count).ok());
      EXPECT_EQ(std::memcmp(narrowed.data(), ours->bytes.data(), narrowed.size()), 0);
    } else {
      EXPECT_EQ(type, weight_type);
      ASSERT_EQ(size, ours->bytes.size());
      EXPECT_EQ(std::memcmp(data, ours->bytes.data(), size), 0);
    }
  }
}

TEST(GgufExportTest, FilesHoldOurShardsModel) {
  ExpectGgufHoldsTheShard(ConvertToGguf(CheckpointFixturePath("tiny_fp32_mp1"), "tiny_fp32"),
                          ConvertToShard(CheckpointFixturePath("tiny_fp32_mp1"), "tiny_fp32"), 0);
  // Merged from two model-parallel files; grouped-query heads; bf16.
  ExpectGgufHoldsTheShard(ConvertToGguf(CheckpointFixturePath("gqa_bf16_mp2"), "gqa_bf16"),
                          ConvertToShard(CheckpointFixturePath("gqa_bf16_mp1"), "gqa_bf16"), 30);
  // int8: llama.cpp's Q8_0 blocks, the same bytes as our int8 shard.
  ExpectGgufHoldsTheShard(ConvertToGguf(CheckpointFixturePath("tiny_fp32_mp1"), "tiny_q8", "int8"),
                          ConvertToShard(CheckpointFixturePath("tiny_fp32_mp1"), "tiny_q8", "int8"), 8);
  // From Hugging Face's layout, narrowed to f16.
  ExpectGgufHoldsTheShard(ConvertToGguf("tests/fixtures/hf_fixture/tiny_fp32_hf", "hf_f16", "fp16"),
                          ConvertToShard(CheckpointFixturePath("tiny_fp16_mp1"), "tiny_fp16"), 1);
}

// `convert` with `args` must refuse with a usage error (exit 2) saying
// `message`, and write nothing.
void ExpectUsageError(std::vector<std::string> args, const std::string& message) {
  ProcessOptions options;
  options.argv = {"tools/convert", "--progress=false"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.stderr_path = TempDir() + "/refused.stderr";
  absl::StatusOr<std::unique_ptr<Process>> convert = Process::Spawn(options);
  ASSERT_TRUE(convert.ok());
  absl::StatusOr<ExitStatus> exit = (*convert)->Wait(std::chrono::seconds(60));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 2) << message;
  EXPECT_THAT(ReadFileOrEmpty(options.stderr_path), HasSubstr(message));
  EXPECT_FALSE(fs::exists(TempDir() + "/x.gguf"));
  EXPECT_FALSE(fs::exists(TempDir() + "/x.gguf.partial"));
}

TEST(GgufExportTest, RefusesWhatOneFileCannotHoldAndMixedUpFlags) {
  const std::string ckpt = "--ckpt_dir=" + CheckpointFixturePath("tiny_fp32_mp1");
  const std::string out = "--out=" + TempDir() + "/x.gguf";
  const std::string tokenizer = "--tokenizer_path=" + TokenizerFixturePath("tokenizer.model");
  ExpectUsageError({ckpt, "--format=gguf", out, "--world_size=2", tokenizer},
                   "--world_size=2: --format=gguf writes the whole model");
  // No tokenizer.model in or next to the fixture's folder.
  ExpectUsageError({ckpt, "--format=gguf", out}, "--tokenizer_path: required for --format=gguf");
  ExpectUsageError({ckpt, "--format=gguf", "--out_dir=" + TempDir() + "/x"}, "--out_dir: with --format=gguf");
  ExpectUsageError({ckpt, out}, "--out: only with --format=gguf");
  ExpectUsageError({ckpt, "--format=ggml", out}, "--format=ggml: expected shards or gguf");
  ExpectUsageError({ckpt, "--format=gguf", out, tokenizer, "--dtype=int4"},
                   "--dtype=\"int4\": expected bf16, fp16, fp32, int8 or q4_k");
  // The launcher's name for it, and the former one beside it.
  ExpectUsageError({ckpt, "--format=gguf", out, tokenizer, "--weights_dtype=int4"},
                   "--weights_dtype=\"int4\": expected bf16, fp16, fp32, int8 or q4_k");
  ExpectUsageError({ckpt, "--format=gguf", out, tokenizer, "--weights_dtype=bf16", "--dtype=fp16"},
                   "--weights_dtype=bf16 and --dtype=fp16: give one");
}

// llama.cpp's greedy tokens equal PyTorch's for as long as PyTorch's top
// two logits are at least 0.01 apart: f32 sums in another order move
// logits by about 1e-5 here, so a closer race may go either way (and after
// one different token the rest differ too).
TEST(GgufExportTest, LlamaCppGeneratesPyTorchsGreedyTokens) {
  ASSERT_TRUE(fs::exists(NodeToolsDir() + "/node_modules/node-llama-cpp"))
      << NodeToolsDir() << " has no node-llama-cpp: third_party/setup.sh installs it";
  // model fixture, conversion dtype (f32 math, as the goldens), tokenizer.
  constexpr char kTiktoken[] = "tests/fixtures/tiktoken_fixture/tokenizer.model";
  const std::string sentencepiece = TokenizerFixturePath("tokenizer.model");
  const std::tuple<const char*, const char*, std::string> models[] = {
      {"tiny_fp32_mp1", "", sentencepiece},
      {"gqa_bf16_mp1", "fp32", sentencepiece},
      // Llama 3.1-shaped: "gpt2" vocabulary with merges, rope_freqs.weight.
      {"llama3_bf16_mp1", "fp32", kTiktoken},
  };
  for (const auto& [model, dtype, tokenizer_path] : models) {
    SCOPED_TRACE(model);
    const std::string gguf =
        ConvertToGguf(CheckpointFixturePath(model), std::string(model) + "_llamacpp", dtype, tokenizer_path);
    std::ifstream golden_file(absl::StrCat("tests/fixtures/engine_golden/", model, "/golden.json"));
    const nlohmann::json golden = nlohmann::json::parse(golden_file);
    const nlohmann::json& greedy = golden["generations"][0];  // 64 tokens, no echo.
    ProcessOptions options;
    // Texts for llama.cpp's tokenizer on the exported vocabulary.
    const std::vector<std::string> texts = {"I believe the meaning of life is", "Hello,  world!\n\n  123456 don't",
                                            "The quick brown fox. Paris, the capital of France"};
    options.argv = {"/usr/bin/env", "node", "tests/fixtures/llama_cpp_greedy.mjs", NodeToolsDir(), gguf,
                    golden["prompts"].dump(), "64", nlohmann::json(texts).dump()};
    options.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
    options.stdout_path = TempDir() + "/" + model + ".llamacpp.out";
    options.stderr_path = TempDir() + "/" + model + ".llamacpp.err";
    absl::StatusOr<std::unique_ptr<Process>> node = Process::Spawn(options);
    ASSERT_TRUE(node.ok()) << node.status();
    absl::StatusOr<ExitStatus> exit = (*node)->Wait(std::chrono::seconds(120));
    ASSERT_TRUE(exit.ok() && exit->success()) << ReadFileOrEmpty(options.stderr_path);
    const nlohmann::json output = nlohmann::json::parse(ReadFileOrEmpty(options.stdout_path));
    const nlohmann::json& theirs = output["greedy"];
    ASSERT_EQ(theirs.size(), greedy["tokens"].size());
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(tokenizer_path);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    for (size_t t = 0; t < texts.size(); ++t) {
      EXPECT_EQ(output["tokenized"][t].get<std::vector<int>>(), *(*tokenizer)->Encode(texts[t], false, false))
          << "llama.cpp tokenizes \"" << texts[t] << "\" differently with the exported vocabulary";
    }
    int compared = 0;
    for (size_t p = 0; p < theirs.size(); ++p) {
      for (size_t i = 0; i < greedy["tokens"][p].size() && greedy["top2_gaps"][p][i].get<double>() >= 0.01; ++i) {
        ASSERT_EQ(theirs[p][i], greedy["tokens"][p][i]) << "prompt " << p << ", token " << i;
        ++compared;
      }
    }
    std::printf("%s: llama.cpp's greedy tokens equal PyTorch's on %d tokens of %zu prompts\n", model, compared,
                theirs.size());
    // Enough agreed tokens to mean something: 113-125 on the Llama 2
    // fixtures, 46 on Llama 3's, whose random weights give near ties early.
    EXPECT_GE(compared, 40);
  }
}

}  // namespace
}  // namespace llama
