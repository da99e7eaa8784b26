// Runs content/observer.js in a vm context with a fake document and a modelContext whose
// registerTool replaces a tool of the same name (as the article describes), to check what
// Chromium's own duplicate refusal hides: a stale abort must not remove the newer tool.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import vm from 'node:vm';
import '../lib/messages.js';

const source = readFileSync(new URL('../content/observer.js', import.meta.url), 'utf8');

function page({ warn, mutations } = {}) {
  const attrs = { 'data-tabbridge-nonce': 'n0nce' };
  // Its promises are the page's own (of the vm context), as a browser's are of the page's realm.
  class ModelContext {
    registerTool() {
      return vm.runInContext('Promise.resolve()', ctx);
    }
  }
  // Like a browser's window, it sets window.event while its listeners run.
  // What the page's scripts add to it is recorded, so that a test can erase it as document.open() does.
  const added = [];
  class Window extends EventTarget {
    addEventListener(type, fn, opts) {
      added.push([type, fn, opts]);
      return super.addEventListener(type, fn, opts);
    }
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
  win.erase = () => added.splice(0).forEach(([type, fn, opts]) => EventTarget.prototype.removeEventListener.call(win, type, fn, opts));
  const mutated = []; // the callbacks of the mutation observers made, when mutations is set
  const ctx = vm.createContext({ EventTarget: Window, CustomEvent, AbortController, AbortSignal, DOMException, queueMicrotask, console: warn ? { warn } : console });
  vm.runInContext('this.PageTransitionEvent = class PageTransitionEvent { constructor(type, persisted) { this.type = type; this.isTrusted = true; this._p = persisted; } get persisted() { return this._p; } }', ctx);
  if (mutations) {
    ctx.MutationObserver = class MutationObserver {
      constructor(fn) {
        this.fn = fn;
      }
      observe(target, options) {
        if (target === ctx.document && options.childList) mutated.push(this.fn);
      }
    };
  }
  vm.runInContext('this.Element = class Element {}', ctx);
  ctx.Element.prototype.getAttribute = function (n) { return attrs[n] ?? null; };
  ctx.Element.prototype.removeAttribute = function (n) { delete attrs[n]; };
  ctx.document = { documentElement: new ctx.Element(), modelContext: new ModelContext() };
  ctx.navigator = {};
  ctx.window = win;
  const sent = [];
  const details = []; // what the bridge reads: each message's JSON text
  EventTarget.prototype.addEventListener.call(win, 'n0nce', (e) => {
    const m = JSON.parse(e.detail);
    if (m.from === 'observer') {
      sent.push(m);
      details.push(e.detail);
    }
  });
  vm.runInContext(source, ctx);
  const toPage = (m) => win.dispatchEvent(new CustomEvent('n0nce', { detail: JSON.stringify({ from: 'bridge', ...m }) }));
  // listener returns the observer's listener of type on the window, to call with an event of the
  // test's making (one that says it is trusted, as only the browser's can).
  const listener = (type) => added.find(([t]) => t === type)?.[1];
  return { ctx, attrs, sent, details, toPage, win, mutated, listener };
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
  assert.deepEqual(sent.find((m) => m.type === 'tools').tools, [{ name: 'slow', description: 'waits', kind: 'imperative', inputSchema: { type: 'object', properties: { q: { type: 'array' } } } }]);
  assert.deepEqual([...ctx.leaked], []);
  assert.deepEqual([...ctx.hooked], [], "running and cancelling the call ran none of the page's hooks");
});

