import test from 'node:test';
import assert from 'node:assert/strict';

// Fakes for what the worker's ServerLink touches: chrome.storage, chrome.runtime, fetch and
// WebSocket. The link itself and everything it imports are the real modules.
const stores = { local: new Map([['server', 'https://tb.example']]), session: new Map() };
const area = (m) => ({
  get: async (key) => (m.has(key) ? { [key]: structuredClone(m.get(key)) } : {}),
  set: async (obj) => Object.entries(obj).forEach(([k, v]) => m.set(k, structuredClone(v))),
});
globalThis.chrome = {
  storage: { local: area(stores.local), session: area(stores.session) },
  runtime: { getPlatformInfo: async () => ({ os: 'linux' }), getManifest: () => ({ version: '0.1.0' }) },
};

const requests = [];
const answers = [];
globalThis.fetch = async (url, init) => {
  requests.push(`${init.method} ${new URL(url).pathname}`);
  const [status, body] = answers.shift();
  const res = { status, ok: status < 300, json: async () => body, clone: () => res };
  return res;
};

class FakeSocket {
  static OPEN = 1;
  static all = [];
  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.sent = [];
    this.closedWith = null;
    FakeSocket.all.push(this);
  }
  send(data) {
    this.sent.push(JSON.parse(data));
  }
  close(code) {
    this.closedWith = code;
    this.readyState = 3;
  }
  // Test side.
  opened() {
    this.readyState = 1;
    this.onopen?.();
  }
  receive(m) {
    this.onmessage?.({ data: JSON.stringify(m) });
  }
  drop(code) {
    this.readyState = 3;
    this.onclose?.({ code, reason: '' });
  }
}
globalThis.WebSocket = FakeSocket;

const { ServerLink } = await import('../lib/link.js');

const flush = () => new Promise((r) => setImmediate(r));
const site = { id: 's1', origin: 'https://shop.example', workspaceId: 'w1', workspaceName: 'Work' };
const tool = { name: 'search', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } };

function fakePages() {
  return {
    rec: { docs: { D1: { documentId: 'D1', tabId: 7, origin: 'https://shop.example', url: 'https://shop.example/', title: 'Shop', tools: [tool] } }, tabUsed: { 7: 5 } },
    calls: [],
    told: [],
    refused(documentId, tools, by) {
      this.told.push({ documentId, tools, by });
    },
    call(c) {
      this.calls.push(c);
      return new Promise((resolve) => {
        c.onDispatch('D1');
        c.signal.addEventListener('abort', () => resolve({ ok: false, code: 'cancelled', error: 'The call was cancelled.' }));
        this.finish = resolve;
      });
    },
  };
}

const quiet = { warn() {} };

async function connected(link, sites, limits = { pingSeconds: 20 }) {
  answers.push([201, { ticket: 'tbt_1' }]);
  link.connect();
  await flush();
  const ws = FakeSocket.all.at(-1);
  ws.opened();
  await flush();
  ws.receive({ type: 'welcome', id: 'h1', protocol: 1, browserId: 'x', name: 'n', sharedSites: sites, limits });
  return ws;
}

const of = (ws, type) => ws.sent.filter((m) => m.type === type);

test('hello with a stable browser id, announce on welcome, close with nothing shared', async (t) => {
  const pages = fakePages();
  const link = new ServerLink({ pages, log: quiet });
  t.after(() => link.teardown());
  await link.load();
  let ws = await connected(link, []);
  assert.equal(ws.url, 'wss://tb.example/ws/extension?ticket=tbt_1');
  const h = ws.sent[0];
  assert.equal(h.type, 'hello');
  assert.equal(h.name, 'Chrome on Linux');
  assert.match(h.browserId, /^[0-9a-f-]{36}$/);
  assert.equal(ws.closedWith, 1000, 'with no site shared the socket closes');
  assert.equal(link.state, 'idle');
  link.ensure();
  assert.equal(link.state, 'idle', 'and stays closed');

  ws = await connected(link, [site]);
  assert.equal(ws.sent[0].browserId, h.browserId, 'the browser id is kept');
  assert.deepEqual(ws.sent.slice(1).map((m) => [m.type, m.documentId, m.lastUsed]), [['tools.announce', 'D1', 5], ['sites.open', undefined, undefined], ['ping', undefined, undefined]]);
  assert.deepEqual(of(ws, 'sites.open')[0].sites, [{ origin: 'https://shop.example', lastUsed: 5, tabs: 1 }]);
  link.sync();
  assert.equal(ws.sent.length, 4, 'nothing changed, nothing sent');
  pages.rec.tabUsed[7] = 9;
  link.used(7);
  assert.deepEqual(ws.sent.slice(4).map((m) => m.type), ['document.used', 'sites.open']);
  assert.equal(of(ws, 'sites.open')[1].sites[0].lastUsed, 9);
  delete pages.rec.docs.D1;
  link.sync();
  assert.deepEqual(of(ws, 'document.gone'), [{ type: 'document.gone', documentId: 'D1' }]);
  assert.deepEqual(of(ws, 'sites.open').at(-1).sites, []);
  ws.receive({ type: 'sites', sharedSites: [] });
  assert.equal(ws.closedWith, 1000);
  assert.equal(link.state, 'idle');
  link.teardown();
  link.teardown(); // safe twice
});

