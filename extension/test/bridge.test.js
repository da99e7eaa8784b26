// Runs content/bridge.js in a vm context with a fake <html>, window and chrome.runtime port, to
// check what it does with the page's messages before anything reaches the worker. Time is a fake
// clock the test moves (now, later), so no test waits for a real timer.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import vm from 'node:vm';

const messages = readFileSync(new URL('../lib/messages.js', import.meta.url), 'utf8');
const source = readFileSync(new URL('../content/bridge.js', import.meta.url), 'utf8');

function bridge({ prerendering = false, warned = null } = {}) {
  const attrs = {};
  const posted = [];
  const listeners = () => {
    const fns = [];
    return { addListener: (fn) => fns.push(fn), fire: (...a) => fns.forEach((fn) => fn(...a)) };
  };
  let ports = 0;
  let last = null;
  const connect = () => {
    ports++;
    last = { postMessage: (m) => posted.push(JSON.parse(JSON.stringify(m))), onMessage: listeners(), onDisconnect: listeners() };
    return last;
  };
  // The page's lifecycle events: the bridge's listeners, called with the event the test makes.
  const lifecycle = {};
  const hear = (target) => {
    const add = target.addEventListener.bind(target);
    target.addEventListener = (type, fn, opts) => (/^(pageshow|pagehide|freeze|resume|prerenderingchange)$/.test(type) ? (lifecycle[type] = fn) : add(type, fn, opts));
    return target;
  };
  const win = hear(new EventTarget());
  const doc = hear(new EventTarget());
  Object.assign(doc, { title: 'Shop', prerendering, documentElement: { setAttribute: (k, v) => (attrs[k] = v) } });
  let clock = 1000;
  let timers = [];
  // A MessageChannel whose messages are tasks the test runs (settled), as the browser would
  // once the current task ends.
  class MessageChannel {
    constructor() {
      this.port1 = { onmessage: null };
      this.port2 = { postMessage: (data) => tasks.push(() => this.port1.onmessage?.({ data })) };
    }
  }
  const ctx = vm.createContext({
    window: win, CustomEvent, crypto, TextEncoder, JSON, MessageChannel, location: { href: 'https://shop.example/' },
    console: warned ? { ...console, warn: (s) => warned.push(s) } : console,
    MutationObserver: class { observe() {} }, // document.open() is tried in real Chromium (e2e)
    performance: { now: () => clock },
    setTimeout: (fn, ms) => {
      const t = { at: clock + Math.max(0, ms ?? 0), fn };
      timers.push(t);
      return t;
    },
    clearTimeout: (t) => (timers = timers.filter((x) => x !== t)),
    document: doc,
    chrome: { runtime: { id: 'ext', connect, onMessage: listeners() } },
  });
  vm.runInContext(messages, ctx);
  vm.runInContext(source, ctx);
  const nonce = attrs['data-tabbridge-nonce'];
  const fromObserver = (m) => win.dispatchEvent(new CustomEvent(nonce, { detail: JSON.stringify({ from: 'observer', ...m }) }));
  // later moves the clock by ms, running the timers due meanwhile (and the microtasks they queue).
  const later = async (ms) => {
    const end = clock + ms;
    for (;;) {
      await settled();
      const due = timers.filter((t) => t.at <= end).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      timers = timers.filter((t) => t !== due);
      clock = due.at;
      due.fn();
    }
    clock = end;
    await settled();
  };
  // fire calls the bridge's listener of a lifecycle event; trusted says whether the browser sent it.
  const fire = (type, { trusted = true, persisted = false } = {}) => lifecycle[type]({ type, isTrusted: trusted, persisted });
  // disconnect closes the last port from the worker's side, as Chrome does to a page it caches.
  const disconnect = () => last.onDisconnect.fire();
  // fromWorker sends the bridge a message on its port, as the worker does.
  const fromWorker = (m) => last.onMessage.fire(m);
  return { posted, fromObserver, fromWorker, later, fire, disconnect, ports: () => ports, now: () => clock };
}

// settled ends the current task: the microtasks queued so far run, then the tasks it queued.
const tasks = [];
async function settled() {
  await new Promise((r) => setImmediate(r));
  while (tasks.length > 0) {
    tasks.shift()();
    await new Promise((r) => setImmediate(r));
  }
}

const tool = (name, description = 'd') => ({ name, description });
const kinds = (posted) => posted.map((m) => (m.type === 'announce' ? `announce:${m.tools.map((t) => t.name).join(',')}` : m.type === 'frozen' ? `frozen:${m.frozen}` : `${m.type}:${m.callId}`));

