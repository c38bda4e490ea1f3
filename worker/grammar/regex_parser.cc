#include "worker/grammar/regex_parser.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "worker/grammar/gbnf_writer.h"

namespace llama::grammar::internal_grammar {
namespace {

using Ranges = std::vector<CodePointRange>;

// Large counts would unroll into grammars of that size.
constexpr int64_t kMaxCount = 1000;

Node SetNode(Ranges ranges, bool negated = false) {
  Node n;
  n.kind = Node::kSet;
  n.set = NormalizeRanges(std::move(ranges), negated);
  return n;
}

// Lengths past this count as unbounded: nested counts multiply.
constexpr int64_t kLengthCap = int64_t{1} << 40;

// \d \w \s differ between ECMAScript (what JSON Schema means) and Python's
// re (what python-jsonschema checks with): Python's take Unicode digits,
// letters and \x1C-\x1F \x85 as well, ECMAScript's \s takes U+FEFF. For
// RegexReaders::kEvery a class is taken as what both flavours match: where
// it counts positively, the narrow set (in both), and inside [^...], the
// wide one (in either), so that its complement is in both; for kSome the
// other way round. Wide digits and word characters are
// everything past ASCII that could be one (U+0660 is the first non-ASCII
// digit).
struct Shorthand {
  Ranges narrow, wide;
};

Shorthand Digits() { return {{{'0', '9'}}, {{'0', '9'}, {0x660, kMaxCodePoint}}}; }
Shorthand WordChars() {
  const Ranges ascii = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  Ranges wide = ascii;
  wide.push_back({0x80, kMaxCodePoint});
  return {ascii, wide};
}
Shorthand Spaces() {
  const Ranges both = {{'\t', '\r'},     {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}};
  Ranges either = both;
  for (CodePointRange r : {CodePointRange{0x1C, 0x1F}, CodePointRange{0x85, 0x85}, CodePointRange{0xFEFF, 0xFEFF}}) {
    either.push_back(r);
  }
  return {both, either};
}

// A shorthand (negated: \D \W \S) as the set it stands for where it is.
Node ShorthandNode(const Shorthand& s, bool negated, bool narrow) {
  // The complement of the wide set is the narrow complement, and so on.
  if (negated) return SetNode(narrow ? s.wide : s.narrow, /*negated=*/true);
  return SetNode(narrow ? s.narrow : s.wide);
}

// Code points, not chars: <cctype> is undefined past 255.
bool IsDigit(uint32_t c) { return c >= '0' && c <= '9'; }
bool IsAsciiLetter(uint32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
bool IsHexDigit(uint32_t c) { return IsDigit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }
uint32_t HexDigit(uint32_t c) { return IsDigit(c) ? c - '0' : (c | 0x20) - 'a' + 10; }

class RegexParser {
 public:
  RegexParser(absl::string_view regex, RegexReaders readers) : regex_(regex), every_(readers == RegexReaders::kEvery) {}

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
      pos_ = start;  // Not a count: the '{' is a literal (ECMAScript Annex B)...
      // ...but Python's re reads {,n} as {0,n}.
      if (Peek() == '{' && Peek(1) == ',') return Unsupported("{, (ECMAScript reads it as text, Python's re as a count)");
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
      // ECMAScript's . leaves out the line terminators, Python's only \n.
      case '.':
        return every_ ? SetNode({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, /*negated=*/true)
                      : SetNode({{'\n', '\n'}}, /*negated=*/true);
      case '\\': return ParseEscape(/*in_class=*/false, /*narrow=*/every_);
      case '^': --pos_; return Unsupported("the anchor ^ inside the pattern");
      case '$': --pos_; return Unsupported("the anchor $ inside the pattern");
      case '*':
      case '+':
      case '?': --pos_; return Error("nothing to repeat");
      case '{': {
        // A count with nothing before it: text in ECMAScript, an error in Python's re.
        const size_t start = --pos_;
        int64_t min = 0, max = 0;
        const bool count = ParseCount(min, max);
        pos_ = start;
        if (count) return Unsupported("a count with nothing to repeat");
        ++pos_;
        break;
      }
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
      } else if (Peek() == '<' || Peek() == 'P') {
        return Unsupported("a named group (ECMAScript writes (?<name>, Python's re (?P<name>)");
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
    if (Peek() == ']') {
      return Unsupported(negated ? "[^] (ECMAScript reads it as any character, Python's re as a class holding ])"
                                 : "[] (ECMAScript reads it as no character, Python's re as a class holding ])");
    }
    Ranges ranges;
    while (AtEnd() || Peek() != ']') {
      if (AtEnd()) return Error("unterminated character class");
      ASSIGN_OR_RETURN(Ranges lo, ParseClassAtom(negated));
      const bool one_character = lo.size() == 1 && lo[0].lo == lo[0].hi;
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != 0 && !one_character) {
        return Unsupported("a range from a class escape ([\\w-a]: text in ECMAScript, an error in Python's re)");
      }
      if (Peek() == '-' && Peek(1) != ']' && Peek(1) != 0 && one_character) {
        ++pos_;
        ASSIGN_OR_RETURN(Ranges hi, ParseClassAtom(negated));
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

  absl::StatusOr<Ranges> ParseClassAtom(bool negated) {
    const uint32_t c = text_[pos_++];
    if (c != '\\') return Ranges{{c, c}};
    ASSIGN_OR_RETURN(Node escaped, ParseEscape(/*in_class=*/true, /*narrow=*/negated != every_));
    return escaped.set;
  }

  // After a backslash. `narrow`: a shorthand class counts positively here
  // (see Shorthand).
  absl::StatusOr<Node> ParseEscape(bool in_class, bool narrow) {
    if (AtEnd()) return Error("a trailing backslash");
    const uint32_t c = text_[pos_++];
    switch (c) {
      case 'd': return ShorthandNode(Digits(), false, narrow);
      case 'D': return ShorthandNode(Digits(), true, narrow);
      case 'w': return ShorthandNode(WordChars(), false, narrow);
      case 'W': return ShorthandNode(WordChars(), true, narrow);
      case 's': return ShorthandNode(Spaces(), false, narrow);
      case 'S': return ShorthandNode(Spaces(), true, narrow);
      case 't': return SetNode({{'\t', '\t'}});
      case 'n': return SetNode({{'\n', '\n'}});
      case 'r': return SetNode({{'\r', '\r'}});
      case 'f': return SetNode({{'\f', '\f'}});
      case 'v': return SetNode({{'\v', '\v'}});
      case 'x': return ParseHex(2);
      case 'u':
        if (Peek() == '{') {
          --pos_;
          return Unsupported("\\u{...} (Python's re has no such escape)");
        }
        return ParseHex(4);
      case 'c': --pos_; return Unsupported("\\c (Python's re has no such escape)");
      case 'b':
        if (in_class) return SetNode({{'\b', '\b'}});
        --pos_;
        return Unsupported("the word boundary \\b");
      case 'B': --pos_; return Unsupported("the anchor \\B");
      case 'k': --pos_; return Unsupported("the backreference \\k");
      case 'p':
      case 'P': --pos_; return Unsupported("the Unicode property class \\p");
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

  absl::StatusOr<Node> CodePoint(uint32_t value) {
    if (value > kMaxCodePoint || (value >= 0xD800 && value <= 0xDFFF)) {
      return Unsupported(absl::StrFormat("U+%X (not a Unicode scalar value)", value));
    }
    return SetNode({{value, value}});
  }

  absl::string_view regex_;
  // Shorthands where they count positively take the narrow set (in both
  // readers) for kEvery, the wide one (in either) for kSome; inside [^...]
  // the other way round.
  const bool every_;
  std::vector<uint32_t> text_;
  size_t pos_ = 0;
};

}  // namespace

absl::StatusOr<Node> ParseRegex(absl::string_view regex, RegexReaders readers) {
  return RegexParser(regex, readers).Parse();
}

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

}  // namespace llama::grammar::internal_grammar
