// Converting GGUF files: a GGUF of a checkpoint converts to the same shards
// as the checkpoint itself; llama.cpp's own quantized files (testdata/gguf,
// made by llama-quantize) convert at any world size, each rank's slice
// decoded from the file's blocks; clear refusals.
#include <filesystem>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_fixture.h"
#include "checkpoint/converter.h"
#include "checkpoint/gguf_reader.h"
#include "checkpoint/gguf_writer.h"
#include "checkpoint/shard_digest.h"
#include "checkpoint/shard_format.h"
#include "ops/cast.h"
#include "ops/ggml_blocks.h"
#include "ops/quantize.h"

namespace llama {
namespace {

namespace fs = std::filesystem;
using ::llama::testing::CheckpointFixturePath;
using ::llama::testing::ExpectSameShards;
using ::testing::HasSubstr;

std::string OutDir(const std::string& name) { return std::string(getenv("TEST_TMPDIR")) + "/" + name; }
std::string TestdataGguf(const std::string& type) { return "checkpoint/testdata/gguf/" + type + ".gguf"; }

absl::StatusOr<ConvertResult> Convert(const std::string& ckpt_dir, const std::string& out_dir, int world_size,
                                      std::optional<DType> dtype = std::nullopt) {
  ConvertOptions options;
  options.ckpt_dir = ckpt_dir;
  options.out_dir = out_dir;
  options.world_size = world_size;
  options.dtype = dtype;
  return ConvertCheckpoint(options);
}

std::string ExportGguf(const std::string& model, const std::string& tokenizer, DType dtype) {
  ConvertOptions options;
  options.ckpt_dir = CheckpointFixturePath(model);
  options.out_dir = OutDir(absl::StrCat(model, "_", DTypeName(dtype), ".gguf"));
  options.format = OutputFormat::kGguf;
  options.tokenizer_path = tokenizer;
  options.dtype = dtype;
  const absl::StatusOr<ConvertResult> exported = ConvertCheckpoint(options);
  EXPECT_TRUE(exported.ok()) << model << ": " << exported.status();
  return options.out_dir;
}

ModelConfig ConfigOf(const std::string& dir, int world_size) {
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(dir + "/" + ShardFileName(0, world_size));
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? ModelConfigFromProto((*reader)->index().config()) : ModelConfig{};
}

void ExpectSameConfig(const ModelConfig& a, const ModelConfig& b, const std::string& label) {
  EXPECT_EQ(a.dim, b.dim) << label;
  EXPECT_EQ(a.n_layers, b.n_layers) << label;
  EXPECT_EQ(a.n_heads, b.n_heads) << label;
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads) << label;
  EXPECT_EQ(a.vocab_size, b.vocab_size) << label;
  EXPECT_EQ(a.ffn_hidden_dim(), b.ffn_hidden_dim()) << label;
  EXPECT_EQ(a.norm_eps, b.norm_eps) << label;  // GGUF's f32 1e-5 read back as 1e-5.
  EXPECT_EQ(a.rope_theta, b.rope_theta) << label;
  ASSERT_EQ(a.rope_scaling.has_value(), b.rope_scaling.has_value()) << label;
  if (a.rope_scaling.has_value()) {
    EXPECT_EQ(a.rope_scaling->factor, b.rope_scaling->factor) << label;
    EXPECT_EQ(a.rope_scaling->low_freq_factor, b.rope_scaling->low_freq_factor) << label;
    EXPECT_EQ(a.rope_scaling->high_freq_factor, b.rope_scaling->high_freq_factor) << label;
    EXPECT_EQ(a.rope_scaling->original_context, b.rope_scaling->original_context) << label;
  }
}

// Our export of a checkpoint, imported, is the checkpoint: f32 (the norms
// are f32 in GGUF) and int8 (GGUF's Q8_0 is our int8), Llama 2 and Llama
// 3.1 (scaled RoPE through rope_freqs.weight), split at every world size.
TEST(GgufImportTest, OurExportConvertsToTheCheckpointsOwnShards) {
  const std::string spm = "tests/fixtures/tokenizer_fixture/tokenizer.model";
  const std::string tiktoken = "tests/fixtures/tiktoken_fixture/tokenizer.model";
  const std::tuple<const char*, std::string, DType> cases[] = {
      {"tiny_fp32_mp1", spm, DType::kF32},
      {"tiny_fp32_mp1", spm, DType::kQ8_0},
      {"gqa_bf16_mp1", spm, DType::kF32},
      {"llama3_bf16_mp1", tiktoken, DType::kF32},
  };
  for (const auto& [model, tokenizer, dtype] : cases) {
    const std::string gguf = ExportGguf(model, tokenizer, dtype);
    for (int world_size : {1, 2}) {
      const std::string label = absl::StrCat(model, "_", DTypeName(dtype), "_tp", world_size);
      const absl::StatusOr<ConvertResult> imported = Convert(gguf, OutDir(label + "_gguf"), world_size);
      ASSERT_TRUE(imported.ok()) << label << ": " << imported.status();
      ASSERT_TRUE(Convert(CheckpointFixturePath(model), OutDir(label + "_meta"), world_size, dtype).ok()) << label;
      ExpectSameConfig(ConfigOf(OutDir(label + "_gguf"), world_size), ConfigOf(OutDir(label + "_meta"), world_size),
                       label);
      ExpectSameShards(OutDir(label + "_gguf"), OutDir(label + "_meta"), world_size);
    }
  }
}

// One tensor of a shard as f32 (from f16, f32 or q4_k), and its dtype.
std::vector<float> ShardValues(const std::string& dir, int rank, int world_size, const std::string& name,
                               DType* dtype = nullptr) {
  absl::StatusOr<std::unique_ptr<ShardReader>> reader = ShardReader::Open(dir + "/" + ShardFileName(rank, world_size));
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  const FileTensor* t = (*reader)->Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  if (dtype != nullptr) *dtype = t->dtype;
  if (IsBlockDType(t->dtype)) {  // q8_0, q4_k and q6_k are ggml's Q8_0, Q4_K and Q6_K.
    const GgmlType type = t->dtype == DType::kQ4_K   ? GgmlType::kQ4_K
                          : t->dtype == DType::kQ6_K ? GgmlType::kQ6_K
                                                     : GgmlType::kQ8_0;
    std::vector<float> values(t->bytes.size() / TensorBytes(t->dtype, BlockElements(t->dtype)) *
                              BlockElements(t->dtype));
    EXPECT_TRUE(DecodeGgmlRow(static_cast<uint32_t>(type), t->bytes.data(), values.size(), values.data()).ok());
    return values;
  }
  std::vector<float> values(t->bytes.size() / DTypeSize(t->dtype));
  EXPECT_TRUE(CastElements(t->bytes.data(), t->dtype, values.data(), DType::kF32, values.size()).ok());
  return values;
}

// llama-quantize's files (Q4_0, Q4_K_M, Q5_K_M, Q6_K, Q8_0): each tensor of a rank's shard is its slice of the
// file's tensor, decoded (ggml_blocks_test checks decoding against
// llama.cpp's) and re-quantized to int8 as our quantizer does it (or
// rounded to f16), row-split and column-split alike; Q4_K and Q6_K linear
// layers are copied as q4_k and q6_k (their blocks, so the same values
// unrounded). Q4_K_M at two ranks splits the column-split Q4_K rows of 256
// into halves, not whole blocks: those go f16 by default, and asking for
// q4_k is refused, naming the tensor.
TEST(GgufImportTest, LlamaCppsQuantizedFilesConvertAtEveryWorldSize) {
  const absl::StatusOr<ConvertResult> split_blocks =
      Convert(TestdataGguf("Q4_K_M"), OutDir("Q4_K_M_split_blocks"), 2, DType::kQ4_K);
  ASSERT_FALSE(split_blocks.ok());
  EXPECT_THAT(split_blocks.status().message(), HasSubstr("has rows of 128 values on each of 2 ranks; q4_k blocks "
                                                         "need a multiple of 256"));
  for (const char* type : {"Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"}) {
    absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(TestdataGguf(type));
    ASSERT_TRUE(file.ok()) << file.status();
    const std::pair<const char*, const char*> checked[] = {
        {"blk.0.attn_k.weight", "layers.0.attention.wk.weight"},   // Rows split.
        {"blk.0.ffn_down.weight", "layers.0.feed_forward.w2.weight"},  // Columns split.
        {"output.weight", "output.weight"},                          // Q6_K in every preset but Q8_0.
    };
    for (int world_size : {1, 2}) {
      const std::string out = OutDir(absl::StrCat(type, "_tp", world_size));
      const absl::StatusOr<ConvertResult> converted = Convert(TestdataGguf(type), out, world_size);
      ASSERT_TRUE(converted.ok()) << type << ": " << converted.status();
      for (const auto& [gguf_name, name] : checked) {
        const GgufTensorInfo* info = nullptr;
        for (const GgufTensorInfo& t : (*file)->tensors()) info = t.name == gguf_name ? &t : info;
        ASSERT_NE(info, nullptr) << gguf_name;
        const int64_t rows = info->shape[0], cols = info->shape[1];
        std::vector<float> full(rows * cols);
        ASSERT_TRUE(DecodeGgmlRow(info->ggml_type, (*file)->TensorData(*info).data(), rows * cols, full.data()).ok());
        const bool by_columns = std::string(name).find("w2") != std::string::npos;
        const bool whole_blocks = world_size == 1 || !by_columns;
        std::vector<float> joined;  // The ranks' slices put back together.
        DType stored = DType::kF16;
        for (int rank = 0; rank < world_size; ++rank) {
          const std::vector<float> part = ShardValues(out, rank, world_size, name, &stored);
          joined.insert(joined.end(), part.begin(), part.end());
        }
        // Q4_K and Q6_K stay q4_k and q6_k (f16 where a rank's slice is part
        // blocks of 256), the other block types become int8 (every slice
        // here is whole blocks of 32).
        const bool q4k = info->ggml_type == static_cast<uint32_t>(GgmlType::kQ4_K);
        const bool q6k = info->ggml_type == static_cast<uint32_t>(GgmlType::kQ6_K);
        const DType want = !q4k && !q6k   ? DType::kQ8_0
                           : !whole_blocks ? DType::kF16
                           : q4k           ? DType::kQ4_K
                                           : DType::kQ6_K;
        EXPECT_EQ(stored, want) << type << " " << name << " tp" << world_size;
        if (stored == DType::kF16) {
          for (float& v : full) v = F16ToF32(F32ToF16(v));
        } else if (stored == DType::kQ8_0 && info->ggml_type != static_cast<uint32_t>(GgmlType::kQ8_0)) {
          // Re-quantized as our int8 quantizer does it (Q8_0 is copied: its blocks are ours).
          std::vector<uint8_t> blocks(TensorBytes(DType::kQ8_0, full.size()));
          ASSERT_TRUE(QuantizeQ8_0(full.data(), full.size(), blocks.data()).ok());
          DequantizeQ8_0(blocks.data(), full.size(), full.data());
        }
        if (by_columns && world_size == 2) {  // Rank r holds columns [r*cols/2, (r+1)*cols/2) of every row.
          std::vector<float> rebuilt(rows * cols);
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < cols; ++c) rebuilt[r * cols + c] = joined[(c / (cols / 2)) * rows * (cols / 2) +
                                                                               r * (cols / 2) + c % (cols / 2)];
          }
          joined = rebuilt;
        }
        EXPECT_EQ(joined, full) << type << " " << name << " tp" << world_size;
      }
    }
  }
}