test("a page's answer the bridge refuses fails its call at once, it is not dropped", async () => {
  const { posted, fromObserver } = bridge();
  fromObserver({ type: 'tools', tools: [{ name: 't', description: 'd' }] });
  await settled();
  assert.equal(posted.at(-1).type, 'announce');
  fromObserver({ type: 'result', callId: 'c1', ok: 'yes' });
  assert.equal(posted.length, 2, 'the refusal was sent to the worker');
  assert.deepEqual({ ...posted.at(-1), error: undefined }, { type: 'result', callId: 'c1', ok: false, error: undefined });
  assert.match(posted.at(-1).error, /^The extension refused the page's answer: the result is neither ok .*\. This is the site's to fix/);
  fromObserver({ type: 'result', callId: 'bad id!', ok: 'yes' });
  assert.equal(posted.length, 2, 'no call to name, nothing to send');
});

test('a page churning its tools is announced at once, then at most once per gap, with its last list', async () => {
  const b = bridge();
  b.fromObserver({ type: 'tools', tools: [tool('a')] });
  b.fromObserver({ type: 'tools', tools: [tool('a'), tool('b')] }); // the same task: one announcement
  await Promise.resolve(); // as Chromium resolves each registerTool of a loop: a microtask apart
  b.fromObserver({ type: 'tools', tools: [tool('a'), tool('b'), tool('c')] });
  assert.equal(b.posted.length, 0, 'nothing is sent before the end of the current task');
  await settled();
  assert.deepEqual(kinds(b.posted), ['announce:a,b,c']);
  // A change every 2 ms for 2 s: what Chrome would otherwise carry 1,000 times.
  for (let i = 0; i < 1000; i++) {
    await b.later(2);
    b.fromObserver({ type: 'tools', tools: i % 2 ? [tool('a')] : [tool('a'), tool(`t${i}`)] });
  }
  await b.later(300);
  // One at once, then one per 251 ms gap (about 1 KiB of JSON) while the changes go on.
  assert.ok(b.posted.length >= 7 && b.posted.length <= 2 + 2000 / 250, `${b.posted.length} announcements for 1,000 changes in 2 s`);
  assert.deepEqual(kinds(b.posted).at(-1), 'announce:a', 'the last announcement carries the last list');
});

test('the gap after an announcement grows with its size: 250 ms and 1 ms per KiB', async () => {
  const b = bridge();
  const big = Array.from({ length: 50 }, (_, i) => tool(`big${i}`, 'x'.repeat(4000))); // about 200 KiB
  b.fromObserver({ type: 'tools', tools: big });
  await settled();
  assert.equal(b.posted.length, 1);
  b.fromObserver({ type: 'tools', tools: big.slice(1) });
  await b.later(400);
  assert.equal(b.posted.length, 1, 'not within 250 ms + 200 ms');
  await b.later(60);
  assert.equal(b.posted.length, 2, 'sent once the gap for its size has passed');
  // Quiet for longer than the gap: the next change goes at once again.
  await b.later(1000);
  b.fromObserver({ type: 'tools', tools: big.slice(2) });
  await settled();
  assert.equal(b.posted.length, 3);
});

test("the pending announcement goes before a tool's result, a dialog and a freeze", async () => {
  const b = bridge();
  b.fromObserver({ type: 'tools', tools: [tool('a')] });
  await settled();
  b.fromObserver({ type: 'tools', tools: [tool('a'), tool('b')] });
  b.fromObserver({ type: 'result', callId: 'c1', ok: true, result: 1 });
  b.fromObserver({ type: 'tools', tools: [tool('b')] });
  b.fire('freeze');
  b.fire('resume');
  b.fromObserver({ type: 'tools', tools: [tool('c')] });
  b.fromObserver({ type: 'dialog', open: true, kind: 'alert', text: '' });
  await b.later(1000);
  assert.deepEqual(kinds(b.posted), ['announce:a', 'announce:a,b', 'result:c1', 'announce:b', 'frozen:true', 'frozen:false', 'announce:c', 'dialog:undefined']);
});

