// llama.cpp's speed on a GGUF file, through node-llama-cpp's prebuilt CPU
// library (installed by third_party/setup.sh), in the terms //tools:bench
// prints: prefill tokens/s and decode ms/step at batch 1, or with a batch
// over 1, decode ms/step of that many sequences generating together (one
// context, one sequence each; node-llama-cpp batches the sequences' tokens
// into one llama_decode per step). Run by tools/compare_llama_cpp.sh,
// interleaved with our bench on the same weights.
//
//   node tools/llama_cpp_bench.mjs <node-tools dir> <model.gguf> <prefill tokens> <decode tokens> <threads> [batch]
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const [tools, modelPath, prefillArg, decodeArg, threadsArg, batchArg] = process.argv.slice(2);
const prefill = Number(prefillArg), decode = Number(decodeArg), threads = Number(threadsArg);
const batch = Number(batchArg ?? 1);
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

if (batch > 1) {
  // Each sequence prefills its own prompt (a rotation of the same ids), then
  // all generate at once; the steps' time is from the first token that
  // every sequence has to the last.
  const context = await model.createContext({
    contextSize: batch * (prefill + decode + 16), sequences: batch, batchSize: Math.max(prefill, 512), threads});
  const sequences = Array.from({length: batch}, () => context.getSequence());
  for (let i = 0; i < batch; ++i) {
    await sequences[i].evaluateWithoutGeneratingNewTokens([1, ...prompt.slice(1 + i), ...prompt.slice(1, 1 + i)]);
  }
  const firsts = [], lasts = [], counts = [];
  await Promise.all(sequences.map(async (sequence, i) => {
    counts[i] = 0;
    for await (const token of sequence.evaluate([prompt[prompt.length - 1] ^ 1], {temperature: 0})) {
      lasts[i] = performance.now();
      if (counts[i] === 0) firsts[i] = lasts[i];
      if (++counts[i] > decode) break;
    }
  }));
  const steps = Math.min(...counts) - 1;
  if (steps < 2) throw new Error(`llama.cpp generated only ${steps + 1} token(s) in a sequence`);
  const msPerStep = (Math.max(...lasts) - Math.max(...firsts)) / steps;
  console.log(`llama.cpp ${llama.gpu === false ? "cpu" : llama.gpu}: decode batch ${batch} ${msPerStep.toFixed(1)} ms/step over ${steps} steps (${threads} threads)`);
  await context.dispose();
  await model.dispose();
  process.exit(0);
}

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
