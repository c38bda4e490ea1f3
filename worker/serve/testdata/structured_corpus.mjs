// Every schema of a corpus through the official OpenAI client's
// response_format (json_schema, strict), chat, greedy and sampled, eight
// requests at a time; writes [{name, schema, outputs, finish}] for
// worker/grammar/testdata/validate_outputs.py.
//
//   node structured_corpus.mjs <node-tools dir> <base URL> <model> <schemas.json> <results.json>
import {createRequire} from "node:module";
import {readFileSync, writeFileSync} from "node:fs";
import {join} from "node:path";

const [tools, baseURL, model, schemasPath, resultsPath] = process.argv.slice(2);
const {default: OpenAI} = await import(createRequire(join(tools, "package.json")).resolve("openai"));
const client = new OpenAI({baseURL, apiKey: "unused", maxRetries: 0});
const corpus = JSON.parse(readFileSync(schemasPath, "utf8"));

const ask = async (entry, i, temperature) => {
  const answer = await client.chat.completions.create({
    model,
    messages: [{role: "user", content: "Answer in JSON."}],
    temperature,
    seed: i,
    max_tokens: 700,
    response_format: {type: "json_schema", json_schema: {name: `schema_${i}`, schema: entry.schema, strict: true}},
  });
  return [answer.choices[0].message.content, answer.choices[0].finish_reason];
};

const results = corpus.map((e) => ({name: e.name, schema: e.schema, outputs: [], finish: []}));
const jobs = [];
corpus.forEach((entry, i) => [0, 1].forEach((temperature) => jobs.push([entry, i, temperature])));
let next = 0;
const worker = async () => {
  while (next < jobs.length) {
    const [entry, i, temperature] = jobs[next++];
    const [text, finish] = await ask(entry, i, temperature);
    results[i].outputs[temperature] = text;
    results[i].finish[temperature] = finish;
  }
};
await Promise.all(Array.from({length: 8}, worker));
writeFileSync(resultsPath, JSON.stringify(results));
const unfinished = results.flatMap((r) => r.finish).filter((f) => f !== "stop").length;
console.log(`${jobs.length} answers, ${unfinished} not ended by their grammar`);
process.exit(unfinished === 0 ? 0 : 1);
