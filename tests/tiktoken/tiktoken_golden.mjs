// Reference token ids for Llama 3's tokenizer from tiktoken's official
// WASM bindings: the ranks file, the llama3 reference's special tokens and
// pre-tokenizer pattern, and a JavaScript transcription of the reference's
// ChatFormat (llama/tokenizer.py) for dialogs.
//
//   node tiktoken_golden.mjs <node-tools dir> <tokenizer.model> <texts.json> <dialogs.json>
//
// texts.json: base64 strings (any bytes: decoded as the WHATWG decoder
// does, invalid sequences becoming U+FFFD). Prints
// {"texts": [[ids]...], "dialogs": [[ids]...]}.
import {readFileSync} from "node:fs";
import {createRequire} from "node:module";
import {join} from "node:path";

const [tools, ranksPath, textsPath, dialogsPath] = process.argv.slice(2);
const {Tiktoken} = createRequire(join(tools, "package.json"))("tiktoken");

const pattern =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const ranks = readFileSync(ranksPath, "utf8");
const numBase = ranks.split("\n").filter((line) => line.length > 0).length;
const names = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
  "<|reserved_special_token_1|>", "<|reserved_special_token_2|>", "<|reserved_special_token_3|>",
  "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_4|>", "<|eot_id|>"];
for (let i = 5; i < 256 - 5; i++) names.push(`<|reserved_special_token_${i}|>`);
const special = Object.fromEntries(names.map((name, i) => [name, numBase + i]));
const encoder = new Tiktoken(ranks, special, pattern);

// Python's str.isspace().
const isSpace = (c) => { const p = c.codePointAt(0); return (p >= 0x09 && p <= 0x0d) || (p >= 0x1c && p <= 0x20) ||
  p === 0x85 || p === 0xa0 || p === 0x1680 || (p >= 0x2000 && p <= 0x200a) || p === 0x2028 || p === 0x2029 ||
  p === 0x202f || p === 0x205f || p === 0x3000; };

// The reference's encode(s, bos=False, eos=False): cut into 400,000-character
// chunks, each cut where a run of whitespace or of non-whitespace passes
// 25,000 characters (_split_whitespaces_or_nonwhitespaces), each piece
// encoded with allowed_special=set(), disallowed_special=() (special-token
// text is ordinary text). Characters are code points, as Python counts.
function* runs(chars, max) {
  let length = 0, isSpaceRun = chars.length > 0 ? isSpace(chars[0]) : false, start = 0;
  for (let i = 0; i < chars.length; i++) {
    const now = isSpace(chars[i]);
    if (isSpaceRun !== now) { length = 1; isSpaceRun = now; }
    else if (++length > max) { yield chars.slice(start, i).join(""); start = i; length = 1; }
  }
  yield chars.slice(start).join("");
}
const encode = (text) => {
  const chars = Array.from(text), ids = [];
  for (let i = 0; i < chars.length; i += 400000) {
    for (const piece of runs(chars.slice(i, i + 400000), 25000)) {
      for (const id of encoder.encode_ordinary(piece)) ids.push(id);
    }
  }
  return ids;
};

// Python's str.strip().
const strip = (s) => { const chars = Array.from(s); let a = 0, b = chars.length;
  while (a < b && isSpace(chars[a])) a++; while (b > a && isSpace(chars[b - 1])) b--; return chars.slice(a, b).join(""); };

// ChatFormat.encode_header / encode_message / encode_dialog_prompt.
const header = (role) => [special["<|start_header_id|>"], ...encode(role), special["<|end_header_id|>"], ...encode("\n\n")];
const message = (m) => [...header(m.role), ...encode(strip(m.content)), special["<|eot_id|>"]];
const dialog = (d) => [special["<|begin_of_text|>"], ...d.flatMap(message), ...header("assistant")];

const decoder = new TextDecoder("utf-8");
const texts = JSON.parse(readFileSync(textsPath, "utf8")).map((b64) => encode(decoder.decode(Buffer.from(b64, "base64"))));
const dialogs = JSON.parse(readFileSync(dialogsPath, "utf8")).map(dialog);
encoder.free();
console.log(JSON.stringify({texts, dialogs}));
