// From a grammar to the tokens a sequence may take next, as a bit mask over
// the vocabulary (bit t of word t / 64: token t is allowed).
//
// A mask depends only on the parser state (byte_parser.h), so it is
// computed once per state and kept: a sequence inside a JSON string, a
// number or a run of whitespace meets the same few states again and
// again, and every request with the same grammar shares them. Computing
// one walks the vocabulary's trie (TokenTrie) through the parser, pruning
// a whole subtree at the first byte no sentence continues with; a
// structural state (after "{", say) thus visits a few hundred nodes, an
// open string most of the trie, once. tools/grammar_bench measures both.
//
// Stop tokens are not in the masks: the engine allows them exactly when
// the matcher is accepting (TokenChoice::also_allowed).

#ifndef LLAMA_WORKER_GRAMMAR_TOKEN_MATCHER_H_
#define LLAMA_WORKER_GRAMMAR_TOKEN_MATCHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tokenizer/tokenizer.h"
#include "worker/grammar/byte_parser.h"
#include "worker/grammar/grammar.h"

namespace llama::grammar {

using TokenMask = std::vector<uint64_t>;

inline bool MaskHas(const uint64_t* mask, int token) { return (mask[token >> 6] >> (token & 63)) & 1; }

// The vocabulary's tokens by their bytes, as a trie laid out depth first.
class TokenTrie {
 public:
  struct Node {
    int32_t subtree_end;   // The index after this node's subtree.
    int32_t tokens_begin;  // Into token_ids(): the tokens whose bytes end here.
    int32_t tokens_end;
    uint16_t depth;  // The root is 0; its children 1.
    uint8_t byte;
  };

  // `bytes[t]` is what token t appends to the text; empty for tokens a
  // grammar never allows (control and special tokens).
  static std::shared_ptr<const TokenTrie> Build(std::vector<std::string> bytes);
  // The bytes as decoding gives them: SentencePiece's U+2581 as a space,
  // byte pieces (<0xNN>) as their byte; tiktoken's bytes as they are.
  static std::shared_ptr<const TokenTrie> ForTokenizer(const Tokenizer& tokenizer);

  int vocab_size() const { return static_cast<int>(bytes_.size()); }
  const std::string& bytes(int token) const { return bytes_[token]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  int max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> token_ids_;
  int max_depth_ = 0;
};

// A grammar over a vocabulary: parser states and their masks, shared by
// every sequence of every request with this grammar. Thread-safe.
class TokenAutomaton {
 public:
  using StateId = ByteParser::StateId;

  TokenAutomaton(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);

  StateId initial() const { return initial_; }
  // The tokens allowed in `state` (not kDead).
  std::shared_ptr<const TokenMask> Allowed(StateId state);
  // The state after `token`; kDead when the grammar does not allow it.
  StateId Advance(StateId state, int token);
  bool accepting(StateId state);
  bool live(StateId state);
  // The grammar was too ambiguous to follow (ByteParser::overflowed).
  bool overflowed();

  const TokenTrie& trie() const { return *trie_; }

  struct Stats {
    int64_t parser_states = 0;
    int64_t masks = 0;        // Computed (misses), kept or since dropped.
    int64_t mask_hits = 0;
    int64_t nodes_visited = 0;  // Trie nodes walked over all misses.
  };
  Stats stats();

  // Kept masks beyond this many bytes are dropped (and recomputed if met again).
  static constexpr int64_t kMaxMaskBytes = int64_t{256} << 20;

 private:
  void Walk(StateId state, TokenMask& mask) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const std::shared_ptr<const Grammar> grammar_;
  const std::shared_ptr<const TokenTrie> trie_;
  absl::Mutex mutex_;
  ByteParser parser_ ABSL_GUARDED_BY(mutex_);
  StateId initial_;
  absl::flat_hash_map<StateId, std::shared_ptr<const TokenMask>> masks_ ABSL_GUARDED_BY(mutex_);
  int64_t mask_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mutex_);
  std::vector<StateId> path_ ABSL_GUARDED_BY(mutex_);  // Walk's state at each depth.
};

// One sequence's place in its grammar.
class TokenMatcher {
 public:
  // An error when the grammar accepts nothing at all.
  static absl::StatusOr<std::unique_ptr<TokenMatcher>> Start(std::shared_ptr<TokenAutomaton> automaton);

  // The tokens allowed next (stop tokens aside: see accepting()).
  std::shared_ptr<const TokenMask> Allowed() { return automaton_->Allowed(state_); }
  // Takes a token the mask allowed; an error for one it did not.
  absl::Status Accept(int token);
  // What came so far is a sentence: a stop token may end it here.
  bool accepting() const { return automaton_->accepting(state_); }
  // A sentence to which nothing can be added: generation is over.
  bool complete() const { return accepting() && !automaton_->live(state_); }
  int vocab_size() const { return automaton_->trie().vocab_size(); }

 private:
  TokenMatcher(std::shared_ptr<TokenAutomaton> automaton, TokenAutomaton::StateId state)
      : automaton_(std::move(automaton)), state_(state) {}

  std::shared_ptr<TokenAutomaton> automaton_;
  TokenAutomaton::StateId state_;
};

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_TOKEN_MATCHER_H_