// llama.cpp's own Hugging Face converter (convert_hf_to_gguf.py, F16 and
// BF16, testdata/gguf/make_testdata.sh) of the Hugging Face fixture
// tiny_fp16_bin imports to what our conversion of that folder gives:
// every weight matrix bit for bit in its type (llama.cpp undid Hugging
// Face's q/k row order as we do, and rounded f16 to bf16 as we do), the
// norms the same values (llama.cpp stores them f32), at one and two ranks.
TEST(GgufImportTest, LlamaCppsHuggingFaceConversionsImportAsTheFolderConverts) {
  const std::string folder = "tests/fixtures/hf_fixture/tiny_fp16_bin";
  for (const auto& [type, dtype] : {std::pair{"hf_F16", DType::kF16}, std::pair{"hf_BF16", DType::kBF16}}) {
    for (int world_size : {1, 2}) {
      const std::string label = absl::StrCat(type, "_tp", world_size);
      ASSERT_TRUE(Convert(TestdataGguf(type), OutDir(label + "_gguf"), world_size).ok()) << label;
      ASSERT_TRUE(Convert(folder, OutDir(label + "_hf"), world_size, dtype).ok()) << label;
      ASSERT_TRUE(Convert(folder, OutDir(label + "_hf_as_stored"), world_size).ok()) << label;
      ExpectSameConfig(ConfigOf(OutDir(label + "_gguf"), world_size), ConfigOf(OutDir(label + "_hf"), world_size),
                       label);
      absl::StatusOr<std::unique_ptr<ShardReader>> reader =
          ShardReader::Open(OutDir(label + "_hf") + "/" + ShardFileName(0, world_size));
      ASSERT_TRUE(reader.ok()) << reader.status();
      for (const shard::TensorEntry& entry : (*reader)->index().tensors()) {
        for (int rank = 0; rank < world_size; ++rank) {
          // A norm is compared with the folder's own f16 values, which
          // llama.cpp widened to f32 (our --weights_dtype=bf16 rounds it).
          const bool norm = entry.shape_size() == 1;
          const std::string folder_shards = OutDir(label + (norm ? "_hf_as_stored" : "_hf"));
          DType theirs = DType::kF32;
          const std::vector<float> from_gguf =
              ShardValues(OutDir(label + "_gguf"), rank, world_size, entry.name(), &theirs);
          EXPECT_EQ(from_gguf, ShardValues(folder_shards, rank, world_size, entry.name()))
              << label << " " << entry.name() << " rank " << rank;
          EXPECT_EQ(theirs, norm ? DType::kF32 : dtype) << label << " " << entry.name();
        }
      }
    }
  }
}

