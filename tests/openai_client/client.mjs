// The official openai SDK against a running spited: models, chat (plain, streamed with usage, and
// through the SDK's stream helper), completions (plain and streamed), embeddings (the SDK's
// default base64, which it decodes, and float), a tool call forced by tool_choice (plain, and
// streamed through the stream helper with its deltas accumulated), response_format json_schema,
// chat logprobs, and the error classes the SDK maps statuses to. Any failed check, SDK warning or
// process warning fails the run.
//
//   node client.mjs PORT API_KEY GOLDEN_JSON
import fs from 'node:fs';
import OpenAI, { AuthenticationError, BadRequestError, NotFoundError } from 'openai';

const [port, apiKey, goldenPath] = process.argv.slice(2);
if (!port || !apiKey || !goldenPath) {
  console.error('usage: node client.mjs PORT API_KEY GOLDEN_JSON');
  process.exit(2);
}
const golden = JSON.parse(fs.readFileSync(goldenPath, 'utf8')).runs[0];

const problems = [];
process.on('warning', (w) => problems.push(`process warning: ${w.name}: ${w.message}`));
for (const level of ['warn', 'error']) {
  const original = console[level];
  console[level] = (...args) => {
    problems.push(`console.${level}: ${args.join(' ')}`);
    original(...args);
  };
}
const logger = {
  error: (...a) => problems.push(`SDK error: ${a.map(String).join(' ')}`),
  warn: (...a) => problems.push(`SDK warning: ${a.map(String).join(' ')}`),
  info: () => {},
  debug: () => {},
};
const options = { baseURL: `http://127.0.0.1:${port}/v1`, maxRetries: 0, timeout: 60000, logger, logLevel: 'warn' };
const client = new OpenAI({ ...options, apiKey });

let checks = 0;
function check(ok, what, got) {
  checks++;
  if (!ok) throw new Error(`check failed: ${what}${got === undefined ? '' : ` (got ${JSON.stringify(got)})`}`);
}

async function expectError(cls, call, what) {
  try {
    await call();
  } catch (e) {
    if (e instanceof cls) {
      checks++;
      return e;
    }
    throw new Error(`${what}: expected ${cls.name}, got ${e?.constructor?.name}: ${e?.message}`);
  }
  throw new Error(`${what}: expected ${cls.name}, the call succeeded`);
}

// The reference's detokenizer drops a SentencePiece continuation's leading space; the SDK sees
// the pieces as they are.
const sameAsGolden = (text) => text === golden.greedy_text || text === ` ${golden.greedy_text}`;
const messages = [
  { role: 'system', content: 'You tell short stories.' },
  { role: 'user', content: 'Tell me one.' },
];

// Models.
const models = [];
for await (const m of client.models.list()) models.push(m);
check(models.some((m) => m.id === 'stories' && m.object === 'model'), 'models.list() lists stories', models);
const one = await client.models.retrieve('stories');
check(one.id === 'stories', 'models.retrieve(stories)', one);

// Chat, plain.
const chat = await client.chat.completions.create({ model: 'stories', messages, max_completion_tokens: 16, temperature: 0 });
check(chat.id.startsWith('chatcmpl-') && chat.object === 'chat.completion', 'chat id and object', chat);
check(chat.choices.length === 1 && chat.choices[0].message.role === 'assistant', 'one assistant message', chat.choices);
check(typeof chat.choices[0].message.content === 'string' && chat.choices[0].message.content.length > 0, 'content', chat);
check(chat.choices[0].finish_reason === 'length', 'finish_reason length', chat.choices[0].finish_reason);
check(chat.usage.completion_tokens === 16, 'usage.completion_tokens', chat.usage);
check(chat.usage.total_tokens === chat.usage.prompt_tokens + 16, 'usage.total_tokens', chat.usage);
const content = chat.choices[0].message.content;

// Chat, streamed with include_usage.
const stream = await client.chat.completions.create({
  model: 'stories', messages, max_completion_tokens: 16, temperature: 0, stream: true, stream_options: { include_usage: true },
});
let text = '';
let role = null;
let finish = null;
let usage = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks++;
  check(chunk.object === 'chat.completion.chunk', 'chunk object', chunk);
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    if (c.delta.role) role = c.delta.role;
    text += c.delta.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(chunks >= 4, 'several chunks', chunks);
check(role === 'assistant', 'streamed role', role);
check(text === content, 'streamed text equals the plain answer', text);
check(finish === 'length', 'streamed finish_reason', finish);
check(usage && usage.completion_tokens === 16 && usage.prompt_tokens === chat.usage.prompt_tokens, 'streamed usage', usage);