// formPage is a page with declarative tools as Chromium 156 reports them (measured): getTools()
// lists every tool of the page and its frames, each with its window; executeTool(tool, input,
// {signal}) resolves with the JSON text of the page's respondWith value, or null when the form
// navigated; toolchange fires on the modelContext for each form added, changed or removed.
function formPage() {
  const attrs = { 'data-tabbridge-nonce': 'n0nce' };
  const ctx = vm.createContext({ EventTarget, CustomEvent, AbortController, AbortSignal, DOMException, queueMicrotask, console });
  // What the browser hands the page is of the page's realm: the observer takes nothing else as data.
  const inRealm = (v) => vm.runInContext('JSON', ctx).parse(JSON.stringify(v));
  vm.runInContext('this.Element = class Element {}; this.NodeList = class NodeList { constructor(a) { this.a = a; } get length() { return this.a.length; } item(i) { return this.a[i]; } }', ctx);
  ctx.Element.prototype.getAttribute = function (n) { return this === html ? attrs[n] ?? null : this.attrs[n] ?? null; };
  ctx.Element.prototype.removeAttribute = function (n) { delete attrs[n]; };
  ctx.Element.prototype.hasAttribute = function (n) { return n in this.attrs; };
  const html = new ctx.Element();
  const forms = [];
  const form = (a) => {
    const f = new ctx.Element();
    f.attrs = a;
    forms.push(f);
    return f;
  };
  const win = new EventTarget();
  const frame = {};
  const executed = [];
  let answer = () => '{"found":["cats"]}';
  let registered = [];
  class ModelContext extends EventTarget {
    registerTool(t) {
      registered.push(t);
      return Promise.resolve();
    }
    getTools() {
      const declared = forms.map((f) => ({ name: f.attrs.toolname, description: f.attrs.tooldescription, title: '', origin: 'https://a.example', inputSchema: { type: 'object', properties: { query: { type: 'string' } } } }));
      const imperative = registered.map((t) => ({ name: t.name, description: t.description, title: '', origin: 'https://a.example', annotations: { readOnlyHint: true, untrustedContentHint: true } }));
      const all = inRealm([...declared, ...imperative, { name: 'inFrame', description: 'a frame\'s form', title: '' }]);
      all.forEach((t) => Object.defineProperty(t, 'window', { value: Object.getOwnPropertyDescriptor(t, 'name').value === 'inFrame' ? frame : win, enumerable: true }));
      return Promise.resolve(all);
    }
    executeTool(tool, input, options) {
      executed.push({ name: tool.name, input, signal: options?.signal });
      return Promise.resolve(answer(tool, input));
    }
  }
  const mc = new ModelContext();
  ctx.document = { documentElement: html, modelContext: mc, querySelectorAll: (sel) => new ctx.NodeList(sel === 'form[toolname]' ? forms : []) };
  ctx.navigator = {};
  ctx.window = win;
  const sent = [];
  const details = []; // what the bridge reads: each message's JSON text
  EventTarget.prototype.addEventListener.call(win, 'n0nce', (e) => {
    const m = JSON.parse(e.detail);
    if (m.from === 'observer') {
      sent.push(m);
      details.push(e.detail);
    }
  });
  vm.runInContext(source, ctx);
  const toPage = (m) => win.dispatchEvent(new CustomEvent('n0nce', { detail: JSON.stringify({ from: 'bridge', ...m }) }));
  const change = () => mc.dispatchEvent(new Event('toolchange'));
  return { ctx, mc, sent, toPage, form, forms, change, executed, inRealm, answer: (f) => (answer = f) };
}

const toolsOf = (sent) => sent.filter((m) => m.type === 'tools').at(-1)?.tools ?? [];