// --dtype=q4_k of a checkpoint without Q4_K (here llama-quantize's Q8_0
// file, decoded) quantizes its linear layers to the types llama-quantize
// gave the same model's Q4_K_M file (q4_k, and q6_k for the output, the
// value and the down projections; the embedding stays as the file's Q8_0
// converts by default, f16); rows that are not whole 256-blocks (the
// 64-wide fixture) are refused, naming the tensor; of a Q4_K_M file it
// keeps the file's types, as the default does.
TEST(GgufImportTest, Q4KQuantizesOtherCheckpointsAndKeepsAQ4KMFilesTypes) {
  const std::string quantized = OutDir("q4k_from_q8_0");
  const absl::StatusOr<ConvertResult> converted = Convert(TestdataGguf("Q8_0"), quantized, 1, DType::kQ4_K);
  ASSERT_TRUE(converted.ok()) << converted.status();
  const std::string theirs = OutDir("q4k_of_llama_quantize");
  ASSERT_TRUE(Convert(TestdataGguf("Q4_K_M"), theirs, 1).ok());
  for (const char* name : {"output.weight", "layers.0.attention.wq.weight", "layers.0.attention.wk.weight",
                           "layers.0.attention.wv.weight", "layers.0.attention.wo.weight",
                           "layers.0.feed_forward.w1.weight", "layers.0.feed_forward.w2.weight",
                           "layers.0.feed_forward.w3.weight"}) {
    DType ours = DType::kF32, want = DType::kF32;
    ShardValues(quantized, 0, 1, name, &ours);
    ShardValues(theirs, 0, 1, name, &want);
    EXPECT_EQ(ours, want) << name;
  }
  DType embedding = DType::kF32;
  ShardValues(quantized, 0, 1, "tok_embeddings.weight", &embedding);
  EXPECT_EQ(embedding, DType::kF16);
  const absl::StatusOr<ConvertResult> narrow =
      Convert(CheckpointFixturePath("tiny_fp32_mp1"), OutDir("q4k_from_narrow"), 1, DType::kQ4_K);
  ASSERT_FALSE(narrow.ok());
  EXPECT_EQ(narrow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(narrow.status().message(), HasSubstr("q4_k blocks need a multiple of 256"));
  ASSERT_TRUE(Convert(TestdataGguf("Q4_K_M"), OutDir("q4k_asked"), 1, DType::kQ4_K).ok());
  ASSERT_TRUE(Convert(TestdataGguf("Q4_K_M"), OutDir("q4k_default"), 1).ok());
  ExpectSameShards(OutDir("q4k_asked"), OutDir("q4k_default"), 1);
}

// A Q4_K_M file converted back to GGUF keeps every tensor's type (its Q4_K
// and Q6_K blocks copied), says Q4_K_M in general.file_type, and imports to
// the same shards as the original.
TEST(GgufImportTest, AQ4KMFileExportsBackToGgufWithItsTypes) {
  const std::string imported = OutDir("q4km_for_export");
  ASSERT_TRUE(Convert(TestdataGguf("Q4_K_M"), imported, 1).ok());
  ConvertOptions options;
  options.ckpt_dir = TestdataGguf("Q4_K_M");
  options.out_dir = OutDir("q4km_again.gguf");
  options.format = OutputFormat::kGguf;
  options.tokenizer_path = "tests/fixtures/tokenizer_fixture/tokenizer.model";  // The vocabulary the file was made with.
  const absl::StatusOr<ConvertResult> exported = ConvertCheckpoint(options);
  ASSERT_TRUE(exported.ok()) << exported.status();
  absl::StatusOr<std::unique_ptr<GgufFile>> original = GgufFile::Open(TestdataGguf("Q4_K_M"));
  absl::StatusOr<std::unique_ptr<GgufFile>> again = GgufFile::Open(options.out_dir);
  ASSERT_TRUE(original.ok() && again.ok());
  std::map<std::string, uint32_t> types;
  for (const GgufTensorInfo& t : (*original)->tensors()) types[t.name] = t.ggml_type;
  for (const GgufTensorInfo& t : (*again)->tensors()) {
    if (t.shape.size() == 2 && t.name != "token_embd.weight") {
      EXPECT_EQ(t.ggml_type, types[t.name]) << t.name;
    }
  }
  int64_t file_type = -1;
  for (const auto& [key, value] : (*again)->metadata()) file_type = key == "general.file_type" ? value.get<int64_t>() : file_type;
  EXPECT_EQ(file_type, 15);  // LLAMA_FTYPE_MOSTLY_Q4_K_M.
  ASSERT_TRUE(Convert(options.out_dir, OutDir("q4km_again_shards"), 1).ok());
  ExpectSameShards(OutDir("q4km_again_shards"), imported, 1);
}

TEST(GgufImportTest, AFolderOfOneGgufFileIsThatFile) {
  const std::string dir = OutDir("one_gguf");
  fs::create_directories(dir);
  fs::copy_file(TestdataGguf("Q4_K_M"), dir + "/model.gguf");
  const absl::StatusOr<ConvertResult> converted = Convert(dir, OutDir("one_gguf_shards"), 1);
  ASSERT_TRUE(converted.ok()) << converted.status();
  fs::copy_file(TestdataGguf("Q4_0"), dir + "/other.gguf");
  const absl::StatusOr<ConvertResult> two = Convert(dir, OutDir("two_gguf_shards"), 1);
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(two.status().message()), HasSubstr("holds 2 GGUF files (model.gguf, other.gguf)"));
}

