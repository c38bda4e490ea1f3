#include "worker/grammar/regex_to_gbnf.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "worker/grammar/regex_parser.h"
#include "worker/grammar/utf8_ranges.h"

namespace llama::grammar {
namespace internal_grammar {
namespace {

using Ranges = std::vector<CodePointRange>;

// How a character that a JSON string must escape is written there (RFC
// 8259: " \ and U+0000-U+001F).
std::string JsonEscape(uint32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
  }
  return absl::StrFormat("\\u%04x", c);
}

bool NeedsJsonEscape(uint32_t c) { return c < 0x20 || c == '"' || c == '\\'; }

class Emitter {
 public:
  explicit Emitter(RegexTarget target) : target_(target) {}

  absl::StatusOr<std::string> Emit(const Node& node) {
    switch (node.kind) {
      case Node::kSet: return EmitSet(node.set);
      case Node::kConcat: return EmitConcat(node.children);
      case Node::kAlternation: {
        std::vector<std::string> alternatives;
        for (const Node& child : node.children) {
          ASSIGN_OR_RETURN(std::string alternative, Emit(child));
          alternatives.push_back(std::move(alternative));
        }
        return GbnfAlternatives(alternatives);
      }
      case Node::kRepeat: {
        const Node& child = node.children[0];
        if (node.max == kNoLimit && MinLength(child) == 0) {
          return absl::InvalidArgumentError(
              "regex: repeating without bound what can match nothing (like (a*)*) is not supported");
        }
        ASSIGN_OR_RETURN(std::string item, Emit(child));
        return GbnfRepeat(item, node.min, node.max);
      }
    }
    return absl::InternalError("regex: unknown node");
  }

 private:
  // The text that stands for `c` where the grammar is read.
  std::string Written(uint32_t c) const {
    if (target_ == RegexTarget::kJsonString && NeedsJsonEscape(c)) return JsonEscape(c);
    char bytes[4];
    return std::string(bytes, EncodeUtf8(c, bytes));
  }

  // Runs of single characters become one literal, so the grammar reads as
  // the pattern does.
  absl::StatusOr<std::string> EmitConcat(const std::vector<Node>& children) {
    std::vector<std::string> items;
    std::string run;
    for (const Node& child : children) {
      if (child.kind == Node::kSet && child.set.size() == 1 && child.set[0].lo == child.set[0].hi) {
        run += Written(child.set[0].lo);
        continue;
      }
      if (!run.empty()) items.push_back(GbnfLiteral(run));
      run.clear();
      ASSIGN_OR_RETURN(std::string item, Emit(child));
      items.push_back(std::move(item));
    }
    if (!run.empty() || items.empty()) items.push_back(GbnfLiteral(run));
    return GbnfSequence(items);
  }

  // In a JSON string the characters that need escapes are alternatives of
  // their own; the 32 control characters together are \u00XX.
  std::string EmitSet(const Ranges& set) const {
    if (target_ == RegexTarget::kText) return GbnfClass(set);
    std::vector<std::string> alternatives;
    const Ranges plain = NormalizeRanges(Subtract(set, {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}), false);
    if (!plain.empty()) alternatives.push_back(GbnfClass(plain));
    const Ranges controls = Intersect(set, {{0, 0x1F}});
    if (controls == Ranges{{0, 0x1F}}) {
      alternatives.push_back(R"("\\u00" [01] [0-9a-fA-F])");
    } else {
      for (const CodePointRange& r : controls) {
        for (uint32_t c = r.lo; c <= r.hi; ++c) alternatives.push_back(GbnfLiteral(JsonEscape(c)));
      }
    }
    for (uint32_t c : {'"', '\\'}) {
      if (!Intersect(set, {{c, c}}).empty()) alternatives.push_back(GbnfLiteral(JsonEscape(c)));
    }
    return GbnfAlternatives(alternatives);
  }

  static Ranges Intersect(const Ranges& set, const Ranges& with) {
    Ranges out;
    for (const CodePointRange& a : set) {
      for (const CodePointRange& b : with) {
        if (std::max(a.lo, b.lo) <= std::min(a.hi, b.hi)) out.push_back({std::max(a.lo, b.lo), std::min(a.hi, b.hi)});
      }
    }
    return out;
  }

  static Ranges Subtract(const Ranges& set, const Ranges& minus) {
    Ranges complement = NormalizeRanges(minus, /*negated=*/true);
    return Intersect(set, complement);
  }

  RegexTarget target_;
};

// `node` with each repetition at most `extra` times beyond its minimum.
Node Capped(const Node& node, int64_t extra) {
  Node out = node;
  if (out.kind == Node::kRepeat && (out.max == kNoLimit || out.max > out.min + extra)) out.max = out.min + extra;
  for (Node& child : out.children) child = Capped(child, extra);
  return out;
}

bool Within(int64_t length, int64_t max_length) { return length != kNoLimit && length <= max_length; }

}  // namespace

absl::StatusOr<RegexExpression> RegexToGbnfExpression(absl::string_view regex, RegexTarget target,
                                                      int64_t max_length) {
  ASSIGN_OR_RETURN(Node node, ParseRegex(regex));
  if (max_length != kNoLimit && !Within(MaxLength(node), max_length) && Within(MaxLength(Capped(node, 0)), max_length)) {
    // The most repetitions beyond the minimums that keep every match within max_length.
    int64_t fits = 0, too_many = max_length + 1;
    while (too_many - fits > 1) {
      const int64_t extra = fits + (too_many - fits) / 2;
      (Within(MaxLength(Capped(node, extra)), max_length) ? fits : too_many) = extra;
    }
    node = Capped(node, fits);
  }
  ASSIGN_OR_RETURN(std::string gbnf, Emitter(target).Emit(node));
  return RegexExpression{std::move(gbnf), MinLength(node), MaxLength(node)};
}

}  // namespace internal_grammar

absl::StatusOr<std::string> RegexToGbnf(absl::string_view regex) {
  ASSIGN_OR_RETURN(internal_grammar::RegexExpression expression,
                   internal_grammar::RegexToGbnfExpression(regex, internal_grammar::RegexTarget::kText));
  return absl::StrCat("root ::= ", expression.gbnf, "\n");
}

std::string ChoiceGbnf(const std::vector<std::string>& choices) {
  std::vector<std::string> literals;
  for (const std::string& choice : choices) literals.push_back(GbnfLiteral(choice));
  return absl::StrCat("root ::= ", absl::StrJoin(literals, " | "), "\n");
}

}  // namespace llama::grammar