test('declarative tools are read from getTools() on toolchange and run through executeTool', async () => {
  const p = formPage();
  p.form({ toolname: 'searchThings', tooldescription: 'Search things', toolautosubmit: '' });
  p.form({ toolname: 'noAuto', tooldescription: 'Needs a person' });
  await p.mc.registerTool({ name: 'imp', description: 'imperative', annotations: p.inRealm({ readOnlyHint: false }), execute: () => p.inRealm({ via: 'execute' }) });
  p.change();
  await settle();
  const tools = toolsOf(p.sent);
  assert.deepEqual(tools.map((t) => [t.name, t.kind, t.autosubmit]), [['imp', 'imperative', undefined], ['searchThings', 'declarative', true], ['noAuto', 'declarative', false]]);
  assert.deepEqual(tools[0].annotations, { readOnlyHint: false }, 'an imperative tool keeps its own descriptor, not getTools()\' normalised copy');
  assert.equal(tools[1].annotations, undefined, 'a form carries no annotations');
  assert.deepEqual(tools[1].inputSchema, { type: 'object', properties: { query: { type: 'string' } } });

  p.toPage({ type: 'call', callId: 'c1', tool: 'searchThings', args: { query: 'cats' } });
  await settle();
  assert.deepEqual(p.sent.at(-1), { type: 'result', callId: 'c1', ok: true, result: { found: ['cats'] }, from: 'observer' });
  assert.deepEqual(p.executed.map((e) => [e.name, e.input.query, typeof e.signal?.aborted]), [['searchThings', 'cats', 'boolean']]);

  p.toPage({ type: 'call', callId: 'c2', tool: 'imp', args: {} });
  await settle();
  assert.deepEqual(p.sent.at(-1).result, { via: 'execute' }, 'imperative tools still go through the page\'s own execute');

  p.toPage({ type: 'call', callId: 'c3', tool: 'noAuto', args: {} });
  await settle();
  assert.match(p.sent.at(-1).error, /toolautosubmit/);
  assert.equal(p.executed.length, 1, 'a form waiting for the person is never filled remotely');

  p.answer(() => null); // the form navigated
  p.toPage({ type: 'call', callId: 'c4', tool: 'searchThings', args: { query: 'dogs' } });
  await settle();
  assert.deepEqual(p.sent.at(-1), { type: 'result', callId: 'c4', ok: true, result: null, navigating: true, from: 'observer' });

  p.forms.splice(0, 1);
  p.change();
  await settle();
  assert.deepEqual(toolsOf(p.sent).map((t) => t.name), ['imp', 'noAuto']);
});

test('a cancelled form call aborts executeTool\'s signal', async () => {
  const p = formPage();
  p.form({ toolname: 'slowForm', tooldescription: 'slow', toolautosubmit: '' });
  p.answer((tool, input) => new Promise((_, reject) => p.executed.at(-1).signal.addEventListener('abort', () => reject(new Error('Tool execution cancelled')))));
  p.change();
  await settle();
  p.toPage({ type: 'call', callId: 'c1', tool: 'slowForm', args: {} });
  await settle();
  p.toPage({ type: 'cancel', callId: 'c1', reason: 'agent gave up' });
  await settle();
  assert.equal(p.executed[0].signal.aborted, true);
  assert.deepEqual(p.sent.at(-1), { type: 'result', callId: 'c1', ok: false, error: 'agent gave up', from: 'observer' });
});