// A GGUF file written with our writer: `metadata`, one f32 tensor.
std::string WriteGguf(const std::string& name, const GgufMetadata& metadata) {
  const std::string path = OutDir(name + ".gguf");
  absl::StatusOr<std::unique_ptr<GgufWriter>> writer =
      GgufWriter::Create(path, metadata, {{"token_embd.weight", DType::kF32, {4, 8}}});
  EXPECT_TRUE(writer.ok()) << writer.status();
  const std::vector<uint8_t> zeros(4 * 8 * sizeof(float));
  EXPECT_TRUE((*writer)->Append(zeros).ok());
  EXPECT_TRUE((*writer)->Finish().ok());
  return path;
}

// A one-layer model of dim 8 (2 heads) written with our writer, its values
// 0.25, 0.5, ... in file order: no output.weight (tied to the embedding),
// and `extra` tensors after the others with their own values.
std::string WriteTinyModel(const std::string& name,
                           const std::vector<std::pair<GgufTensor, std::vector<float>>>& extra = {}) {
  GgufMetadata m;
  m.AddString("general.architecture", "llama");
  m.AddU32("llama.embedding_length", 8);
  m.AddU32("llama.block_count", 1);
  m.AddU32("llama.attention.head_count", 2);
  m.AddU32("llama.feed_forward_length", 16);
  m.AddF32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  std::vector<GgufTensor> tensors = {
      {"token_embd.weight", DType::kF32, {4, 8}},       {"blk.0.attn_norm.weight", DType::kF32, {8}},
      {"blk.0.attn_q.weight", DType::kF32, {8, 8}},     {"blk.0.attn_k.weight", DType::kF32, {8, 8}},
      {"blk.0.attn_v.weight", DType::kF32, {8, 8}},     {"blk.0.attn_output.weight", DType::kF32, {8, 8}},
      {"blk.0.ffn_norm.weight", DType::kF32, {8}},      {"blk.0.ffn_gate.weight", DType::kF32, {16, 8}},
      {"blk.0.ffn_down.weight", DType::kF32, {8, 16}},  {"blk.0.ffn_up.weight", DType::kF32, {16, 8}},
      {"output_norm.weight", DType::kF32, {8}},
  };
  std::vector<std::vector<float>> values;
  float next = 0;
  for (const GgufTensor& t : tensors) {
    values.emplace_back(t.shape.size() == 1 ? t.shape[0] : t.shape[0] * t.shape[1]);
    for (float& v : values.back()) v = (next += 0.25f);
  }
  for (const auto& [tensor, tensor_values] : extra) {
    tensors.push_back(tensor);
    values.push_back(tensor_values);
  }
  const std::string path = OutDir(name + ".gguf");
  absl::StatusOr<std::unique_ptr<GgufWriter>> writer = GgufWriter::Create(path, m, tensors);
  EXPECT_TRUE(writer.ok()) << writer.status();
  if (!writer.ok()) return path;
  for (const std::vector<float>& v : values) {
    EXPECT_TRUE(
        (*writer)->Append(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)))
            .ok());
  }
  EXPECT_TRUE((*writer)->Finish().ok());
  return path;
}

