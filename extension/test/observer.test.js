// Runs content/observer.js in a vm context with a fake document and a modelContext whose
// registerTool replaces a tool of the same name (as the article describes), to check what
// Chromium's own duplicate refusal hides: a stale abort must not remove the newer tool.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import vm from 'node:vm';

const source = readFileSync(new URL('../content/observer.js', import.meta.url), 'utf8');

function page() {
  const attrs = { 'data-tabbridge-nonce': 'n0nce' };
  class ModelContext {
    registerTool() {
      return Promise.resolve();
    }
  }
  const win = new EventTarget();
  const ctx = vm.createContext({ EventTarget, CustomEvent, AbortController, AbortSignal, DOMException, queueMicrotask, console });
  vm.runInContext('this.Element = class Element {}', ctx);
  ctx.Element.prototype.getAttribute = function (n) { return attrs[n] ?? null; };
  ctx.Element.prototype.removeAttribute = function (n) { delete attrs[n]; };
  ctx.document = { documentElement: new ctx.Element(), modelContext: new ModelContext() };
  ctx.navigator = {};
  ctx.window = win;
  const sent = [];
  win.addEventListener('n0nce', (e) => {
    const m = JSON.parse(e.detail);
    if (m.from === 'observer') sent.push(m);
  });
  vm.runInContext(source, ctx);
  const toPage = (m) => win.dispatchEvent(new CustomEvent('n0nce', { detail: JSON.stringify({ from: 'bridge', ...m }) }));
  return { ctx, attrs, sent, toPage };
}

const settle = () => new Promise((r) => setImmediate(r));
const lastTools = (sent) => sent.filter((m) => m.type === 'tools').at(-1)?.tools.map((t) => t.description);

test('the nonce is removed at once', () => {
  const { attrs } = page();
  assert.deepEqual(attrs, {});
});

test('re-registration wins and a stale abort does not remove the new tool', async () => {
  const { ctx, sent, toPage } = page();
  const mc = ctx.document.modelContext;
  const first = new AbortController();
  const second = new AbortController();
  await mc.registerTool({ name: 't', description: 'v1', execute: () => 'one' }, { signal: first.signal });
  await mc.registerTool({ name: 't', description: 'v2', execute: () => 'two' }, { signal: second.signal });
  await settle();
  assert.deepEqual(lastTools(sent), ['v2']);
  first.abort();
  await settle();
  assert.deepEqual(lastTools(sent), ['v2']);
  toPage({ type: 'call', callId: 'c1', tool: 't', args: {} });
  await settle();
  assert.deepEqual(sent.at(-1), { type: 'result', callId: 'c1', ok: true, result: 'two', from: 'observer' });
  second.abort();
  await settle();
  assert.deepEqual(lastTools(sent), []);
});

test('descriptors that cannot survive JSON are not recorded', async () => {
  const { ctx, sent } = page();
  const mc = ctx.document.modelContext;
  await mc.registerTool({ name: 'bad', description: 'd', inputSchema: { default: () => 1 }, execute: () => 1 });
  await mc.registerTool({ name: 'good', description: 'd', execute: () => 1 });
  await settle();
  assert.deepEqual(sent.filter((m) => m.type === 'tools').at(-1).tools.map((t) => t.name), ['good']);
});

test('execute gets a per-call signal and errors keep the page\'s message', async () => {
  const { ctx, sent, toPage } = page();
  let seen;
  await ctx.document.modelContext.registerTool({
    name: 'slow', description: 'd',
    execute: (_, { signal }) => new Promise((_, reject) => { seen = signal; signal.addEventListener('abort', () => reject(new Error('stopped by page'))); }),
  });
  await ctx.document.modelContext.registerTool({ name: 'boom', description: 'd', execute: () => { throw new Error('page says no'); } });
  toPage({ type: 'call', callId: 'c1', tool: 'slow', args: {} });
  toPage({ type: 'call', callId: 'c2', tool: 'boom', args: {} });
  await settle();
  assert.deepEqual(sent.at(-1), { type: 'result', callId: 'c2', ok: false, error: 'page says no', from: 'observer' });
  toPage({ type: 'cancel', callId: 'c1', reason: 'agent gave up' });
  assert.equal(seen.aborted, true);
  assert.equal(seen.reason.message, 'agent gave up');
});
