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
  // Like a browser's window, it sets window.event while its listeners run.
  class Window extends EventTarget {
    dispatchEvent(e) {
      const before = this.event;
      this.event = e;
      try {
        return super.dispatchEvent(e);
      } finally {
        this.event = before;
      }
    }
  }
  const win = new Window();
  const ctx = vm.createContext({ EventTarget: Window, CustomEvent, AbortController, AbortSignal, DOMException, queueMicrotask, console });
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
  assert.equal(seen.aborted, false, 'the cancel waits for a microtask, when its event is no longer window.event');
  await settle();
  assert.equal(seen.aborted, true);
  assert.equal(seen.reason.message, 'agent gave up');
});

// A page cannot see the nonce as window.event.type from code the observer runs: it defers every
// message from the bridge, and builds what it sends from null-prototype objects, so no getter,
// setter or toJSON the page puts on its Object.prototype or Array.prototype runs in its work.
test('a hostile page sees neither the nonce nor the messages when a call is cancelled', async () => {
  const { ctx, sent, toPage } = page();
  vm.runInContext(`
    this.leaked = [];
    this.hooked = [];
    let busy = false;
    const note = (name, v) => {
      if (busy) return;
      busy = true;
      hooked.push(name);
      const t = window.event && window.event.type;
      if (t) leaked.push(name + ':' + t);
      if (typeof v === 'string' && v.includes('n0nce')) leaked.push(name + '=' + v);
      busy = false;
    };
    const hook = (target, name) => Object.defineProperty(target, name, {
      configurable: true,
      get() { note(name); return undefined; },
      set(v) { note(name, v); Object.defineProperty(this, name, { value: v, writable: true, enumerable: true, configurable: true }); },
    });
    for (const name of ['toJSON', 'bubbles', 'cancelable', 'composed', 'detail', 'type', 'from', 'callId', 'tool', 'args',
      'ok', 'error', 'reason', 'result', 'tools', 'title', 'once', 'capture', 'passive', 'signal']) hook(Object.prototype, name);
    hook(Array.prototype, '0');
    const json = JSON;
    Object.defineProperty(globalThis, 'JSON', { configurable: true, get() { note('JSON'); return json; } });
  `, ctx);
  await vm.runInContext(`
    this.aborted = null;
    document.modelContext.registerTool({
      name: 'slow', description: 'waits', inputSchema: { type: 'object', properties: { q: { type: 'array' } } },
      execute: (_, { signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => { aborted = signal.reason.message; reject(signal.reason); })),
    });
    document.modelContext.registerTool({ name: 'echo', description: 'echoes', execute: (args) => ({ got: args.q }) });
  `, ctx);
  await settle();
  ctx.hooked.length = 0; // registering reads the page's own tool, which may inherit from its prototypes
  toPage({ type: 'call', callId: 'c1', tool: 'slow', args: { q: [1, 2] } });
  await settle();
  toPage({ type: 'call', callId: 'c2', tool: 'echo', args: { q: [1, { a: 'b' }] } });
  await settle();
  assert.deepEqual(sent.at(-1), { type: 'result', callId: 'c2', ok: true, result: { got: [1, { a: 'b' }] }, from: 'observer' });
  toPage({ type: 'cancel', callId: 'c1', reason: 'agent gave up' });
  await settle();
  assert.equal(ctx.aborted, 'agent gave up', "the cancel reached the page's execute");
  assert.deepEqual(sent.at(-1), { type: 'result', callId: 'c1', ok: false, error: 'agent gave up', from: 'observer' });
  assert.deepEqual(sent.findLast((m) => m.type === 'tools').tools.map((t) => t.name), ['slow', 'echo']);
  assert.deepEqual(sent.find((m) => m.type === 'tools').tools, [{ name: 'slow', description: 'waits', inputSchema: { type: 'object', properties: { q: { type: 'array' } } } }]);
  assert.deepEqual([...ctx.leaked], []);
  assert.deepEqual([...ctx.hooked], [], "running and cancelling the call ran none of the page's hooks");
});
