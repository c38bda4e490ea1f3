// Load on a running server through the official OpenAI client (npm
// `openai`), as its users send it: streamed completions, --concurrency at
// once, greedy, each exactly --output_tokens long (min_tokens). Prints
// output tokens/s, time to first token (p50, p99), errors, and from the
// server's /metrics the prompt tokens taken from the prefix cache.
//
//   node tools/replica_load.mjs --url=http://127.0.0.1:8000 --model=NAME
//       [--requests=128] [--concurrency=16] [--output_tokens=32]
//       [--seed=1]                                   the text's (the same seed,
//                                                    the same text)
//       [--prompt_words=48]                          distinct prompts, or
//       [--system_prompts=8 --system_words=700]      shared system prompts:
//                                                    request i is system
//                                                    prompt i % 8 (in a
//                                                    shuffled order) and a
//                                                    user's question
//
// The client comes from the test tools third_party/setup.sh installs
// (${XDG_CACHE_HOME:-~/.cache}/llama2-cpp/node-tools), or --node_tools=DIR.
import {createRequire} from "node:module";
import {homedir} from "node:os";
import {join} from "node:path";

const args = Object.fromEntries(process.argv.slice(2).map((a) => {
  const m = a.match(/^--([a-z_]+)=(.*)$/);
  if (!m) throw new Error(`unexpected argument ${a} (see the comment at the top of replica_load.mjs)`);
  return [m[1], m[2]];
}));
const number = (name, fallback) => (args[name] === undefined ? fallback : Number(args[name]));
const url = args.url ?? "http://127.0.0.1:8000";
const model = args.model;
if (!model) throw new Error("--model=NAME is required (the server's served model name)");
const requests = number("requests", 128), concurrency = number("concurrency", 16);
const outputTokens = number("output_tokens", 32), promptWords = number("prompt_words", 48);
const systemPrompts = number("system_prompts", 0), systemWords = number("system_words", 700);
const tools = args.node_tools ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "llama2-cpp", "node-tools");
const {default: OpenAI} = await import(createRequire(join(tools, "package.json")).resolve("openai"));
const client = new OpenAI({baseURL: `${url}/v1`, apiKey: process.env.LLAMA_API_KEY ?? "none", maxRetries: 0});

// Seeded words, so that every run (and every routing policy) sends the same text.
let state = (12345 + 7919 * number("seed", 1)) >>> 0 || 1;
const random = () => {  // xorshift32
  state = (state ^ (state << 13)) >>> 0;
  state = (state ^ (state >>> 17)) >>> 0;
  state = (state ^ (state << 5)) >>> 0;
  return state / 4294967296;
};
const vocabulary = ["the", "river", "stone", "light", "quiet", "north", "garden", "paper", "window", "music",
                    "winter", "market", "silver", "forest", "signal", "letter", "bridge", "engine", "harbor", "cloud"];
const words = (n) => Array.from({length: n}, () => vocabulary[Math.floor(random() * vocabulary.length)]).join(" ");
const systems = Array.from({length: systemPrompts}, (_, i) => `System prompt ${i}: ${words(systemWords)}\n`);
const order = Array.from({length: requests}, (_, i) => i).sort(() => random() - 0.5);
const prompts = order.map((i) => (systemPrompts > 0 ? `${systems[i % systemPrompts]}User ${i}: ${words(12)}?\n` : words(promptWords)));

async function metric(name) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `));
  return line ? Number(line.split(" ")[1]) : NaN;
}

const hitsBefore = await metric("llama_prefix_cache_hit_tokens_total");
const promptBefore = await metric("llama_prompt_tokens_total");
const ttft = [];
let outputs = 0, errors = 0, next = 0;
const start = performance.now();
async function worker() {
  while (next < prompts.length) {
    const prompt = prompts[next++];
    const sent = performance.now();
    let first = null;
    try {
      const stream = await client.completions.create({
        model, prompt, max_tokens: outputTokens, min_tokens: outputTokens, temperature: 0, stream: true,
        stream_options: {include_usage: true},
      });
      for await (const chunk of stream) {
        if (first === null && chunk.choices.length > 0 && chunk.choices[0].text !== "") first = performance.now();
        if (chunk.usage) outputs += chunk.usage.completion_tokens;
      }
      ttft.push((first ?? performance.now()) - sent);
    } catch (e) {
      ++errors;
      console.error(`request failed: ${e.status ?? ""} ${e.message}`);
    }
  }
}
await Promise.all(Array.from({length: concurrency}, worker));
const seconds = (performance.now() - start) / 1000;
const hits = (await metric("llama_prefix_cache_hit_tokens_total")) - hitsBefore;
const promptTokens = (await metric("llama_prompt_tokens_total")) - promptBefore;
ttft.sort((a, b) => a - b);
const pct = (p) => (ttft.length ? ttft[Math.min(ttft.length - 1, Math.floor((p / 100) * ttft.length))] : NaN);
console.log(`requests: ${requests} at concurrency ${concurrency}, ${errors} errors, ${seconds.toFixed(1)} s`);
console.log(`output: ${outputs} tokens = ${(outputs / seconds).toFixed(1)} tokens/s`);
console.log(`TTFT: p50 ${pct(50).toFixed(0)} ms, p99 ${pct(99).toFixed(0)} ms`);
console.log(`prefix cache: ${hits} of ${promptTokens} prompt tokens = ${((100 * hits) / promptTokens).toFixed(1)}%`);
process.exitCode = errors > 0 ? 1 : 0;