// The SDK's own accumulating stream helper.
const runner = client.chat.completions.stream({ model: 'stories', messages, max_completion_tokens: 16, temperature: 0 });
let deltas = '';
runner.on('content', (delta) => {
  deltas += delta;
});
const final = await runner.finalChatCompletion();
check(final.choices[0].message.content === content, 'stream helper: final message', final.choices[0].message);
check(deltas === content, 'stream helper: content events', deltas);

// Legacy completions, plain and streamed, against the golden greedy continuation.
const comp = await client.completions.create({ model: 'stories', prompt: golden.prompt, max_tokens: 16, temperature: 0 });
check(comp.object === 'text_completion' && sameAsGolden(comp.choices[0].text), 'completion equals the golden text', comp.choices);
check(comp.usage.completion_tokens === 16, 'completion usage', comp.usage);
const compStream = await client.completions.create({ model: 'stories', prompt: golden.prompt, max_tokens: 16, temperature: 0, stream: true });
let compText = '';
for await (const chunk of compStream) compText += chunk.choices[0]?.text ?? '';
check(compText === comp.choices[0].text, 'streamed completion equals the plain one', compText);
const many = await client.completions.create({ model: 'stories', prompt: golden.prompt, max_tokens: 4, temperature: 0, n: 3 });
check(many.choices.map((c) => c.index).join() === '0,1,2', 'n = 3 gives indexes 0..2', many.choices);

// Embeddings: the SDK asks for base64 by default and decodes it; "float" gives the same vectors.
const inputs = ['Once upon a time', 'The cat sat'];
const emb64 = await client.embeddings.create({ model: 'stories', input: inputs });
const embFloat = await client.embeddings.create({ model: 'stories', input: inputs, encoding_format: 'float' });
check(emb64.object === 'list' && emb64.data.length === 2 && embFloat.data.length === 2, 'two embeddings each', emb64);
for (let i = 0; i < 2; i++) {
  const a = emb64.data[i].embedding;
  const b = embFloat.data[i].embedding;
  check(emb64.data[i].index === i && a.length === 64 && b.length === 64, `embedding ${i}: 64 numbers`, a.length);
  check(a.every((x, k) => Math.abs(x - b[k]) <= 1e-6), `embedding ${i}: base64 decodes to the float vector`, [a[0], b[0]]);
  const norm = Math.hypot(...a);
  check(Math.abs(norm - 1) < 1e-5, `embedding ${i}: unit length`, norm);
}
check(emb64.usage.prompt_tokens > 5 && emb64.usage.total_tokens === emb64.usage.prompt_tokens, 'embedding usage', emb64.usage);

// Tool calls forced by tool_choice naming a function, plain and through the SDK's stream helper.
// The call is whatever the model writes within the grammar: a seed and room for the grammar's
// whitespace keep it finite.
const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather in a city',
    strict: true,
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 24 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const toolRequest = {
  model: 'stories',
  messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  tools: [weatherTool, { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } }],
  tool_choice: { type: 'function', function: { name: 'get_weather' } },
  max_completion_tokens: 400,
  seed: 11,
};
const checkArguments = (args, what) => {
  let parsed;
  try {
    parsed = JSON.parse(args);
  } catch (e) {
    check(false, `${what}: arguments are JSON`, args);
  }
  check(typeof parsed.city === 'string' && ['celsius', 'fahrenheit'].includes(parsed.unit), `${what}: arguments follow the schema`, parsed);
  return parsed;
};
const called = await client.chat.completions.create(toolRequest);
const callChoice = called.choices[0];
check(callChoice.finish_reason === 'tool_calls', 'tool call: finish_reason', callChoice.finish_reason);
check(callChoice.message.tool_calls?.length === 1, 'tool call: one call', callChoice.message);
const call = callChoice.message.tool_calls[0];
check(call.type === 'function' && call.id.startsWith('call_') && call.function.name === 'get_weather', 'tool call: the named function', call);
const args = checkArguments(call.function.arguments, 'tool call');