test('a call is dispatched and answered; a cancel aborts it and sends nothing', async (t) => {
  const pages = fakePages();
  const link = new ServerLink({ pages, log: quiet });
  t.after(() => link.teardown());
  const ws = await connected(link, [site]);
  const sentBefore = ws.sent.length;
  ws.receive({ type: 'call', id: 'c1', site: 'https://shop.example', tool: 'search', arguments: { q: 'tea' }, deadline: Date.now() + 60000 });
  assert.equal(pages.calls[0].origin, 'https://shop.example');
  assert.ok(pages.calls[0].timeoutMs > 59000 && pages.calls[0].timeoutMs <= 60000);
  pages.finish({ ok: true, result: { n: 3 } });
  await flush();
  // Answered before any document went away: its call.dispatched would tell the server nothing.
  assert.deepEqual(ws.sent.slice(sentBefore), [{ type: 'call.result', callId: 'c1', ok: true, result: { n: 3 } }]);

  ws.receive({ type: 'call', id: 'c2', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() + 60000 });
  const before = ws.sent.length;
  ws.receive({ type: 'call.cancel', callId: 'c2', reason: 'cancelled' });
  assert.equal(pages.calls[1].signal.aborted, true, "the page's signal aborts");
  await flush();
  assert.equal(ws.sent.length, before, 'no result for a cancelled call');
  // A malformed call is refused before it reaches a page, and answered so the agent hears at once.
  ws.receive({ type: 'call', id: 'c3', site: 'https://shop.example', tool: 'search', arguments: 'x', deadline: 1 });
  assert.equal(pages.calls.length, 2);
  const refused = ws.sent.at(-1);
  assert.equal(refused.type, 'call.result');
  assert.equal(refused.callId, 'c3');
  assert.equal(refused.ok, false);
  assert.equal(refused.error.code, 'refused');
  assert.match(refused.error.message, /arguments must be an object/);
  link.teardown();
});

test("a call's gate reaches Pages; a call with a gate the extension does not know is answered, not run", async (t) => {
  const pages = fakePages();
  const link = new ServerLink({ pages, log: quiet });
  t.after(() => link.teardown());
  const ws = await connected(link, [site]);
  const call = { type: 'call', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() + 60000 };
  ws.receive({ ...call, id: 'c1', gate: 'read-only' });
  ws.receive({ ...call, id: 'c2' });
  assert.deepEqual(pages.calls.map((c) => c.gate), ['read-only', '']);
  ws.receive({ ...call, id: 'c3', gate: 'sometimes' });
  assert.equal(pages.calls.length, 2, 'never sent to a page');
  const refused = ws.sent.at(-1);
  assert.deepEqual([refused.type, refused.callId, refused.ok, refused.error.code], ['call.result', 'c3', false, 'refused']);
  assert.match(refused.error.message, /gate is not "read-only", "grant" or "asked"/);
});

test("a running call's document is told before that document is gone, so the server fails the call", async (t) => {
  const pages = fakePages();
  const link = new ServerLink({ pages, log: quiet });
  t.after(() => link.teardown());
  const ws = await connected(link, [site]);
  ws.receive({ type: 'call', id: 'c1', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() + 60000 });
  ws.receive({ type: 'call', id: 'c2', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() + 60000 });
  ws.receive({ type: 'call.cancel', callId: 'c2', reason: 'cancelled' });
  await flush();
  assert.deepEqual(of(ws, 'call.dispatched'), [], 'nothing yet: no document went away');
  pages.rec.tabUsed[7] = 9;
  link.used(7); // a change that is no document.gone sends none either
  assert.deepEqual(of(ws, 'call.dispatched'), []);
  delete pages.rec.docs.D1;
  link.sync();
  const types = ws.sent.map((m) => m.type);
  assert.deepEqual(of(ws, 'call.dispatched'), [{ type: 'call.dispatched', callId: 'c1', documentId: 'D1' }], 'the running call, not the cancelled one');
  assert.ok(types.indexOf('call.dispatched') < types.indexOf('document.gone'), `order: ${types.join(', ')}`);
  link.sync();
  assert.equal(of(ws, 'call.dispatched').length, 1, 'sent once');
  link.teardown();
});

