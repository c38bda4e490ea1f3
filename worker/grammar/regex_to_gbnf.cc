#include "worker/grammar/regex_to_gbnf.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "worker/grammar/utf8_ranges.h"

namespace llama::grammar {
namespace internal_grammar {
namespace {

using Ranges = std::vector<CodePointRange>;

// Large counts would unroll into grammars of that size.
constexpr int64_t kMaxCount = 1000;

// The parsed regex. A kSet node is one character from `set`; a kRepeat
// node has one child.
struct Node {
  enum Kind { kSet, kConcat, kAlternation, kRepeat };
  Kind kind = kConcat;
  Ranges set;
  std::vector<Node> children;
  int64_t min = 0, max = 0;
};

Node SetNode(Ranges ranges, bool negated = false) {
  Node n;
  n.kind = Node::kSet;
  n.set = NormalizeRanges(std::move(ranges), negated);
  return n;
}

// Lengths past this count as unbounded: nested counts multiply.
constexpr int64_t kLengthCap = int64_t{1} << 40;

int64_t MinLength(const Node& n) {
  int64_t length = 0;
  switch (n.kind) {
    case Node::kSet: return 1;
    case Node::kConcat:
      for (const Node& c : n.children) length += MinLength(c);
      break;
    case Node::kAlternation:
      length = kLengthCap;
      for (const Node& c : n.children) length = std::min(length, MinLength(c));
      break;
    case Node::kRepeat: length = n.min * MinLength(n.children[0]); break;
  }
  return std::min(length, kLengthCap);
}

int64_t MaxLength(const Node& n) {
  int64_t length = 0;
  switch (n.kind) {
    case Node::kSet: return 1;
    case Node::kConcat:
      for (const Node& c : n.children) {
        const int64_t m = MaxLength(c);
        if (m == kNoLimit) return kNoLimit;
        length += m;
      }
      break;
    case Node::kAlternation:
      for (const Node& c : n.children) {
        const int64_t m = MaxLength(c);
        if (m == kNoLimit) return kNoLimit;
        length = std::max(length, m);
      }
      break;
    case Node::kRepeat: {
      const int64_t m = MaxLength(n.children[0]);
      if (m == 0 || n.max == 0) return 0;
      if (m == kNoLimit || n.max == kNoLimit) return kNoLimit;
      length = n.max * m;
    }
  }
  return length > kLengthCap ? kNoLimit : length;
}

Ranges Digits() { return {{'0', '9'}}; }
Ranges WordChars() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
// ECMAScript's WhiteSpace and LineTerminator.
Ranges Spaces() {
  return {{'\t', '\r'}, {' ', ' '},         {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029},
          {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}

// Code points, not chars: <cctype> is undefined past 255.
bool IsDigit(uint32_t c) { return c >= '0' && c <= '9'; }
bool IsAsciiLetter(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool IsHexDigit(uint32_t c) { return IsDigit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }
uint32_t HexDigit(uint32_t c) { return IsDigit(c) ? c - '0' : (c | 0x20) - 'a' + 10; }

class RegexParser {
 public:
  explicit RegexParser(absl::string_view regex) : regex_(regex) {}

  absl::StatusOr<Node> Parse() {
    while (!regex_.empty()) {
      uint32_t c = 0;
      const int n = DecodeUtf8(regex_, c);
      if (n == 0) return absl::InvalidArgumentError("regex: not valid UTF-8");
      text_.push_back(c);
      regex_.remove_prefix(n);
    }
    if (!text_.empty() && text_[0] == '^') pos_ = 1;
    ASSIGN_OR_RETURN(Node node, ParseAlternation());
    if (pos_ < text_.size()) return Error("unmatched ')'");
    return node;
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  uint32_t Peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : 0; }
  bool Eat(uint32_t c) {
    if (AtEnd() || text_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("regex: ", what, " at offset ", pos_));
  }
  absl::Status Unsupported(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("regex: ", what, " at offset ", pos_, " is not supported"));
  }

  absl::StatusOr<Node> ParseAlternation() {
    Node alternation;
    alternation.kind = Node::kAlternation;
    do {
      ASSIGN_OR_RETURN(Node branch, ParseConcat());
      alternation.children.push_back(std::move(branch));
    } while (Eat('|'));
    if (alternation.children.size() == 1) return std::move(alternation.children[0]);
    return alternation;
  }

  absl::StatusOr<Node> ParseConcat() {
    Node concat;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      if (Peek() == '$' && pos_ + 1 == text_.size()) {
        ++pos_;
        break;
      }
      ASSIGN_OR_RETURN(Node atom, ParseAtom());
      ASSIGN_OR_RETURN(Node item, ParseQuantifier(std::move(atom)));
      concat.children.push_back(std::move(item));
    }
    if (concat.children.size() == 1) return std::move(concat.children[0]);
    return concat;
  }

  // An atom's quantifier, if it has one: * + ? {m} {m,} {m,n}, each maybe lazy.
  absl::StatusOr<Node> ParseQuantifier(Node atom) {
    int64_t min = 0, max = 0;
    const size_t start = pos_;
    if (Eat('*')) {
      max = kNoLimit;
    } else if (Eat('+')) {
      min = 1;
      max = kNoLimit;
    } else if (Eat('?')) {
      max = 1;
    } else if (!ParseCount(min, max)) {
      pos_ = start;  // Not a count: the '{' is a literal (ECMAScript Annex B).
      return atom;
    }
    if (max != kNoLimit && max < min) return Error("a count {m,n} with n < m");
    if (min > kMaxCount || max > kMaxCount) return Unsupported(absl::StrCat("a count over ", kMaxCount));
    Eat('?');  // Lazy: the same strings match.
    if (Peek() == '*' || Peek() == '+' || Peek() == '?' || (Peek() == '{' && IsDigit(Peek(1)))) {
      return Error("nothing to repeat");
    }
    Node repeat;
    repeat.kind = Node::kRepeat;
    repeat.min = min;
    repeat.max = max;
    repeat.children.push_back(std::move(atom));
    return repeat;
  }

  bool ParseNumber(int64_t& value) {
    if (!IsDigit(Peek())) return false;
    value = 0;
    while (IsDigit(Peek())) value = std::min<int64_t>(value * 10 + (text_[pos_++] - '0'), kMaxCount + 1);
    return true;
  }

  bool ParseCount(int64_t& min, int64_t& max) {
    if (!Eat('{') || !ParseNumber(min)) return false;
    max = min;
    if (Eat(',')) {
      max = kNoLimit;
      ParseNumber(max);
    }
    return Eat('}');
  }

  absl::StatusOr<Node> ParseAtom() {
    const uint32_t c = text_[pos_++];
    switch (c) {
      case '(': return ParseGroup();
      case '[': return ParseClass();
      case '.': return SetNode({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, /*negated=*/true);
      case '\\': return ParseEscape(/*in_class=*/false);
      case '^': --pos_; return Unsupported("the anchor ^ inside the pattern");
      case '$': --pos_; return Unsupported("the anchor $ inside the pattern");
      case '*': case '+': case '?': --pos_; return Error("nothing to repeat");
    }
    return SetNode({{c, c}});
  }

  absl::StatusOr<Node> ParseGroup() {
    if (Eat('?')) {
      if (Eat(':')) {
      } else if (Peek() == '=' || Peek() == '!') {
        return Unsupported("lookahead");
      } else if (Peek() == '<' && (Peek(1) == '=' || Peek(1) == '!')) {
        return Unsupported("lookbehind");
      } else if (Eat('<')) {
        while (!AtEnd() && Peek() != '>') ++pos_;  // A named group matches as a plain one.
        if (!Eat('>')) return Error("unterminated group name");
      } else {
        return Unsupported("this (? group");
      }
    }
    ASSIGN_OR_RETURN(Node inner, ParseAlternation());
    if (!Eat(')')) return Error("missing ')'");
    return inner;
  }

  absl::StatusOr<Node> ParseClass() {
    const bool negated = Eat('^');
    Ranges ranges;
    while (AtEnd() || Peek() != ']') {
      if (AtEnd()) return Error("unterminated character class");
      ASSIGN_OR_RETURN(Ranges lo, ParseClassAtom());
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != 0 && lo.size() == 1 && lo[0].lo == lo[0].hi) {
        ++pos_;
        ASSIGN_OR_RETURN(Ranges hi, ParseClassAtom());
        if (hi.size() != 1 || hi[0].lo != hi[0].hi) return Error("a class escape as the end of a range");
        if (hi[0].lo < lo[0].lo) return Error("a reversed range in a class");
        ranges.push_back({lo[0].lo, hi[0].lo});
        continue;
      }
      ranges.insert(ranges.end(), lo.begin(), lo.end());
    }
    ++pos_;
    Node node = SetNode(std::move(ranges), negated);
    if (node.set.empty()) return Unsupported("a class that matches nothing");
    return node;
  }

  absl::StatusOr<Ranges> ParseClassAtom() {
    const uint32_t c = text_[pos_++];
    if (c != '\\') return Ranges{{c, c}};
    ASSIGN_OR_RETURN(Node escaped, ParseEscape(/*in_class=*/true));
    return escaped.set;
  }

  // After a backslash.
  absl::StatusOr<Node> ParseEscape(bool in_class) {
    if (AtEnd()) return Error("a trailing backslash");
    const uint32_t c = text_[pos_++];
    switch (c) {
      case 'd': return SetNode(Digits());
      case 'D': return SetNode(Digits(), /*negated=*/true);
      case 'w': return SetNode(WordChars());
      case 'W': return SetNode(WordChars(), /*negated=*/true);
      case 's': return SetNode(Spaces());
      case 'S': return SetNode(Spaces(), /*negated=*/true);
      case 't': return SetNode({{'\t', '\t'}});
      case 'n': return SetNode({{'\n', '\n'}});
      case 'r': return SetNode({{'\r', '\r'}});
      case 'f': return SetNode({{'\f', '\f'}});
      case 'v': return SetNode({{'\v', '\v'}});
      case 'x': return ParseHex(2);
      case 'u': return Eat('{') ? ParseBracedHex() : ParseHex(4);
      case 'c':
      {
        if (!IsAsciiLetter(Peek())) return Error("\\c without a letter");
        const uint32_t control = text_[pos_++] % 32;
        return SetNode({{control, control}});
      }
      case 'b':
        if (in_class) return SetNode({{'\b', '\b'}});
        --pos_;
        return Unsupported("the word boundary \\b");
      case 'B': --pos_; return Unsupported("the anchor \\B");
      case 'k': --pos_; return Unsupported("the backreference \\k");
      case 'p': case 'P': --pos_; return Unsupported("the Unicode property class \\p");
    }
    if (c == '0' && !IsDigit(Peek())) return SetNode({{0, 0}});
    if (c >= '1' && c <= '9') {
      --pos_;
      return Unsupported(absl::StrFormat("the backreference \\%c", static_cast<char>(c)));
    }
    if (IsDigit(c) || IsAsciiLetter(c)) {
      --pos_;
      return Error(absl::StrFormat("the unknown escape \\%c", static_cast<char>(c)));
    }
    return SetNode({{c, c}});
  }

  absl::StatusOr<Node> ParseHex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      if (!IsHexDigit(Peek())) return Error(absl::StrCat("expected ", digits, " hex digits"));
      value = value * 16 + HexDigit(text_[pos_++]);
    }
    return CodePoint(value);
  }

  absl::StatusOr<Node> ParseBracedHex() {
    uint32_t value = 0;
    while (IsHexDigit(Peek()) && value <= kMaxCodePoint) value = value * 16 + HexDigit(text_[pos_++]);
    if (!Eat('}')) return Error("expected hex digits and '}' after \\u{");
    return CodePoint(value);
  }

  absl::StatusOr<Node> CodePoint(uint32_t value) {
    if (value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF)) {
      return Unsupported(absl::StrFormat("U+%X (not a Unicode scalar value)", value));
    }
    return SetNode({{value, value}});
  }


  absl::string_view regex_;
  std::vector<uint32_t> text_;
  size_t pos_ = 0;
};

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

}  // namespace

absl::StatusOr<RegexExpression> RegexToGbnfExpression(absl::string_view regex, RegexTarget target) {
  ASSIGN_OR_RETURN(Node node, RegexParser(regex).Parse());
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
