// A parser of a Grammar's sentences one byte at a time: a pushdown
// automaton whose states are memoized, so that feeding a byte to a state
// seen before is one table lookup. The token matcher (token_matcher.h)
// walks a trie of the vocabulary's bytes through it, where the same
// (state, byte) pairs come up again and again.
//
// A stack is a persistent linked list of frames (a position in the
// grammar's elements, the frame below), interned so that equal stacks are
// one id; the top frame's position is always at a byte set. A state is the
// set of stacks the input so far can have left (more than one where the
// grammar is ambiguous or a choice is not yet decided) and whether the
// input so far is a whole sentence. Calls in tail position push no frame,
// so repetitions (right-recursive rules) do not deepen the stack.
//
// Not thread-safe: callers serialize (TokenAutomaton holds a lock).

#ifndef LLAMA_WORKER_GRAMMAR_BYTE_PARSER_H_
#define LLAMA_WORKER_GRAMMAR_BYTE_PARSER_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "worker/grammar/grammar.h"

namespace llama::grammar {

class ByteParser {
 public:
  using StateId = int32_t;
  static constexpr StateId kDead = -1;  // No sentence starts with the input.

  explicit ByteParser(const Grammar& grammar);

  StateId initial() const { return initial_; }
  // The state after byte b; kDead when no sentence continues so.
  StateId Next(StateId state, uint8_t b) {
    const StateId to = next_[static_cast<size_t>(state) * 256 + b];
    return to != kUnknown ? to : Learn(state, b);
  }
  // The input so far is a sentence.
  bool accepting(StateId state) const { return states_[state].accepting; }
  // Some byte may follow.
  bool live(StateId state) const { return !states_[state].stacks.empty(); }
  // The top `depth` frames of each of `state`'s stacks (in their order)
  // with nothing below them, as one stack (frames interned as any other):
  // what those frames take before the deepest of them returns does not
  // depend on the rest.
  std::vector<int32_t> StackTops(StateId state, int depth);
  // The state of the one stack `frame` (from StackTops): where the stack
  // runs out it accepts (the real stack would go on below).
  StateId StateOfStack(int32_t frame);
  // `state` with only the stacks keep[i] (kDead for none), not accepting.
  StateId Subset(StateId state, const std::vector<bool>& keep);
  // A state with more stacks than kMaxStacks, or a closure of more than
  // kMaxClosure items, was cut to kDead: the grammar is too ambiguous to
  // follow (see TokenMatcher::Accept).
  bool overflowed() const { return overflowed_; }
  int64_t states() const { return static_cast<int64_t>(states_.size()); }

  static constexpr size_t kMaxStacks = 1 << 16;
  static constexpr size_t kMaxClosure = 1 << 20;

 private:
  static constexpr StateId kUnknown = -2;
  static constexpr int32_t kBottom = -1;  // Below the last frame.
  static constexpr int32_t kAcceptingMark = -1;
  static constexpr int32_t kRejectingMark = -2;

  struct Frame {
    int32_t position;
    int32_t below;
  };
  struct State {
    std::vector<int32_t> stacks;  // Sorted frame ids.
    bool accepting = false;
  };

  int32_t InternFrame(int32_t position, int32_t below);
  // Adds to `stacks` every stack that reaches a byte set from the items in
  // todo_ (a position over a frame): the closure, with each (position,
  // frame) taken once, so that rules with several empty alternatives do
  // not multiply the paths, and with a work list rather than recursion, so
  // that a deep stack of frames does not deepen the C++ stack. Past
  // kMaxClosure items it gives up: nothing, and overflowed().
  void Close(std::vector<int32_t>& stacks, bool& accepting);
  // The state of `stacks` (sorted and deduplicated here) and `accepting`.
  StateId InternState(std::vector<int32_t>& stacks, bool accepting);
  StateId Advance(StateId state, uint8_t b);
  // Next's first time for (state, b).
  StateId Learn(StateId state, uint8_t b);

  const Grammar& grammar_;
  std::vector<Frame> frames_;
  absl::flat_hash_map<uint64_t, int32_t> frame_ids_;
  std::vector<State> states_;
  // next_[256 * s + b]: Next(s, b), or kUnknown until asked. One table
  // rather than one per state: the trie walk's loads stay in one array.
  std::vector<StateId> next_;
  // Keyed by the stacks followed by kAcceptingMark or kRejectingMark, so
  // that a lookup needs no copy.
  absl::flat_hash_map<std::vector<int32_t>, StateId> state_ids_;
  StateId initial_ = kDead;
  bool overflowed_ = false;
  std::vector<int32_t> scratch_;
  std::vector<std::pair<int32_t, int32_t>> todo_;  // Close's work list.
  absl::flat_hash_set<uint64_t> visited_;         // Close's (position, frame) pairs seen.
};

}  // namespace llama::grammar

#endif  // LLAMA_WORKER_GRAMMAR_BYTE_PARSER_H_