test("a call's deadline is read on the server's clock, measured from the pong", async (t) => {
  const pages = fakePages();
  let ahead = 60000; // this browser's clock is a minute fast
  const link = new ServerLink({ pages, log: quiet, now: () => Date.now() + ahead });
  t.after(() => link.teardown());
  const ws = await connected(link, [site]);
  // Before any pong the offset is unknown: a deadline that looks already past is not trusted.
  ws.receive({ type: 'call', id: 'c1', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() + 60000 });
  assert.ok(pages.calls[0].timeoutMs > 59000, `timeout ${pages.calls[0].timeoutMs} before a pong`);
  pages.finish({ ok: true, result: null });
  await flush();
  const ping = of(ws, 'ping').at(-1);
  assert.ok(ping, 'the link pings at once after the welcome');
  ws.receive({ type: 'pong', id: ping.id, time: Date.now() });
  assert.ok(Math.abs(link.status().clockOffset + 60000) < 1000, `offset ${link.status().clockOffset}`);
  ws.receive({ type: 'call', id: 'c2', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() + 30000 });
  assert.ok(pages.calls[1].timeoutMs > 29000 && pages.calls[1].timeoutMs <= 31000, `timeout ${pages.calls[1].timeoutMs} with the offset`);
  pages.finish({ ok: true, result: null });
  await flush();
  // Bounded either way: a deadline already past still gets a second, a far one at most 60 s.
  ws.receive({ type: 'call', id: 'c3', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() - 5000 });
  assert.equal(pages.calls[2].timeoutMs, 1000);
  pages.finish({ ok: true, result: null });
  await flush();
  ahead = -3600000; // the browser's clock was set an hour back; the offset is stale until the next pong
  ws.receive({ type: 'call', id: 'c4', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() + 60000 });
  assert.equal(pages.calls[3].timeoutMs, 60000);
  pages.finish({ ok: true, result: null });
  await flush();
  // A pong that does not answer the awaited ping changes nothing.
  ws.receive({ type: 'pong', id: 'p999', time: 0 });
  assert.ok(Math.abs(link.status().clockOffset + 60000) < 1000);
});

test("the welcome's limits cap the results and calls and are kept for the bridges", async (t) => {
  const M = globalThis.TabbridgeMessages;
  const pages = fakePages();
  const link = new ServerLink({ pages, log: quiet });
  t.after(() => link.teardown());
  let ws = await connected(link, [site], { pingSeconds: 20, maxResultBytes: 10, callTimeoutMs: 2000 });
  assert.equal(M.limits.maxResultBytes, 10, "the worker's checks use the server's numbers");
  assert.deepEqual((await chrome.storage.local.get('limits')).limits, { ...M.defaults, maxResultBytes: 10, callTimeoutMs: 2000 }, 'kept where the bridges read them');
  ws.receive({ type: 'call', id: 'c1', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() + 60000 });
  assert.equal(pages.calls[0].timeoutMs, 2000, "at most the server's call timeout");
  pages.finish({ ok: true, result: 'x'.repeat(11) });
  await flush();
  assert.equal(ws.sent.at(-1).error.code, 'result_too_large');
  assert.match(ws.sent.at(-1).error.message, /at most 10 are allowed/);
  // A welcome without them (an older server) brings back protocol 1's values.
  link.teardown();
  ws = await connected(link, [site]);
  assert.deepEqual({ ...M.limits }, { ...M.defaults, maxErrorChars: 4096, maxUrlChars: 8192, maxDepth: 64, announceRoomBytes: 32768 });
  assert.deepEqual((await chrome.storage.local.get('limits')).limits, M.defaults);
});

test('a call that fails inside the extension is still answered at once', async (t) => {
  const pages = fakePages();
  pages.call = async () => {
    throw new Error('No current window');
  };
  const link = new ServerLink({ pages, log: quiet });
  t.after(() => link.teardown());
  const ws = await connected(link, [site]);
  ws.receive({ type: 'call', id: 'c1', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: Date.now() + 60000 });
  await flush();
  const r = ws.sent.at(-1);
  assert.equal(r.type, 'call.result');
  assert.equal(r.ok, false);
  assert.equal(r.error.code, 'refused');
  assert.match(r.error.message, /could not run the call: No current window/);
  assert.deepEqual(link.status().calls, []);
});