// llama.cpp writes no output.weight for a model whose output projection is
// its embedding (tie_word_embeddings): the embedding is used for both.
TEST(GgufImportTest, AFileWithoutAnOutputProjectionTiesItToTheEmbedding) {
  const absl::StatusOr<ConvertResult> converted = Convert(WriteTinyModel("tied"), OutDir("tied_shards"), 1);
  ASSERT_TRUE(converted.ok()) << converted.status();
  const std::vector<float> embedding = ShardValues(OutDir("tied_shards"), 0, 1, "tok_embeddings.weight");
  ASSERT_EQ(embedding.size(), 32u);
  EXPECT_EQ(embedding[0], 0.25f);
  EXPECT_EQ(ShardValues(OutDir("tied_shards"), 0, 1, "output.weight"), embedding);
  EXPECT_EQ(ConfigOf(OutDir("tied_shards"), 1).norm_eps, 1e-6);
}

// rope_freqs.weight must be Llama 3.1's rule for some factor: at a head size
// of 4 both frequencies are high and keep a factor of 1, so 2s are refused.
TEST(GgufImportTest, RopeFactorsOtherThanLlama31sAreRefused) {
  const std::string path =
      WriteTinyModel("bad_rope", {{{"rope_freqs.weight", DType::kF32, {2}}, std::vector<float>{2.0f, 2.0f}}});
  const absl::StatusOr<ConvertResult> s = Convert(path, OutDir("bad_rope_shards"), 1);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("bad_rope.gguf: rope_freqs.weight[0] is 2; Llama 3.1's scaling with factor 2 gives 1"));
}