// A form has one set of fields: two calls filling it at once would mix their values, and one's
// answer could be read as the other's (one said failed that was submitted, and repeated).
test('a form runs one call at a time; a cancelled call leaves it to the next untouched', async () => {
  const p = formPage();
  p.form({ toolname: 'orderForm', tooldescription: 'order', toolautosubmit: '' });
  p.change();
  await settle();
  let release;
  p.answer(() => new Promise((r) => (release = r)));
  p.toPage({ type: 'call', callId: 'c1', tool: 'orderForm', args: { query: 'tea' } });
  await settle();
  p.toPage({ type: 'call', callId: 'c2', tool: 'orderForm', args: { query: 'cake' } });
  await settle();
  const second = p.sent.find((m) => m.callId === 'c2');
  assert.equal(second.ok, false);
  assert.match(second.error, /^The form "orderForm" is being filled and submitted for another call right now.*Nothing was filled in or submitted\.$/);
  assert.deepEqual(p.executed.map((e) => e.input.query), ['tea'], 'the second call filled nothing');
  release('{"ordered":"tea"}');
  await settle();
  assert.deepEqual(p.sent.find((m) => m.callId === 'c1').result, { ordered: 'tea' });

  // Answered, the form takes the next call.
  p.answer(() => '{"ordered":"cake"}');
  p.toPage({ type: 'call', callId: 'c3', tool: 'orderForm', args: { query: 'cake' } });
  await settle();
  assert.deepEqual(p.sent.find((m) => m.callId === 'c3').result, { ordered: 'cake' });

  // A cancelled call frees the form at once; its late end leaves the next call's record alone.
  let late;
  p.answer(() => new Promise((_, reject) => (late = reject)));
  p.toPage({ type: 'call', callId: 'c4', tool: 'orderForm', args: { query: 'jam' } });
  await settle();
  p.toPage({ type: 'cancel', callId: 'c4', reason: 'agent gave up' });
  await settle();
  let next;
  p.answer(() => new Promise((r) => (next = r)));
  p.toPage({ type: 'call', callId: 'c5', tool: 'orderForm', args: { query: 'bread' } });
  await settle();
  assert.deepEqual(p.executed.map((e) => e.input.query), ['tea', 'cake', 'jam', 'bread']);
  late(new Error('Tool execution cancelled'));
  await settle();
  p.toPage({ type: 'call', callId: 'c6', tool: 'orderForm', args: { query: 'milk' } });
  await settle();
  assert.match(p.sent.find((m) => m.callId === 'c6').error, /for another call right now/, "the cancelled call's late end did not free the form c5 fills");
  next('{"ordered":"bread"}');
  await settle();
  assert.deepEqual(p.sent.find((m) => m.callId === 'c5').result, { ordered: 'bread' });
});

// The declarative path uses only what it saved at start: a page that later patches the DOM
// methods it reads and puts getters, setters and toJSON on its Object.prototype sees none of its
// work, and cannot change what it announces or returns.
test('a hostile page neither sees nor changes the declarative path', async () => {
  const p = formPage();
  vm.runInContext(`
    this.hooked = [];
    for (const k of ['type', 'callId', 'ok', 'result', 'navigating', 'kind', 'autosubmit', 'desc', 'calls', 'signal', 'window', 'name', 'inputSchema', 'description', 'from', 'tools', 'form', 'done', 'reg', 'ctl', '0', 'length']) {
      Object.defineProperty(Object.prototype, k, { configurable: true, get() { hooked.push('get ' + k); return undefined; }, set(v) { hooked.push('set ' + k); } });
    }
    Object.defineProperty(Object.prototype, 'toJSON', { configurable: true, get() { hooked.push('toJSON'); return undefined; } });
    Element.prototype.getAttribute = function () { hooked.push('getAttribute'); return 'forged'; };
    Element.prototype.hasAttribute = function () { hooked.push('hasAttribute'); return true; };
    NodeList.prototype.item = function () { hooked.push('item'); return null; };
    document.querySelectorAll = () => { hooked.push('querySelectorAll'); return new NodeList([]); };
  `, p.ctx);
  p.form({ toolname: 'searchThings', tooldescription: 'Search things', toolautosubmit: '' });
  p.form({ toolname: 'noAuto', tooldescription: 'Needs a person' });
  p.change();
  await settle();
  assert.deepEqual(toolsOf(p.sent).map((t) => [t.name, t.kind, t.autosubmit]), [['searchThings', 'declarative', true], ['noAuto', 'declarative', false]]);
  p.toPage({ type: 'call', callId: 'c1', tool: 'searchThings', args: { query: 'cats' } });
  p.toPage({ type: 'call', callId: 'c2', tool: 'noAuto', args: {} });
  await settle();
  assert.deepEqual(p.sent.find((m) => m.callId === 'c1'), { type: 'result', callId: 'c1', ok: true, result: { found: ['cats'] }, from: 'observer' });
  assert.match(p.sent.find((m) => m.callId === 'c2').error, /toolautosubmit/);
  assert.equal(vm.runInContext('hooked.join(", ")', p.ctx), '');
});