test('a page leaving sends its pending announcement; one going into the back/forward cache does not, and announces on restore', async () => {
  const b = bridge();
  b.fromObserver({ type: 'tools', tools: [tool('a')] });
  await settled();
  b.fromObserver({ type: 'tools', tools: [tool('b')] });
  b.fire('pagehide', { persisted: true });
  b.fire('freeze');
  await b.later(1000);
  assert.deepEqual(kinds(b.posted), ['announce:a'], 'nothing on a port Chrome is closing');
  b.fire('resume');
  b.fire('pageshow', { persisted: true });
  assert.deepEqual(kinds(b.posted), ['announce:a', 'announce:b']);
  assert.equal(b.ports(), 2, 'the restore opened a new port');
  b.fromObserver({ type: 'tools', tools: [tool('c')] });
  b.fire('pagehide');
  assert.deepEqual(kinds(b.posted).at(-1), 'announce:c', 'sent as the page leaves, not after');
});

test("a page's own pageshow, pagehide, freeze and resume events change nothing", async () => {
  const b = bridge();
  b.fromObserver({ type: 'tools', tools: [tool('a')] });
  await settled();
  for (let i = 0; i < 100; i++) {
    b.fire('pageshow', { trusted: false, persisted: true });
    b.fire('pagehide', { trusted: false, persisted: true });
    b.fire('freeze', { trusted: false });
    b.fire('resume', { trusted: false });
  }
  await b.later(1000);
  assert.deepEqual(kinds(b.posted), ['announce:a']);
  assert.equal(b.ports(), 1, 'no port was opened for a forged restore');
  // Its forged pagehide did not make the bridge think it is being cached: a real freeze is told.
  b.fire('freeze');
  assert.deepEqual(kinds(b.posted), ['announce:a', 'frozen:true']);
});

test('a page going into the back/forward cache opens no new port, whatever it sends', async () => {
  const b = bridge();
  b.fromObserver({ type: 'tools', tools: [tool('a')] });
  await settled();
  b.fire('pagehide', { persisted: true });
  b.disconnect(); // Chrome closes the port of a page it caches
  b.fromObserver({ type: 'result', callId: 'c1', ok: true, result: null, navigating: true });
  b.fromObserver({ type: 'tools', tools: [tool('b')] });
  await b.later(1000);
  assert.equal(b.ports(), 1);
  assert.deepEqual(kinds(b.posted), ['announce:a']);
  b.fire('pageshow', { persisted: true });
  assert.equal(b.ports(), 2);
  assert.deepEqual(kinds(b.posted), ['announce:a', 'announce:b']);
});

test('a prerendered page opens no port until it is shown, then announces the tools it has by then', async () => {
  const b = bridge({ prerendering: true });
  b.fromObserver({ type: 'tools', tools: [tool('a')] });
  await b.later(1000);
  b.fromObserver({ type: 'tools', tools: [tool('a'), tool('b')] });
  b.fromObserver({ type: 'dialog', kind: 'alert', text: 'hi' });
  await b.later(1000);
  assert.equal(b.ports(), 0, 'a port opened while prerendering comes from a frame the worker refuses');
  assert.deepEqual(b.posted, []);
  b.fire('prerenderingchange', { trusted: false }); // the page's own event is not its activation
  await b.later(1000);
  assert.equal(b.ports(), 0);
  b.fire('prerenderingchange');
  await settled();
  assert.equal(b.ports(), 1);
  assert.deepEqual(kinds(b.posted), ['announce:a,b']);
});

// The page's console says, for the site's developer, which tools were not shared and who refused
// them: a named tool, a tool whose name was refused ('' from the worker), or the whole list ('*').
test("the page's console names the tools not shared, a refused name, and the whole list", async () => {
  const warned = [];
  const { fromObserver, fromWorker, later } = bridge({ warned });
  fromObserver({ type: 'tools', tools: [tool('t')] });
  await settled();
  fromWorker({ type: 'refused', by: 'server', tools: [{ tool: 'lookup', reason: 'its schema is a string.' }] });
  fromWorker({ type: 'refused', by: 'server', tools: [{ tool: '', reason: 'the tool name "bad name!" is not allowed' }] });
  fromWorker({ type: 'refused', by: 'server', tools: [{ tool: '*', reason: 'this person\'s browsers already have 1 open page with tools' }] });
  fromObserver({ type: 'tools', tools: 'not a list' }); // the extension refuses the whole list
  await later(300);
  assert.deepEqual(warned.sort(), [
    'Tabbridge: the Tabbridge extension did not share this page\'s tools: the tool list is not an array.',
    'Tabbridge: the Tabbridge server did not share a WebMCP tool: the tool name "bad name!" is not allowed.',
    'Tabbridge: the Tabbridge server did not share the WebMCP tool "lookup": its schema is a string.',
    'Tabbridge: the Tabbridge server did not share this page\'s tools: this person\'s browsers already have 1 open page with tools.',
  ]);
});