test('a dropped socket is dialled again with backoff; an expired access token is refreshed once', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
  const link = new ServerLink({ pages: fakePages(), log: quiet });
  t.after(() => link.teardown());
  link.backoff.random = () => 0; // the lowest wait of each step: 500, 1000, 2000 ms
  const ws = await connected(link, [site]);
  requests.length = 0;
  ws.drop(1006);
  assert.equal(link.state, 'waiting');
  answers.push([401, { error: { code: 'access_expired' } }], [200, { refreshed: true }], [201, { ticket: 'tbt_2' }]);
  t.mock.timers.tick(499);
  await flush();
  assert.deepEqual(requests, [], 'not before the backoff');
  t.mock.timers.tick(1);
  for (let i = 0; i < 5; i++) await flush();
  assert.deepEqual(requests, ['POST /api/tickets', 'POST /api/auth/refresh', 'POST /api/tickets']);
  assert.equal(link.stats.refreshes, 1);
  assert.equal(FakeSocket.all.at(-1).url, 'wss://tb.example/ws/extension?ticket=tbt_2');
  // The new socket fails too: the wait doubles.
  FakeSocket.all.at(-1).drop(1006);
  requests.length = 0;
  answers.push([401, { error: { code: 'signed_out' } }]);
  t.mock.timers.tick(999);
  await flush();
  assert.deepEqual(requests, []);
  t.mock.timers.tick(1);
  for (let i = 0; i < 5; i++) await flush();
  assert.deepEqual(requests, ['POST /api/tickets'], 'signed out: no refresh attempt');
  assert.equal(link.state, 'signed-out', 'and no retry loop until the person signs in');
  // A replaced socket (4001) is not dialled again.
  const ws3 = await connected(link, [site]);
  ws3.drop(4001);
  assert.equal(link.state, 'stopped');
  link.ensure(); // the keep-alive alarm
  assert.equal(link.state, 'stopped', 'the alarm does not dial a replaced socket again');
  link.teardown();
});

test('signed out, the keep-alive alarm asks for a ticket again at most once a period', async (t) => {
  let clock = 1_000_000;
  const link = new ServerLink({ pages: fakePages(), log: quiet, now: () => clock });
  t.after(() => link.teardown());
  link.shared = [site];
  requests.length = 0;
  answers.push([401, { error: { code: 'signed_out' } }]);
  link.connect();
  for (let i = 0; i < 3; i++) await flush();
  assert.equal(link.state, 'signed-out');
  assert.deepEqual(requests, ['POST /api/tickets']);

  clock += 10000;
  link.ensure(); // an alarm soon after: not yet
  await flush();
  assert.deepEqual(requests, ['POST /api/tickets']);

  // Still signed out half a minute later: one more ticket, and signed out again.
  clock += 20000;
  answers.push([401, { error: { code: 'signed_out' } }]);
  link.ensure();
  for (let i = 0; i < 3; i++) await flush();
  assert.deepEqual(requests, ['POST /api/tickets', 'POST /api/tickets']);
  assert.equal(link.state, 'signed-out');
  link.ensure();
  await flush();
  assert.equal(requests.length, 2, 'the period starts again at each attempt');

  // The person signed in in a tab (not through the popup): the next alarm connects.
  clock += 30000;
  answers.push([201, { ticket: 'tbt_back' }]);
  link.ensure();
  for (let i = 0; i < 3; i++) await flush();
  assert.equal(link.state, 'connecting');
  assert.equal(FakeSocket.all.at(-1).url, 'wss://tb.example/ws/extension?ticket=tbt_back');
});

// A site's developer reads in the page's console why its tools are not shared: the server's
// refusals reach the document's bridge, one by one (tools.accepted) or whole (an error answering
// the announcement).
test("the server's refusals of a page's tools go to that page", async (t) => {
  const pages = fakePages();
  const link = new ServerLink({ pages, log: quiet });
  t.after(() => link.teardown());
  await link.load();
  const ws = await connected(link, [site]);
  const a = of(ws, 'tools.announce')[0];
  ws.receive({ type: 'tools.accepted', ref: a.id, documentId: 'D1', accepted: [], refused: [{ tool: 'search', reason: 'its schema is a string' }] });
  ws.receive({ type: 'error', code: 'invalid_field', ref: a.id, message: 'tools.announce: the limit is 128 per site' });
  ws.receive({ type: 'error', code: 'invalid_field', ref: 'a-999', message: 'not ours' });
  // A held announcement a newer one replaced was not refused: the page hears nothing of it.
  ws.receive({ type: 'error', code: 'superseded', ref: a.id, message: 'tools.announce: a newer announcement of document "D1" arrived before this one was recorded and replaced it' });
  assert.deepEqual(pages.told, [
    { documentId: 'D1', tools: [{ tool: 'search', reason: 'its schema is a string' }], by: 'server' },
    { documentId: 'D1', tools: [{ tool: '*', reason: 'tools.announce: the limit is 128 per site' }], by: 'server' },
  ]);
});
