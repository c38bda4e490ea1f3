// From a grammar to the tokens a sequence may take next, as a bit mask over
// the vocabulary (bit t of word t / 64: token t is allowed).
//
// A mask depends only on the parser state (byte_parser.h), so it is
// computed once per state and kept: a sequence inside a JSON string, a
// number or a run of whitespace meets the same few states again and
// again, and every request with the same grammar shares them. Computing
// one walks the vocabulary's trie (TokenTrie) through the parser, pruning
// a whole subtree at the first byte no sentence continues with.
//
// Most of a mask depends only on the top few frames of each of the
// state's stacks, not on what lies below them: an open string allows the
// same hundred thousand tokens inside any property of any object. So the
// trie is walked once per distinct top (kSplitDepth frames, with nothing
// below: ByteParser::StackTops), keeping the tokens those frames take
// before the deepest of them returns ("within") and the trie nodes where
// it can return ("exits": after a string's closing quote, say). A state's
// mask is then the within sets of its tops and, walked from the state
// itself, only the exits' subtrees: tens of microseconds where the whole
// trie took milliseconds (a top's first state still walks it, and only the
// second computes the split). As xgrammar splits context-independent from
// context-dependent tokens. tools/grammar_bench measures it.
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
    int64_t splits = 0;         // Tops walked alone (see the header).
    int64_t nodes_visited = 0;  // Trie nodes walked over all misses.
  };
  Stats stats();

  // The mask walked over the whole trie from `state`, as it was before
  // masks were split by top position: the tests' reference.
  TokenMask AllowedByWholeWalkForTesting(StateId state);

  // Kept masks beyond this many bytes are dropped (and recomputed if met again).
  static constexpr int64_t kMaxMaskBytes = int64_t{256} << 20;

 private:
  // A trie node where a top frame's rule can end, and the bytes to it.
  struct Exit {
    int32_t node;
    std::string prefix;
  };
  // What a top allows whatever is below it (see the header).
  struct TopSplit {
    TokenMask within;
    std::vector<Exit> exits;
  };
  // Frames in a top: a JSON string's content is three deep (a character
  // inside the repetition inside the string rule), so a top of three ends
  // at the closing quote; one frame would end after every character.
  static constexpr int kSplitDepth = 3;
  // More tops than this in one state (an ambiguous grammar): the whole trie
  // is walked instead.
  static constexpr size_t kMaxSplitTops = 16;

  // Walks trie nodes [begin, end), all below one node of depth d whose
  // state is path_[d], setting the tokens of every node the parser can
  // reach. With `exits`, the walk is a lone frame's: a node where it
  // accepts is recorded there, its tokens and subtree left to the states
  // that walk the exit (WalkExits).
  void Walk(int32_t begin, int32_t end, TokenMask& mask, std::vector<Exit>* exits)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  const TopSplit& SplitOf(int32_t top) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The exits' tokens and subtrees, walked from `state`.
  void WalkExits(StateId state, const std::vector<Exit>& exits, TokenMask& mask) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  std::shared_ptr<TokenMask> Compute(StateId state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const std::shared_ptr<const Grammar> grammar_;
  const std::shared_ptr<const TokenTrie> trie_;
  absl::Mutex mutex_;
  ByteParser parser_ ABSL_GUARDED_BY(mutex_);
  StateId initial_;
  absl::flat_hash_map<StateId, std::shared_ptr<const TokenMask>> masks_ ABSL_GUARDED_BY(mutex_);
  int64_t mask_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<int32_t, std::unique_ptr<const TopSplit>> splits_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<int32_t, int64_t> tops_met_ ABSL_GUARDED_BY(mutex_);  // Masks computed with each top.
  std::vector<StateId> path_ ABSL_GUARDED_BY(mutex_);  // Walk's state at each depth.
  std::string bytes_path_ ABSL_GUARDED_BY(mutex_);     // Walk's byte at each depth.
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
