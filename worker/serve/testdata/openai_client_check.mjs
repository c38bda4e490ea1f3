// The official OpenAI client (npm `openai`) against our server: every call
// below must behave as it does against OpenAI's API. Any mismatch throws
// (exit code 1, the reason on stderr); success prints the checks run.
//
//   node openai_client_check.mjs <node-tools dir> <base URL> <api key> <model> <Llama 3 base URL>
//
// The first server has a Llama 2 model, the second a Llama 3 one (for
// tools); both on random weights, so the checks constrain what they write
// (a schema, a required call) and check shapes, not content.
import {createRequire} from "node:module";
import {join} from "node:path";
import assert from "node:assert/strict";

const [tools, baseURL, apiKey, model, llama3URL] = process.argv.slice(2);
const {default: OpenAI} = await import(createRequire(join(tools, "package.json")).resolve("openai"));
const client = new OpenAI({baseURL, apiKey, maxRetries: 0});
const llama3 = new OpenAI({baseURL: llama3URL, apiKey, maxRetries: 0});
const checks = [];
const check = (name) => checks.push(name);
const fails = async (call, type, status) => {
  await assert.rejects(call, (e) => e instanceof type && e.status === status);
};
const prompt = "I believe the meaning of life is";

// Completions, whole and streamed, with usage.
const whole = await client.completions.create({model, prompt, max_tokens: 16, temperature: 0});
assert.equal(whole.object, "text_completion");
assert.equal(typeof whole.choices[0].text, "string");
assert.ok(["stop", "length"].includes(whole.choices[0].finish_reason));
assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
check("completion");
let streamed = "", usage = null, finish = null;
const stream = await client.completions.create(
    {model, prompt, max_tokens: 16, temperature: 0, stream: true, stream_options: {include_usage: true}});
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    streamed += c.text;
    if (c.finish_reason) finish = c.finish_reason;
  }
}
assert.equal(streamed, whole.choices[0].text);
assert.equal(finish, whole.choices[0].finish_reason);
assert.deepEqual(usage, whole.usage);
check("completion stream + usage");

// n, seed, logprobs, echo.
const seeded = {model, prompt, max_tokens: 12, temperature: 0.9, seed: 42, n: 3, logprobs: 2};
const a = await client.completions.create(seeded), b = await client.completions.create(seeded);
assert.equal(a.choices.length, 3);
assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
assert.equal(a.choices[0].logprobs.tokens.length, a.choices[0].logprobs.token_logprobs.length);
assert.ok(a.choices[0].logprobs.token_logprobs.every((x) => x <= 0));
assert.equal(a.choices[0].logprobs.top_logprobs.length, a.choices[0].logprobs.tokens.length);
check("n + seed + logprobs");
const echoed = await client.completions.create({model, prompt, max_tokens: 4, temperature: 0, echo: true});
assert.ok(echoed.choices[0].text.startsWith(prompt));
check("echo");

// A stop string from the greedy text: cut there, never sent.
const full = (await client.completions.create({model, prompt, max_tokens: 30, temperature: 0})).choices[0].text;
const stop = full.slice(Math.floor(full.length / 2), Math.floor(full.length / 2) + 3);
const cut = await client.completions.create({model, prompt, max_tokens: 30, temperature: 0, stop: [stop]});
assert.equal(cut.choices[0].text, full.slice(0, full.indexOf(stop)));
assert.equal(cut.choices[0].finish_reason, "stop");
let cutStreamed = "";
for await (const chunk of await client.completions.create(
    {model, prompt, max_tokens: 30, temperature: 0, stop: [stop], stream: true})) {
  for (const c of chunk.choices) cutStreamed += c.text;
}
assert.equal(cutStreamed, cut.choices[0].text);
check("stop strings");

// Chat, whole and streamed.
const messages = [{role: "system", content: "Be brief."}, {role: "user", content: "Hello!"}];
const chat = await client.chat.completions.create(
    {model, messages, max_tokens: 10, temperature: 0, logprobs: true, top_logprobs: 3});
assert.equal(chat.object, "chat.completion");
assert.equal(chat.choices[0].message.role, "assistant");
assert.ok(Array.isArray(chat.choices[0].logprobs.content));
assert.ok(chat.choices[0].logprobs.content.every((t) => t.top_logprobs.length === 3));
let chatStreamed = "", role = null;
for await (const chunk of await client.chat.completions.create(
    {model, messages, max_tokens: 10, temperature: 0, stream: true})) {
  const delta = chunk.choices[0]?.delta ?? {};
  if (delta.role) role = delta.role;
  chatStreamed += delta.content ?? "";
}
assert.equal(role, "assistant");
assert.equal(chatStreamed, chat.choices[0].message.content);
check("chat + stream");