TEST(GgufImportTest, RefusalsNameTheFileAndTheKey) {
  GgufMetadata gpt2;
  gpt2.AddString("general.architecture", "gpt2");
  absl::StatusOr<ConvertResult> s = Convert(WriteGguf("gpt2", gpt2), OutDir("gpt2_shards"), 1);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("gpt2.gguf: general.architecture is \"gpt2\"; expected \"llama\""));

  GgufMetadata no_heads;
  no_heads.AddString("general.architecture", "llama");
  no_heads.AddU32("llama.embedding_length", 8);
  no_heads.AddU32("llama.block_count", 1);
  s = Convert(WriteGguf("no_heads", no_heads), OutDir("no_heads_shards"), 1);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("no_heads.gguf: metadata key \"llama.attention.head_count\" is missing; expected a positive"));

  GgufMetadata config = no_heads;
  config.AddU32("llama.attention.head_count", 2);
  config.AddU32("llama.feed_forward_length", 16);
  s = Convert(WriteGguf("one_tensor", config), OutDir("one_tensor_shards"), 1);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("one_tensor.gguf: missing the tensor \"blk.0.attn_q.weight\""));

  GgufMetadata partial_rotary = config;
  partial_rotary.AddU32("llama.rope.dimension_count", 2);
  s = Convert(WriteGguf("partial_rotary", partial_rotary), OutDir("partial_rotary_shards"), 1);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("partial_rotary.gguf: llama.rope.dimension_count is 2; expected the head size 4"));

  GgufMetadata linear_scaling = config;
  linear_scaling.AddString("llama.rope.scaling.type", "linear");
  s = Convert(WriteGguf("linear_scaling", linear_scaling), OutDir("linear_scaling_shards"), 1);
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("linear_scaling.gguf: llama.rope.scaling.type is \"linear\"; expected none"));

  s = Convert(OutDir("nothing.gguf"), OutDir("nothing_shards"), 1);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("not a directory (or a .gguf file)"));
}

}  // namespace
}  // namespace llama