// Streamed through the SDK's helper, which accumulates the deltas; its chunks, read one by one,
// must add up to the same single call.
const toolRunner = client.chat.completions.stream(toolRequest);
let argumentsDone = null;
toolRunner.on('tool_calls.function.arguments.done', (e) => {
  argumentsDone = e;
});
const acc = {};
let toolFinish = null;
for await (const chunk of toolRunner) {
  for (const c of chunk.choices) {
    for (const d of c.delta.tool_calls ?? []) {
      const t = (acc[d.index] ??= { id: '', name: '', arguments: '' });
      if (d.id) t.id = d.id;
      if (d.function?.name) t.name += d.function.name;
      t.arguments += d.function?.arguments ?? '';
    }
    if (c.finish_reason) toolFinish = c.finish_reason;
  }
}
check(Object.keys(acc).join() === '0' && acc[0].name === 'get_weather' && acc[0].id.startsWith('call_'), 'tool_call deltas: one call', acc);
check(acc[0].arguments === call.function.arguments, "tool_call deltas: the plain call's arguments", acc[0].arguments);
check(toolFinish === 'tool_calls', 'tool_call deltas: finish_reason', toolFinish);
const toolFinal = await toolRunner.finalChatCompletion();
const streamedCalls = toolFinal.choices[0].message.tool_calls;
check(toolFinal.choices[0].finish_reason === 'tool_calls', 'stream helper: finish_reason tool_calls', toolFinal.choices[0].finish_reason);
check(streamedCalls?.length === 1 && streamedCalls[0].function.name === 'get_weather', 'stream helper: one call', streamedCalls);
check(JSON.stringify(checkArguments(streamedCalls[0].function.arguments, 'stream helper')) === JSON.stringify(args),
  'stream helper: the same arguments as the plain call', streamedCalls[0].function.arguments);
// A strict tool's arguments are parsed by the helper itself.
check(argumentsDone?.name === 'get_weather' && argumentsDone.parsed_arguments?.city === args.city, 'arguments.done event', argumentsDone);

// Structured output: response_format json_schema.
const person = await client.chat.completions.create({
  model: 'stories',
  messages: [{ role: 'user', content: 'Describe a person.' }],
  max_completion_tokens: 200,
  seed: 1,
  temperature: 1,
  response_format: {
    type: 'json_schema',
    json_schema: {
      name: 'person',
      strict: true,
      schema: {
        type: 'object',
        properties: { name: { type: 'string', maxLength: 16 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
        required: ['name', 'age'],
        additionalProperties: false,
      },
    },
  },
});
check(person.choices[0].finish_reason === 'stop', 'json_schema: finish_reason stop', person.choices[0]);
const personValue = JSON.parse(person.choices[0].message.content);
check(typeof personValue.name === 'string' && Number.isInteger(personValue.age) && Object.keys(personValue).length === 2,
  'json_schema: the content has the required keys', personValue);

// Logprobs: every generated token with its two most likely alternatives.
const withLogprobs = await client.chat.completions.create({
  model: 'stories', messages, max_completion_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 2,
});
const lpContent = withLogprobs.choices[0].logprobs?.content;
check(Array.isArray(lpContent) && lpContent.length === 4, 'logprobs: one entry per token', withLogprobs.choices[0].logprobs);
check(lpContent.map((e) => e.token).join('') === withLogprobs.choices[0].message.content, 'logprobs: the tokens spell the content', lpContent);
for (const e of lpContent) {
  check(typeof e.token === 'string' && typeof e.logprob === 'number' && e.logprob <= 0, 'logprobs: token and logprob', e);
  check(Array.isArray(e.bytes) && Buffer.from(e.bytes).toString('utf8') === e.token, 'logprobs: bytes are the token', e);
  check(e.top_logprobs.length === 2 && e.top_logprobs[0].logprob === e.logprob, 'logprobs: two alternatives, greedy first', e);
}

// Errors, as the SDK classifies them.
await expectError(NotFoundError, () => client.chat.completions.create({ model: 'no-such-model', messages }), 'unknown model');
await expectError(NotFoundError, () => client.models.retrieve('no-such-model'), 'retrieve an unknown model');
const wrongKey = new OpenAI({ ...options, apiKey: 'wrong-key' });
await expectError(AuthenticationError, () => wrongKey.models.list(), 'a wrong API key');
await expectError(AuthenticationError, () => wrongKey.chat.completions.create({ model: 'stories', messages }), 'chat with a wrong key');
const hot = await expectError(BadRequestError,
  () => client.chat.completions.create({ model: 'stories', messages, temperature: 'hot' }), 'temperature "hot"');
check(hot.param === 'temperature', 'the error names the parameter', hot.param);
const tooMany = await expectError(BadRequestError, () => client.chat.completions.create({ model: 'stories', messages, n: 1000 }), 'n = 1000');
check(tooMany.param === 'n', 'the error names n', tooMany.param);
await expectError(BadRequestError, () => client.completions.create({ model: 'stories', prompt: 5 }), 'prompt 5');

if (problems.length > 0) {
  console.log(`FAILED: ${problems.length} warnings or errors from the client:\n${problems.join('\n')}`);
  process.exit(1);
}
console.log(`openai SDK client: ${checks} checks passed`);
