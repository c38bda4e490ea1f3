#include "worker/grammar/grammar.h"

#include "worker/grammar/byte_parser.h"

namespace llama::grammar {

bool Grammar::Accepts(absl::string_view text) const {
  ByteParser parser(*this);
  ByteParser::StateId state = parser.initial();
  for (const char c : text) {
    if (state == ByteParser::kDead) return false;
    state = parser.Next(state, static_cast<uint8_t>(c));
  }
  return state != ByteParser::kDead && parser.accepting(state);
}

}  // namespace llama::grammar
