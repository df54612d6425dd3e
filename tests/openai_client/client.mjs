// The official openai SDK against a running spited: models, chat (plain, streamed with usage, and
// through the SDK's stream helper), completions (plain and streamed), and the error classes the
// SDK maps statuses to. Any failed check, SDK warning or process warning fails the run.
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