// The client's current chat length field, penalties and logit_bias: a
// token biased by +100 is every token; max_completion_tokens bounds them.
const greedyIds = await client.completions.create(
    {model, prompt, max_tokens: 3, temperature: 0, logprobs: 0, return_tokens_as_token_ids: true});
const forcedId = Number(greedyIds.choices[0].logprobs.tokens[0].split(":")[1]) + 1;
const forced = await client.completions.create({model, prompt, max_tokens: 3, temperature: 0, logprobs: 0,
                                                return_tokens_as_token_ids: true, frequency_penalty: 0.5,
                                                presence_penalty: 0.5, logit_bias: {[forcedId]: 100}});
assert.deepEqual(forced.choices[0].logprobs.tokens, Array(3).fill(`token_id:${forcedId}`));
const bounded = await client.chat.completions.create(
    {model, messages, max_completion_tokens: 2, temperature: 0, ignore_eos: true});
assert.equal(bounded.usage.completion_tokens, 2);
await fails(client.chat.completions.create({model, messages, functions: [{name: "f"}]}), OpenAI.BadRequestError, 400);
check("penalties + logit_bias + max_completion_tokens + unsupported fields refused");

// Structured output: the answer parses and holds to the schema.
const schema = {type: "object", properties: {mood: {enum: ["calm", "busy"]}, count: {type: "integer"}},
                required: ["mood", "count"], additionalProperties: false};
for (const seed of [1, 2]) {
  const structured = await client.chat.completions.create({model, messages, max_tokens: 60, seed,
      response_format: {type: "json_schema", json_schema: {name: "status", schema, strict: true}}});
  assert.equal(structured.choices[0].finish_reason, "stop");
  const value = JSON.parse(structured.choices[0].message.content);
  assert.deepEqual(Object.keys(value), ["mood", "count"]);
  assert.ok(["calm", "busy"].includes(value.mood) && Number.isInteger(value.count));
}
await fails(client.chat.completions.create({model, messages,
    response_format: {type: "json_schema", json_schema: {name: "s", schema: {not: {}}}}}), OpenAI.BadRequestError, 400);
check("response_format json_schema");

// Tools (Llama 3.1's format): a required call comes back as tool_calls, its
// result goes back as a tool message, and the model takes the next turn.
const weather = {type: "function", function: {name: "get_weather", description: "The weather of a city",
    parameters: {type: "object", properties: {city: {type: "string", maxLength: 8}}, required: ["city"]}}};
const ask = [{role: "user", content: "Weather in Paris?"}];
const called = await llama3.chat.completions.create(
    {model, messages: ask, tools: [weather], tool_choice: "required", max_tokens: 400, seed: 3});
const call = called.choices[0].message.tool_calls?.[0];
assert.equal(called.choices[0].finish_reason, "tool_calls");
assert.equal(called.choices[0].message.content, null);
assert.equal(call.type, "function");
assert.equal(call.function.name, "get_weather");
assert.equal(typeof JSON.parse(call.function.arguments).city, "string");
const answered = await llama3.chat.completions.create({model, tools: [weather], max_tokens: 8, seed: 3, messages: [
    ...ask, called.choices[0].message, {role: "tool", tool_call_id: call.id, content: "21C, sunny"}]});
assert.equal(answered.choices[0].message.role, "assistant");
assert.ok(answered.usage.prompt_tokens > called.usage.prompt_tokens);
let streamedCall = null;
for await (const chunk of await llama3.chat.completions.create({model, messages: ask, tools: [weather], stream: true,
    tool_choice: {type: "function", function: {name: "get_weather"}}, max_tokens: 400, seed: 5})) {
  const delta = chunk.choices[0]?.delta ?? {};
  if (delta.tool_calls) streamedCall = delta.tool_calls[0];
  if (chunk.choices[0]?.finish_reason) assert.equal(chunk.choices[0].finish_reason, "tool_calls");
}
assert.equal(streamedCall.index, 0);
assert.equal(streamedCall.function.name, "get_weather");
assert.equal(typeof JSON.parse(streamedCall.function.arguments).city, "string");
await fails(client.chat.completions.create({model, messages: ask, tools: [weather]}), OpenAI.BadRequestError, 400);
check("tools round trip + streamed call + Llama 2 refuses tools");

const models = await client.models.list();
assert.equal(models.data[0].id, model);
check("models");

// Errors, as the client's typed exceptions.
await fails(new OpenAI({baseURL, apiKey: "wrong", maxRetries: 0}).completions.create({model, prompt}),
            OpenAI.AuthenticationError, 401);
await fails(client.completions.create({model: "no-such-model", prompt}), OpenAI.NotFoundError, 404);
await fails(client.completions.create({model, prompt, temperature: 5}), OpenAI.BadRequestError, 400);
await fails(client.completions.create({model, prompt, max_tokens: 100000}), OpenAI.BadRequestError, 400);
check("errors 401 404 400");

console.log(`${checks.length} checks passed: ${checks.join(", ")}`);
