// Greedy tokens from llama.cpp (node-llama-cpp's prebuilt CPU library) for
// a GGUF file: the independent engine our GGUF export is checked against.
//
//   node llama_cpp_greedy.mjs <node-tools dir> <model.gguf> '<[[ids], ...]>' <n> ['<["text", ...]>']
//
// Prints {"greedy": for each prompt (token ids, BOS included) the first n
// greedy tokens, "tokenized": each text as llama.cpp tokenizes it with the
// file's vocabulary (no BOS)}. One thread: the tiny fixtures gain nothing from more,
// and llama.cpp's spinning workers starve each other on two cores.
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const [tools, modelPath, promptsJson, n, textsJson = "[]"] = process.argv.slice(2);
const {getLlama} = await import(pathToFileURL(join(tools, "node_modules", "node-llama-cpp", "dist", "index.js")));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const out = [];
for (const prompt of JSON.parse(promptsJson)) {
  const context = await model.createContext({contextSize: 256, threads: 1});
  const tokens = [];
  for await (const token of context.getSequence().evaluate(prompt, {temperature: 0})) {
    tokens.push(token);
    if (tokens.length >= Number(n)) break;
  }
  out.push(tokens);
  await context.dispose();
}
const tokenized = JSON.parse(textsJson).map((text) => Array.from(model.tokenize(text)));
await model.dispose();
console.log(JSON.stringify({greedy: out, tokenized}));