// A site's execute returns what its own code has at hand: objects with undefined fields, Dates,
// class instances, a library's value with toJSON. They reach the agent as JSON.stringify would
// write them; what JSON cannot carry fails with the place and the reason.
test('results are converted as JSON.stringify would, and what JSON cannot carry says where', async () => {
  const { ctx, sent, toPage } = page();
  vm.runInContext(`
    class Product { constructor(id) { this.id = id; this.note = undefined; } get label() { return 'x'; } }
    class Money { constructor(c) { this.c = c; } toJSON() { return (this.c / 100).toFixed(2) + ' EUR'; } }
    const cycle = { a: 1 }; cycle.items = [cycle];
    this.returns = {
      mixed: { name: 'tea', discount: undefined, f() {}, list: [1, undefined, () => 1], n: NaN, at: new Date(Date.UTC(2026, 0, 2)), p: new Product(7), price: new Money(250), m: new Map([[1, 2]]) },
      big: { order: { total: 10n } },
      cycle,
      deep: JSON.parse('['.repeat(70) + ']'.repeat(70)),
      undef: undefined,
      fn: () => 1,
      str: 'a\\ud800b',
    };
  `, ctx);
  for (const name of Object.keys(ctx.returns)) {
    await ctx.document.modelContext.registerTool({ name, description: 'd', execute: () => ctx.returns[name] });
  }
  const outcome = async (tool) => {
    toPage({ type: 'call', callId: `c-${tool}`, tool, args: {} });
    await settle();
    const m = sent.findLast((x) => x.callId === `c-${tool}`);
    return m.ok ? m.result : m.error;
  };
  assert.deepEqual(await outcome('mixed'), { name: 'tea', list: [1, null, null], n: null, at: '2026-01-02T00:00:00.000Z', p: { id: 7 }, price: '2.50 EUR', m: {} });
  assert.match(await outcome('big'), /cannot be sent as JSON: it holds a BigInt at result\.order\.total.*site's to fix/);
  assert.match(await outcome('cycle'), /refers to itself at result\.items\[0\]/);
  assert.match(await outcome('deep'), /nested more than 64 levels deep/);
  assert.equal(await outcome('undef'), null);
  assert.match(await outcome('fn'), /returned a function, not JSON data/);
  assert.equal(await outcome('str'), 'a\ud800b');
});

test('a page patching Object.prototype.toJSON changes no result, and runs nothing', async () => {
  const { ctx, sent, toPage } = page();
  vm.runInContext(`
    this.ran = 0;
    Object.prototype.toJSON = function () { ran++; return 'hijacked'; };
    Array.prototype.toJSON = function () { ran++; return 'hijacked'; };
  `, ctx);
  await ctx.document.modelContext.registerTool({ name: 'r', description: 'd', execute: () => vm.runInContext('({ a: [1, { b: 2 }] })', ctx) });
  toPage({ type: 'call', callId: 'c1', tool: 'r', args: {} });
  await settle();
  assert.deepEqual(sent.at(-1).result, { a: [1, { b: 2 }] });
  assert.equal(ctx.ran, 0);
});

// What a page throws is often not an Error: a string, an object of its own, nothing at all.
test('what the page throws is said in words the agent can read', async () => {
  const { ctx, sent, toPage } = page();
  vm.runInContext(`
    this.throws = {
      str: () => { throw 'out of stock'; },
      obj: () => { throw { code: 'E42', detail: 'the basket is locked' }; },
      nul: () => { throw null; },
      undef: () => Promise.reject(),
      empty: () => { throw new TypeError(); },
      dom: () => { throw new DOMException('sign in first', 'NotAllowedError'); },
      err: () => { throw new Error('page says no'); },
    };
  `, ctx);
  for (const name of Object.keys(ctx.throws)) {
    await ctx.document.modelContext.registerTool({ name, description: 'd', execute: ctx.throws[name] });
  }
  const want = {
    str: 'out of stock',
    obj: 'The tool threw {"code":"E42","detail":"the basket is locked"}',
    nul: 'The tool failed without saying why (it threw null).',
    undef: 'The tool failed without saying why (it threw undefined).',
    empty: 'TypeError, with no message',
    dom: 'sign in first',
    err: 'page says no',
  };
  for (const [name, text] of Object.entries(want)) {
    toPage({ type: 'call', callId: `c-${name}`, tool: name, args: {} });
    await settle();
    assert.deepEqual(sent.findLast((m) => m.callId === `c-${name}`), { type: 'result', callId: `c-${name}`, ok: false, error: text, from: 'observer' }, name);
  }
});

test('a tool that cannot be described says why in the console', async () => {
  const said = [];
  const { ctx, sent } = page({ warn: (m) => said.push(m) });
  vm.runInContext(`
    class ZodString { constructor() { this._def = { typeName: 'ZodString' }; } }
    let deep = { type: 'object' }; for (let i = 0; i < 70; i++) deep = { properties: { a: deep } };
    this.zod = { type: 'object', properties: { q: new ZodString() } };
    this.deep = deep;
  `, ctx);
  await ctx.document.modelContext.registerTool({ name: 'zod', description: 'd', inputSchema: ctx.zod, execute: () => 1 });
  await ctx.document.modelContext.registerTool({ name: 'deep', description: 'd', inputSchema: ctx.deep, execute: () => 1 });
  await ctx.document.modelContext.registerTool({ name: 'zod', description: 'again', inputSchema: ctx.zod, execute: () => 1 });
  await settle();
  assert.equal(sent.filter((m) => m.type === 'tools').length, 0, 'neither is shared');
  assert.deepEqual(said, [
    'Tabbridge: the WebMCP tool "zod" is not shared: its inputSchema is not JSON data (it holds a function, a class instance such as a Zod schema, NaN or undefined): give a plain JSON object.',
    `Tabbridge: the WebMCP tool "deep" is not shared: its inputSchema cannot be sent as JSON: it is nested more than 64 levels deep at inputSchema${'.properties.a'.repeat(32)}.`,
  ], 'each once');
});

// A page whose every object is a thenable cannot answer (the engine itself calls its then on
// every promise of an object): its calls are refused at once, unrun. A page that replaces
// Promise.prototype.then, its constructor and Symbol.species still answers: the observer follows
// promises without them.
test('a page with Object.prototype.then is refused at once; one that replaces Promise\'s then, constructor and species still answers', async () => {
  const { ctx, sent, toPage } = page();
  const mc = ctx.document.modelContext;
  await mc.registerTool({ name: 'a', description: 'd', execute: vm.runInContext('(async () => ({ ok: 1 }))', ctx) });
  await settle();
  vm.runInContext(`
    this.thenCalls = 0;
    Promise.prototype.then = function () { thenCalls++; return this; };
    Object.defineProperty(Promise.prototype, 'constructor', { configurable: true, value: Object });
    Object.defineProperty(Promise, Symbol.species, { configurable: true, get() { thenCalls++; return function Fake(ex) { ex(() => {}, () => {}); }; } });
  `, ctx);
  toPage({ type: 'call', callId: 'c1', tool: 'a', args: {} });
  await settle();
  assert.deepEqual(sent.at(-1), { type: 'result', callId: 'c1', ok: true, result: { ok: 1 }, from: 'observer' });
  assert.equal(ctx.thenCalls, 0, 'none of the page\'s replacements ran');
  vm.runInContext('Object.prototype.then = function () {}', ctx);
  toPage({ type: 'call', callId: 'c2', tool: 'a', args: {} });
  await settle();
  assert.match(sent.at(-1).error, /^The page defines Object\.prototype\.then, .* The call was not run\./);
});

test('a result that is a Proxy whose every trap throws fails the call, it does not hang it', async () => {
  const { ctx, sent, toPage } = page();
  await ctx.document.modelContext.registerTool({ name: 'p', description: 'd', execute: vm.runInContext(`() => new Proxy({}, new Proxy({}, { get() { return () => { throw new Error('trap'); }; } }))`, ctx) });
  await settle();
  toPage({ type: 'call', callId: 'c1', tool: 'p', args: {} });
  await settle();
  assert.equal(sent.at(-1).callId, 'c1');
  assert.equal(sent.at(-1).ok, false);
  assert.match(sent.at(-1).error, /trap/);
});

test('a result far over the cap the bridge sends with the call is refused in the page, with its size', async () => {
  const { ctx, sent, toPage } = page();
  await ctx.document.modelContext.registerTool({ name: 'big', description: 'd', execute: ({ n }) => (n === 0 ? 'x'.repeat(100) : { s: 'x'.repeat(100) }) });
  await settle();
  toPage({ type: 'call', callId: 'c1', tool: 'big', args: { n: 0 }, max: 50 });
  toPage({ type: 'call', callId: 'c2', tool: 'big', args: { n: 1 }, max: 50 });
  toPage({ type: 'call', callId: 'c3', tool: 'big', args: { n: 0 }, max: 1000 });
  await settle();
  const by = Object.fromEntries(sent.filter((m) => m.type === 'result').map((m) => [m.callId, m]));
  assert.deepEqual(by.c1, { type: 'result', callId: 'c1', ok: false, code: 'result_too_large', size: 100, error: 'The result is too large.', from: 'observer' });
  assert.equal(by.c2.size, 108);
  assert.equal(by.c3.result, 'x'.repeat(100));
});

// A result whose JSON would be longer than the engine's longest string (600 references to one
// 1 MB string cost the page nothing to make) made JSON.stringify throw while the observer measured
// it: the throw was swallowed, and the call waited unanswered for its deadline.
test('a result whose JSON is too long to write is refused at once, with its size', async () => {
  const { ctx, sent, toPage } = page();
  vm.runInContext(`this.many = () => { const s = 'x'.repeat(1 << 20); return Array(600).fill(s); };`, ctx);
  await ctx.document.modelContext.registerTool({ name: 'many', description: 'd', execute: ctx.many });
  await settle();
  toPage({ type: 'call', callId: 'c1', tool: 'many', args: {}, max: 256 << 10 });
  await settle();
  const r = sent.filter((m) => m.type === 'result').at(-1);
  assert.equal(r?.callId, 'c1', 'the call was answered');
  assert.equal(r.code, 'result_too_large');
  assert.ok(r.size >= 600 * (1 << 20), `size ${r.size}`);
  assert.equal(globalThis.TabbridgeMessages.checkOutcome(r).msg.code, 'result_too_large', 'the bridge takes it');
});

// The bridge takes at most maxAnnouncementBytes + maxResultBytes of a message from the page, and a
// failure whose text was longer was dropped: the call then waited, unanswered, for its deadline.
test('a tool that throws a huge error ends its call at once, its text cut', async () => {
  const M = globalThis.TabbridgeMessages;
  const { ctx, sent, details, toPage } = page();
  vm.runInContext(`this.huge = () => { throw new Error('out of stock. ' + 'x'.repeat(3 << 20)); };`, ctx);
  await ctx.document.modelContext.registerTool({ name: 'huge', description: 'd', execute: ctx.huge });
  await settle();
  toPage({ type: 'call', callId: 'c1', tool: 'huge', args: {} });
  await settle();
  assert.equal(sent.at(-1).callId, 'c1');
  assert.ok(details.at(-1).length < 8192, `${details.at(-1).length} characters crossed to the bridge`);
  const r = M.parsePageMessage(details.at(-1));
  assert.equal(r.ok, true, r.reason);
  assert.equal(r.msg.ok, false);
  assert.match(r.msg.error, /^out of stock\. x+/);
  assert.ok(r.msg.error.length <= M.limits.maxErrorChars, `${r.msg.error.length} characters`);
});

test("a pagehide the page dispatches itself does not end its form calls as navigating", async () => {
  const p = formPage();
  p.form({ toolname: 'slowForm', tooldescription: 'slow', toolautosubmit: '' });
  p.answer(() => new Promise(() => {}));
  p.change();
  await settle();
  p.toPage({ type: 'call', callId: 'c1', tool: 'slowForm', args: {} });
  await settle();
  const before = p.sent.length;
  p.ctx.window.dispatchEvent(new Event('pagehide')); // isTrusted false, as every event a page makes
  await settle();
  assert.deepEqual(p.sent.slice(before), [], 'the call still runs');
  p.toPage({ type: 'cancel', callId: 'c1', reason: 'done' });
  await settle();
  assert.deepEqual(p.sent.at(-1), { type: 'result', callId: 'c1', ok: false, error: 'done', from: 'observer' });
});

// document.open() erases every listener on the window (the observer's too) and keeps the same
// document: the observer hears the document's childList change and listens again, and sends the
// page's tools again, so the tools registered meanwhile are announced and calls are heard.
test('a page that opens its document again is heard again, and its tools sent again', async () => {
  const { ctx, sent, toPage, win, mutated } = page({ mutations: true });
  assert.equal(mutated.length, 1, 'the observer watches the document');
  const mc = ctx.document.modelContext;
  await mc.registerTool({ name: 'a', description: 'a', execute: () => 'a' });
  await settle();
  win.erase(); // document.open()
  await mc.registerTool({ name: 'b', description: 'b', execute: () => 'b' });
  await settle();
  toPage({ type: 'call', callId: 'lost', tool: 'a', args: {} });
  await settle();
  assert.equal(sent.filter((m) => m.callId === 'lost').length, 0, 'unheard while its listener is erased');
  const before = sent.length;
  mutated[0]([]); // the document's childList change
  await settle();
  assert.deepEqual(sent.slice(before).map((m) => m.type), ['tools']);
  assert.deepEqual(lastTools(sent), ['a', 'b']);
  toPage({ type: 'call', callId: 'c2', tool: 'b', args: {} });
  await settle();
  assert.deepEqual(sent.at(-1), { type: 'result', callId: 'c2', ok: true, result: 'b', from: 'observer' });
  // Heard once, though the change is seen again with the listener still there.
  mutated[0]([]);
  toPage({ type: 'call', callId: 'c3', tool: 'a', args: {} });
  await settle();
  assert.equal(sent.filter((m) => m.callId === 'c3').length, 1);
});

test('a page without tools is not announced when its document changes', async () => {
  const { sent, mutated } = page({ mutations: true });
  mutated[0]([]);
  await settle();
  assert.deepEqual(sent, []);
});

// A page going into the back/forward cache goes on where it was when it is shown again: a call
// still running would finish its work then, unheard. Its signal fires as the page is cached; a
// page leaving for good is not told (it runs nothing again).
test('a page put in the back/forward cache aborts its running calls; one leaving for good does not', async () => {
  for (const persisted of [true, false]) {
    const { ctx, sent, toPage, listener } = page();
    const heard = [];
    await ctx.document.modelContext.registerTool({
      name: 'slow',
      description: 'd',
      execute: (args, { signal }) => new Promise((resolve, reject) => {
        signal.addEventListener('abort', () => {
          heard.push(signal.reason.message);
          reject(signal.reason);
        });
      }),
    });
    await settle();
    toPage({ type: 'call', callId: 'c1', tool: 'slow', args: {} });
    await settle();
    // The page patched persisted's getter: the observer reads the browser's own.
    vm.runInContext("Object.defineProperty(PageTransitionEvent.prototype, 'persisted', { get() { return false; } })", ctx);
    const ev = new ctx.PageTransitionEvent('pagehide', persisted);
    Object.defineProperty(ev, '_p', { value: persisted });
    listener('pagehide')(ev);
    await settle();
    // No answer either way: the port's close ends the call in the worker (page_gone), and an
    // answer sent now could overtake it.
    const results = sent.filter((m) => m.type === 'result');
    if (persisted) {
      assert.deepEqual(heard, ['The page was put in the back/forward cache while the call was running: the call was given up.']);
      assert.deepEqual(results, []);
    } else {
      assert.deepEqual(heard, []);
      assert.deepEqual(results, []);
    }
  }
});
