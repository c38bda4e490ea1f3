#include "worker/grammar/byte_parser.h"

#include <algorithm>
#include <utility>

namespace llama::grammar {

ByteParser::ByteParser(const Grammar& grammar) : grammar_(grammar) {
  std::vector<int32_t> stacks;
  bool accepting = false;
  for (const int32_t start : grammar_.alternatives(grammar_.root())) todo_.push_back({start, kBottom});
  Close(stacks, accepting);
  initial_ = InternState(stacks, accepting);
}

namespace {

uint64_t PairKey(int32_t position, int32_t below) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(position)) << 32) | static_cast<uint32_t>(below);
}

}  // namespace

int32_t ByteParser::InternFrame(int32_t position, int32_t below) {
  const auto [it, inserted] = frame_ids_.try_emplace(PairKey(position, below), static_cast<int32_t>(frames_.size()));
  if (inserted) frames_.push_back({position, below});
  return it->second;
}

void ByteParser::Close(std::vector<int32_t>& stacks, bool& accepting) {
  visited_.clear();
  while (!todo_.empty()) {
    const auto [position, below] = todo_.back();
    todo_.pop_back();
    if (!visited_.insert(PairKey(position, below)).second) continue;
    if (visited_.size() > kMaxClosure) {
      overflowed_ = true;
      todo_.clear();
      stacks.clear();
      accepting = false;
      return;
    }
    const Element& e = grammar_.element(position);
    switch (e.kind) {
      case Element::kEnd:
        // The rule is done: return to the frame below, or the sentence is.
        if (below == kBottom) {
          accepting = true;
        } else {
          todo_.push_back({frames_[below].position, frames_[below].below});
        }
        break;
      case Element::kBytes:
        stacks.push_back(InternFrame(position, below));
        break;
      case Element::kRule: {
        const bool tail = grammar_.element(position + 1).kind == Element::kEnd;
        const int32_t callee_below = tail ? below : InternFrame(position + 1, below);
        for (const int32_t start : grammar_.alternatives(e.value)) todo_.push_back({start, callee_below});
        break;
      }
    }
  }
}

ByteParser::StateId ByteParser::InternState(std::vector<int32_t>& stacks, bool accepting) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMaxStacks) {
    overflowed_ = true;
    return kDead;
  }
  if (stacks.empty() && !accepting) return kDead;
  stacks.push_back(accepting ? kAcceptingMark : kRejectingMark);
  if (const auto it = state_ids_.find(stacks); it != state_ids_.end()) return it->second;
  const StateId id = static_cast<StateId>(states_.size());
  state_ids_.emplace(stacks, id);
  stacks.pop_back();
  states_.push_back({stacks, accepting});
  next_.resize(next_.size() + 256, kUnknown);
  return id;
}

ByteParser::StateId ByteParser::Advance(StateId state, uint8_t b) {
  scratch_.clear();
  bool accepting = false;
  for (const int32_t top : states_[state].stacks) {
    const Frame f = frames_[top];
    if (grammar_.byte_set(grammar_.element(f.position).value).Has(b)) todo_.push_back({f.position + 1, f.below});
  }
  Close(scratch_, accepting);
  return InternState(scratch_, accepting);
}

std::vector<int32_t> ByteParser::StackTops(StateId state, int depth) {
  std::vector<int32_t> tops;
  std::vector<int32_t> chain;
  for (const int32_t top : states_[state].stacks) {
    chain.clear();
    for (int32_t f = top; f != kBottom && static_cast<int>(chain.size()) < depth; f = frames_[f].below) chain.push_back(f);
    int32_t rebuilt = kBottom;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) rebuilt = InternFrame(frames_[*it].position, rebuilt);
    tops.push_back(rebuilt);
  }
  return tops;
}

ByteParser::StateId ByteParser::Subset(StateId state, const std::vector<bool>& keep) {
  std::vector<int32_t> stacks;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i]) stacks.push_back(states_[state].stacks[i]);
  }
  return InternState(stacks, /*accepting=*/false);
}

ByteParser::StateId ByteParser::StateOfStack(int32_t frame) {
  std::vector<int32_t> stacks = {frame};
  return InternState(stacks, /*accepting=*/false);
}

ByteParser::StateId ByteParser::Learn(StateId state, uint8_t b) {
  const StateId to = Advance(state, b);
  next_[static_cast<size_t>(state) * 256 + b] = to;
  return to;
}

}  // namespace llama::grammar
