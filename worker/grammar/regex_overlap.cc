#include "worker/grammar/regex_overlap.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "base/status_macros.h"
#include "worker/grammar/gbnf_writer.h"
#include "worker/grammar/regex_parser.h"
#include "worker/grammar/utf8_ranges.h"

namespace llama::grammar::internal_grammar {
namespace {

// Automata past these sizes are not searched: counted repetitions expand
// into copies, and the product grows with both.
constexpr size_t kMaxStates = 4000;
constexpr size_t kMaxPairs = 400000;

// A Thompson automaton: each state moves on a character of `set` to `next`
// or, without reading, to each of `epsilon`.
class Automaton {
 public:
  struct State {
    std::vector<CodePointRange> set;
    int next = -1;
    std::vector<int> epsilon;
  };

  // The automaton of `node`'s whole matches, with any characters before
  // and after it where asked, and an optional newline at the end.
  static absl::StatusOr<Automaton> Of(const Node& node, bool any_before, bool any_after, bool newline_after) {
    Automaton a;
    Node whole;
    whole.kind = Node::kConcat;
    Node anything;
    anything.kind = Node::kRepeat;
    anything.max = kNoLimit;
    anything.children.push_back(Node{Node::kSet, {{0, kMaxCodePoint}}, {}, 0, 0});
    if (any_before) whole.children.push_back(anything);
    whole.children.push_back(node);
    if (any_after) whole.children.push_back(anything);
    if (newline_after) {
      Node newline;
      newline.kind = Node::kRepeat;
      newline.max = 1;
      newline.children.push_back(Node{Node::kSet, {{'\n', '\n'}}, {}, 0, 0});
      whole.children.push_back(std::move(newline));
    }
    ASSIGN_OR_RETURN(const auto ends, a.Build(whole));
    a.start_ = ends.first;
    a.accept_ = ends.second;
    return a;
  }

  const State& state(int i) const { return states_[i]; }
  size_t size() const { return states_.size(); }
  int start() const { return start_; }
  int accept() const { return accept_; }

 private:
  int Add() {
    states_.emplace_back();
    return static_cast<int>(states_.size()) - 1;
  }

  // The start and the end state of `node`'s automaton.
  absl::StatusOr<std::pair<int, int>> Build(const Node& node) {
    if (states_.size() > kMaxStates) return absl::ResourceExhaustedError("regex: too many automaton states");
    const int start = Add();
    int end = start;
    switch (node.kind) {
      case Node::kSet: {
        end = Add();
        states_[start].set = node.set;
        states_[start].next = end;
        break;
      }
      case Node::kConcat:
        for (const Node& child : node.children) {
          ASSIGN_OR_RETURN(const auto part, Build(child));
          states_[end].epsilon.push_back(part.first);
          end = part.second;
        }
        break;
      case Node::kAlternation: {
        end = Add();
        for (const Node& child : node.children) {
          ASSIGN_OR_RETURN(const auto part, Build(child));
          states_[start].epsilon.push_back(part.first);
          states_[part.second].epsilon.push_back(end);
        }
        break;
      }
      case Node::kRepeat: {
        const Node& child = node.children[0];
        for (int64_t i = 0; i < node.min; ++i) {
          ASSIGN_OR_RETURN(const auto part, Build(child));
          states_[end].epsilon.push_back(part.first);
          end = part.second;
        }
        if (node.max == kNoLimit) {
          ASSIGN_OR_RETURN(const auto part, Build(child));
          const int after = Add();
          states_[end].epsilon.push_back(part.first);
          states_[end].epsilon.push_back(after);
          states_[part.second].epsilon.push_back(end);
          end = after;
        } else {
          const int after = Add();
          for (int64_t i = node.min; i < node.max; ++i) {
            ASSIGN_OR_RETURN(const auto part, Build(child));
            states_[end].epsilon.push_back(part.first);
            states_[end].epsilon.push_back(after);
            end = part.second;
          }
          states_[end].epsilon.push_back(after);
          end = after;
        }
        break;
      }
    }
    return std::make_pair(start, end);
  }

  std::vector<State> states_;
  int start_ = 0, accept_ = 0;
};

// Both normalized: sorted and merged.
bool Overlap(const std::vector<CodePointRange>& a, const std::vector<CodePointRange>& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].hi < b[j].lo) {
      ++i;
    } else if (b[j].hi < a[i].lo) {
      ++j;
    } else {
      return true;
    }
  }
  return false;
}

// Where `pattern` is anchored: a leading ^ and a trailing unescaped $.
// With a | outside parentheses and classes, each branch is anchored on its
// own (^a|b$): then only the whole matches are sure, and any string may
// hold a match.
struct Anchors {
  bool start = false, end = false, per_branch = false;
};
Anchors AnchorsOf(absl::string_view pattern) {
  int depth = 0;
  bool in_class = false, top_level_bar = false;
  bool trailing_dollar = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (in_class) {
      in_class = c != ']';
      continue;
    }
    if (c == '[') in_class = true;
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == '|' && depth == 0) top_level_bar = true;
    if (c == '$' && i + 1 == pattern.size()) trailing_dollar = true;
  }
  const bool leading_caret = !pattern.empty() && pattern[0] == '^';
  if (top_level_bar) return Anchors{false, false, leading_caret || trailing_dollar};
  return Anchors{leading_caret, trailing_dollar, false};
}

