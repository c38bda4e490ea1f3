// llama.cpp's speed on a GGUF file, through node-llama-cpp's prebuilt CPU
// library (installed by third_party/setup.sh), in the terms //tools:bench
// prints: prefill tokens/s and decode ms/step at batch 1. Run by
// tools/compare_llama_cpp.sh, interleaved with our bench on the same weights.
//
//   node tools/llama_cpp_bench.mjs <node-tools dir> <model.gguf> <prefill tokens> <decode tokens> <threads>
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const [tools, modelPath, prefillArg, decodeArg, threadsArg] = process.argv.slice(2);
const prefill = Number(prefillArg), decode = Number(decodeArg), threads = Number(threadsArg);
const {getLlama} = await import(pathToFileURL(join(tools, "node_modules", "node-llama-cpp", "dist", "index.js")));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const vocab = model.tokens.bos !== undefined ? model.fileInfo.metadata.llama.vocab_size : 32000;
// A fixed pseudo-random prompt (ids 3..vocab-1 after BOS), as the bench's.
let state = 12345;
const next = () => (state = (state * 1103515245 + 12345) % 2147483648);
const prompt = [1, ...Array.from({length: prefill - 1}, () => 3 + (next() % (vocab - 3)))];

const context = await model.createContext({contextSize: prefill + decode + 16, batchSize: Math.max(prefill, 512), threads});
// Untimed warm-up (pages of the mapping, buffers).
await context.getSequence().evaluateWithoutGeneratingNewTokens(prompt.slice(0, 8));
await context.dispose();

const timed = await model.createContext({contextSize: prefill + decode + 16, batchSize: Math.max(prefill, 512), threads});
const sequence = timed.getSequence();
let start = performance.now();
await sequence.evaluateWithoutGeneratingNewTokens(prompt);
const prefillSeconds = (performance.now() - start) / 1000;
// Decode: greedy steps after the prompt; the first token's wait is skipped.
// Generation may end early (a random model can pick EOS): the time is
// divided by the steps actually taken, and too few is an error.
let count = 0, first = 0, last = 0;
for await (const token of sequence.evaluate([prompt[prompt.length - 1] ^ 1], {temperature: 0})) {
  last = performance.now();
  if (count === 0) first = last;
  if (++count > decode) break;
}
if (count < 3) throw new Error(`llama.cpp generated only ${count} token(s)`);
const msPerStep = (last - first) / (count - 1);
console.log(`llama.cpp ${llama.gpu === false ? "cpu" : llama.gpu}: prefill ${prefill} tokens ${(prefill / prefillSeconds).toFixed(1)} tokens/s; decode batch 1 ${msPerStep.toFixed(1)} ms/step over ${count - 1} steps (${threads} threads)`);
await timed.dispose();
await model.dispose();