// The strings in which `readers` find `pattern`: any characters before and
// after where it is not anchored, and for kSome a final newline after a $.
absl::StatusOr<Automaton> BuildSearchAutomaton(absl::string_view pattern, RegexReaders readers) {
  ASSIGN_OR_RETURN(const Node node, ParseRegex(pattern, readers));
  const Anchors anchors = AnchorsOf(pattern);
  if (anchors.per_branch) {
    const bool some = readers == RegexReaders::kSome;
    return Automaton::Of(node, some, some, false);
  }
  return Automaton::Of(node, !anchors.start, !anchors.end, anchors.end && readers == RegexReaders::kSome);
}

// The same, kept per thread: a schema asks of one pattern once per enum
// value and per pair of oneOf branches.
absl::StatusOr<std::shared_ptr<const Automaton>> SearchAutomaton(absl::string_view pattern, RegexReaders readers) {
  constexpr size_t kMaxKept = 256;
  thread_local absl::flat_hash_map<std::pair<std::string, RegexReaders>, std::shared_ptr<const Automaton>> kept;
  const std::pair<std::string, RegexReaders> key(pattern, readers);
  if (const auto it = kept.find(key); it != kept.end()) return it->second;
  ASSIGN_OR_RETURN(Automaton built, BuildSearchAutomaton(pattern, readers));
  if (kept.size() >= kMaxKept) kept.clear();
  auto automaton = std::make_shared<const Automaton>(std::move(built));
  kept.emplace(key, automaton);
  return automaton;
}

// Whether `automaton` takes the code points of `text`, simulated as sets of
// states (each closed under its epsilon moves).
absl::StatusOr<bool> Takes(const Automaton& automaton, absl::string_view text) {
  std::vector<int> current, next;
  std::vector<bool> in_set;
  const auto add = [&](std::vector<int>& set, int state) {
    std::vector<int> stack = {state};
    while (!stack.empty()) {
      const int s = stack.back();
      stack.pop_back();
      if (in_set[s]) continue;
      in_set[s] = true;
      set.push_back(s);
      for (int e : automaton.state(s).epsilon) stack.push_back(e);
    }
  };
  in_set.assign(automaton.size(), false);
  add(current, automaton.start());
  while (!text.empty()) {
    uint32_t c = 0;
    const int n = DecodeUtf8(text, c);
    if (n == 0) return absl::InvalidArgumentError("not valid UTF-8");
    text.remove_prefix(n);
    in_set.assign(automaton.size(), false);
    next.clear();
    for (int s : current) {
      const Automaton::State& state = automaton.state(s);
      if (state.next < 0) continue;
      const bool takes = std::any_of(state.set.begin(), state.set.end(),
                                     [&](const CodePointRange& r) { return c >= r.lo && c <= r.hi; });
      if (takes) add(next, state.next);
    }
    current.swap(next);
    if (current.empty()) return false;
  }
  return std::find(current.begin(), current.end(), automaton.accept()) != current.end();
}

}  // namespace

absl::StatusOr<bool> SurelyFinds(absl::string_view pattern, absl::string_view text) {
  ASSIGN_OR_RETURN(const std::shared_ptr<const Automaton> automaton, SearchAutomaton(pattern, RegexReaders::kEvery));
  return Takes(*automaton, text);
}

absl::StatusOr<bool> MayFind(absl::string_view pattern, absl::string_view text) {
  ASSIGN_OR_RETURN(const std::shared_ptr<const Automaton> automaton, SearchAutomaton(pattern, RegexReaders::kSome));
  return Takes(*automaton, text);
}

absl::StatusOr<bool> WholeMatchMeetsSearch(absl::string_view whole, absl::string_view search) {
  ASSIGN_OR_RETURN(const Node whole_node, ParseRegex(whole, RegexReaders::kEvery));
  ASSIGN_OR_RETURN(const Automaton a, Automaton::Of(whole_node, false, false, false));
  ASSIGN_OR_RETURN(const std::shared_ptr<const Automaton> search_automaton, SearchAutomaton(search, RegexReaders::kSome));
  const Automaton& b = *search_automaton;
  absl::flat_hash_set<std::pair<int, int>> seen = {{a.start(), b.start()}};
  std::deque<std::pair<int, int>> queue = {{a.start(), b.start()}};
  const auto visit = [&](int p, int q) {
    if (seen.insert({p, q}).second) queue.emplace_back(p, q);
  };
  while (!queue.empty()) {
    if (seen.size() > kMaxPairs) return absl::ResourceExhaustedError("regex: the product automaton is too large");
    const auto [p, q] = queue.front();
    queue.pop_front();
    if (p == a.accept() && q == b.accept()) return true;
    const Automaton::State& s = a.state(p);
    const Automaton::State& t = b.state(q);
    for (int next : s.epsilon) visit(next, q);
    for (int next : t.epsilon) visit(p, next);
    if (s.next >= 0 && t.next >= 0 && Overlap(s.set, t.set)) visit(s.next, t.next);
  }
  return false;
}

}  // namespace llama::grammar::internal_grammar
