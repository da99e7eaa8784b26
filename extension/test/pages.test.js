import test from 'node:test';
import assert from 'node:assert/strict';

// Fakes for what Pages touches: chrome.storage.session, chrome.runtime and chrome.tabs. Pages and
// everything it imports are the real modules.
const session = new Map();
const created = [];
let createTab = async () => ({ id: 99 });
let sendMessage = async () => {
  throw new Error('Could not establish connection. Receiving end does not exist.');
};
globalThis.chrome = {
  runtime: { id: 'ext' },
  storage: {
    session: {
      get: async (key) => (session.has(key) ? { [key]: structuredClone(session.get(key)) } : {}),
      set: async (obj) => Object.entries(obj).forEach(([k, v]) => session.set(k, structuredClone(v))),
    },
  },
  tabs: {
    create: (props) => {
      created.push(props);
      return createTab(props);
    },
    sendMessage: (...a) => sendMessage(...a),
    get: async (id) => ({ id, status: tabStatus }),
    onRemoved: { addListener() {}, removeListener() {} },
    onUpdated: {
      fns: new Set(),
      addListener(f) { this.fns.add(f); },
      removeListener(f) { this.fns.delete(f); },
      fire(...a) { [...this.fns].forEach((f) => f(...a)); },
    },
  },
};
let tabStatus = 'loading';
let readPage = async () => [{ result: { url: '', title: '', jsonLd: null } }];
globalThis.chrome.scripting = { executeScript: (...a) => readPage(...a) };

const { Pages, codes, pageAddress } = await import('../lib/pages.js');

const origin = 'https://shop.example';
const quiet = { warn() {} };

// A worker that knows the site's address but has no tab of it open.
function closedSite() {
  const pages = new Pages({ log: quiet });
  pages.rec.addresses[origin] = { url: `${origin}/cart`, title: 'Shop', at: 1 };
  return pages;
}

test('a site that cannot be reopened fails the call at once with the reason', async () => {
  createTab = async () => {
    throw new Error('No current window');
  };
  created.length = 0;
  const pages = closedSite();
  const started = Date.now();
  const [a, b] = await Promise.all([
    pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000 }),
    pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000 }),
  ]);
  assert.ok(Date.now() - started < 5000, 'not at the deadline');
  for (const o of [a, b]) {
    assert.equal(o.ok, false);
    assert.equal(o.code, codes.noSite);
    assert.match(o.error, /could not reopen https:\/\/shop\.example\/cart .*No current window/);
  }
  assert.equal(created.length, 1, 'two calls share one attempt to reopen');
  assert.equal(pages.reopening.size, 0, 'the failed attempt is forgotten');

  // Once Chrome can open a tab again, the next call tries again.
  createTab = async () => ({ id: 99 });
  const ctl = new AbortController();
  const next = pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000, signal: ctl.signal });
  await new Promise((r) => setImmediate(r));
  assert.equal(created.length, 2);
  assert.deepEqual(created[1], { url: `${origin}/cart`, active: false });
  ctl.abort();
  assert.equal((await next).code, codes.cancelled);
});

// A bridge port as Chrome hands it to the worker, for a top-frame document of a tab.
function fakePort(tabId, documentId, portOrigin) {
  const on = () => {
    const fns = [];
    return { addListener: (f) => fns.push(f), fire: (...a) => fns.forEach((f) => f(...a)) };
  };
  return {
    name: 'tabbridge-bridge',
    sender: { id: 'ext', tab: { id: tabId }, frameId: 0, documentId, origin: portOrigin },
    onMessage: on(),
    onDisconnect: on(),
    postMessage() {},
    disconnect() {},
  };
}

const tool = { name: 'search', description: 'Search the shop', inputSchema: { type: 'object' } };
const flush = () => new Promise((r) => setImmediate(r));

test('after a worker restart, documents that went away are forgotten; the live ones reconnect', async () => {
  session.clear();
  const ready = Promise.resolve();
  const before = new Pages({ log: quiet });
  for (const [tabId, documentId] of [[5, 'D5'], [6, 'D6']]) {
    const port = fakePort(tabId, documentId, origin);
    before.attach(port, ready);
    port.onMessage.fire({ type: 'announce', url: `${origin}/t${tabId}`, title: 'Shop', tools: [tool] });
  }
  await flush();
  assert.deepEqual(Object.keys(before.rec.docs).sort(), ['D5', 'D6']);

  // Chrome stops the worker (every port closes with it, unseen) and starts a new one. Tab 6 has
  // meanwhile navigated to another site, so its old document no longer answers.
  const after = new Pages({ log: quiet });
  await after.load();
  assert.deepEqual(Object.keys(after.rec.docs).sort(), ['D5', 'D6'], 'the record is restored');
  const asked = [];
  sendMessage = async (tabId, msg, opts) => {
    asked.push([tabId, msg.type, opts.documentId]);
    if (opts.documentId !== 'D5') throw new Error('Could not establish connection. Receiving end does not exist.');
    // The bridge reconnects and announces, as content/bridge.js does.
    const port = fakePort(5, 'D5', origin);
    after.attach(port, ready);
    port.onMessage.fire({ type: 'announce', url: `${origin}/t5`, title: 'Shop', tools: [tool] });
    return { ok: true };
  };
  let changes = 0;
  after.onChange = () => changes++;
  await after.recheck();
  await flush();
  assert.deepEqual(asked.sort(), [[5, 'connect', 'D5'], [6, 'connect', 'D6']]);
  assert.deepEqual(Object.keys(after.rec.docs), ['D5'], 'the gone document is forgotten');
  assert.ok(after.ports.has('D5'), 'the live one has a port again');
  assert.ok(changes > 0, 'the server link hears of the change');
  assert.deepEqual(Object.keys(session.get('pages').docs), ['D5'], 'and the stored record follows');
  assert.equal(after.tabInfo(6, 'https://other.example/'), null);
  assert.deepEqual(after.tabInfo(5, `${origin}/t5`).tools, ['search']);
});

test("the popup is not shown a document of another origin than the tab's address", () => {
  const pages = new Pages({ log: quiet });
  pages.rec.docs.D7 = { documentId: 'D7', tabId: 7, origin, url: `${origin}/`, title: 'Shop', tools: [tool], announcedAt: 1 };
  assert.equal(pages.tabInfo(7, 'https://other.example/page'), null, 'the tab has moved on; the old document is not yet known gone');
  assert.deepEqual(pages.tabInfo(7, `${origin}/cart`).tools, ['search']);
  assert.deepEqual(pages.tabInfo(7, undefined).tools, ['search'], 'no address known: the record is all there is');
});

test('a tab loaded before detection was on is told to reload; one with a bridge is not', async () => {
  const pages = new Pages({ log: quiet });
  const bridged = new Set([8]); // tab 8's page has the bridge (and no tools); tab 9's loaded before detection
  sendMessage = async (tabId, msg, opts) => {
    assert.deepEqual([msg, opts], [{ type: 'connect' }, { frameId: 0 }]);
    if (!bridged.has(tabId)) throw new Error('Could not establish connection. Receiving end does not exist.');
    return { ok: false };
  };
  assert.deepEqual(await pages.look(9, 'https://news.example/', true), { needsReload: true });
  assert.equal(await pages.look(8, 'https://news.example/', true), null, 'a page without tools is not asked to reload');
  assert.equal(await pages.look(9, 'https://news.example/', false), null, 'detection off: nothing to reload for');
  assert.equal(await pages.look(9, 'chrome://settings/', true), null, 'no scripts run there anyway');
  pages.rec.docs.D9 = { documentId: 'D9', tabId: 9, origin: 'https://news.example', url: 'https://news.example/', title: 'News', tools: [tool], announcedAt: 1 };
  assert.deepEqual((await pages.look(9, 'https://news.example/', true)).tools, ['search']);
});

// A reopened page's tools settle once it has loaded and announced nothing new for settleMs: a
// tool registered after load (but within the quiet time) is found; a page that settles without
// the tool fails the call at once, saying what it offers. The reopen goes to the tool's own page.
test('a reopen goes to the tool\'s own page and waits for its tools to settle', async () => {
  created.length = 0;
  createTab = async () => ({ id: 42 });
  tabStatus = 'loading';
  const pages = new Pages({ log: quiet, settleMs: 200 });
  pages.rec.addresses[origin] = { url: `${origin}/sniffer.html`, title: 'Shop', at: 1 };
  const ready = Promise.resolve();
  const notes = pages.call({ origin, tool: 'addNote', args: {}, timeoutMs: 60000, url: `${origin}/notes.html` });
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(created, [{ url: `${origin}/notes.html`, active: false }], 'the tool\'s own page, not the site\'s last address');
  const port = fakePort(42, 'doc-42', origin);
  port.posted = [];
  port.postMessage = (m) => port.posted.push(m);
  pages.attach(port, ready);
  port.onMessage.fire({ type: 'announce', url: `${origin}/notes.html`, title: 'Notes', tools: [{ name: 'search', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true }, kind: 'imperative' }] });
  chrome.tabs.onUpdated.fire(42, { status: 'complete' }, { id: 42 });
  await new Promise((r) => setTimeout(r, 100)); // a late registration, within the quiet time
  port.onMessage.fire({ type: 'announce', url: `${origin}/notes.html`, title: 'Notes', tools: [
    { name: 'search', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true }, kind: 'imperative' },
    { name: 'addNote', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: false }, kind: 'imperative' },
  ] });
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(port.posted.at(-1)?.tool, 'addNote', 'the late tool is found and called');
  port.onMessage.fire({ type: 'result', callId: port.posted.at(-1).callId, ok: true, result: { added: true } });
  assert.deepEqual(await notes, { ok: true, result: { added: true } });

  created.length = 0;
  tabStatus = 'complete';
  createTab = async () => ({ id: 43 });
  const started = Date.now();
  const gone = await pages.call({ origin, tool: 'removed', args: {}, timeoutMs: 60000, url: `${origin}/other.html` });
  assert.ok(Date.now() - started < 10000, 'not at the deadline');
  assert.equal(gone.code, codes.noTool);
  assert.match(gone.error, /other\.html was reopened .* no longer offers "removed"; it offers: no tools\. Nothing was run\./);
  assert.deepEqual(created, [{ url: `${origin}/other.html`, active: false }], 'an open page of the site without the tool is not the tool\'s page');

  // The tool's own page is open and no longer offers it: said at once, nothing reopened.
  created.length = 0;
  const here = await pages.call({ origin, tool: 'removed', args: {}, timeoutMs: 60000, url: `${origin}/notes.html#x` });
  assert.match(here.error, /The open tab of https:\/\/shop\.example\/notes\.html, the page that offered "removed", no longer offers the tool "removed"; it offers: addNote, search\./);
  assert.equal(created.length, 0);
});

// A form tool whose page navigated: the call is re-dispatched to a document that never announces
// (so the old page's going away does not fail it) and answered with the new page's first
// application/ld+json, read only on the site's own origin.
test('a navigating form is followed to the page it went to', async () => {
  const pages = new Pages({ log: quiet });
  const port = fakePort(7, 'doc-7', origin);
  port.posted = [];
  port.postMessage = (m) => port.posted.push(m);
  pages.attach(port, Promise.resolve());
  port.onMessage.fire({ type: 'announce', url: `${origin}/order`, title: 'Order', tools: [{ name: 'orderForm', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: false }, kind: 'declarative', autosubmit: true }] });
  await flush();
  const run = async (tabUrl, page) => {
    if (page) readPage = async ({ target }) => (target.tabId === 7 ? [{ result: page }] : []);
    const dispatched = [];
    const call = pages.call({ callId: 'call-1', origin, tool: 'orderForm', args: { item: 'tea' }, timeoutMs: 60000, onDispatch: (id) => dispatched.push(id) });
    await flush();
    port.onMessage.fire({ type: 'result', callId: 'call-1', ok: true, result: null, navigating: true });
    await flush();
    port.onDisconnect.fire(); // the old page is gone: it must not fail the call
    await flush();
    chrome.tabs.onUpdated.fire(7, { status: 'complete' }, { id: 7, url: tabUrl });
    const outcome = await call;
    return { outcome, dispatched };
  };
  let r = await run(`${origin}/ordered?item=tea`, { url: `${origin}/ordered?item=tea`, title: 'Ordered', jsonLd: '{"@type":"Order","orderedItem":"tea"}' });
  assert.deepEqual(r.dispatched, ['doc-7', 'following-call-1']);
  assert.deepEqual(r.outcome, { ok: true, result: { navigated: true, url: `${origin}/ordered?item=tea`, title: 'Ordered', result: { '@type': 'Order', orderedItem: 'tea' } } });

  pages.attach(port, Promise.resolve());
  port.onMessage.fire({ type: 'announce', url: `${origin}/order`, title: 'Order', tools: [{ name: 'orderForm', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: false }, kind: 'declarative', autosubmit: true }] });
  await flush();
  r = await run(`${origin}/thanks`, { url: `${origin}/thanks`, title: 'Thanks', jsonLd: null });
  assert.equal(r.outcome.result.navigated, true);
  assert.match(r.outcome.result.note, /no <script type="application\/ld\+json">/);

  pages.attach(port, Promise.resolve());
  port.onMessage.fire({ type: 'announce', url: `${origin}/order`, title: 'Order', tools: [{ name: 'orderForm', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: false }, kind: 'declarative', autosubmit: true }] });
  await flush();
  readPage = async () => assert.fail('a page of another origin is never read');
  r = await run('https://pay.example/checkout', null);
  assert.deepEqual(r.outcome.result, { navigated: true, url: 'https://pay.example', note: 'The form navigated to another site (https://pay.example); its page is not read.' });
});

test('a page address keeps a hash route and drops an anchor, as the server counts pages', () => {
  assert.equal(pageAddress('https://a.example/notes.html#top'), 'https://a.example/notes.html');
  assert.equal(pageAddress('https://a.example/app?x=1#/cart'), 'https://a.example/app?x=1#/cart');
  assert.equal(pageAddress('https://a.example/app#!/cart'), 'https://a.example/app#!/cart');
  assert.equal(pageAddress('https://a.example/app'), 'https://a.example/app');
});

// A page showing alert(), confirm() or prompt() runs nothing until the person answers: a call
// sent just before the dialog ends at once (it may run once they answer), and no call is sent
// while it is open.
test('a page blocked by a dialog gets no calls, and the one in transit ends at once', async () => {
  session.clear();
  const pages = new Pages({ log: quiet });
  const port = fakePort(8, 'doc-8', origin);
  port.posted = [];
  port.postMessage = (m) => port.posted.push(m);
  pages.attach(port, Promise.resolve());
  port.onMessage.fire({ type: 'announce', url: `${origin}/`, title: 'Shop', tools: [tool] });
  await flush();
  const inTransit = pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000 });
  await flush();
  assert.equal(port.posted.at(-1).type, 'call');
  port.onMessage.fire({ type: 'dialog', open: true, kind: 'confirm', text: 'Leave?' });
  await flush();
  const o = await inTransit;
  assert.equal(o.ok, false);
  assert.match(o.error, /opened a confirm\(\) dialog saying "Leave\?" just as the call was sent\..* may run once they do/);
  assert.equal(port.posted.at(-1).type, 'cancel', 'the page is told, once it runs again');

  const sent = port.posted.length;
  const blocked = await pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000 });
  assert.match(blocked.error, /shows a confirm\(\) dialog saying "Leave\?", waiting for the person .* the call was not sent/);
  assert.equal(port.posted.length, sent, 'nothing was posted');

  port.onMessage.fire({ type: 'dialog', open: false });
  await flush();
  const after = pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000 });
  await flush();
  port.onMessage.fire({ type: 'result', callId: port.posted.at(-1).callId, ok: true, result: 1 });
  assert.deepEqual(await after, { ok: true, result: 1 });
});

test('a frozen tab gets no calls, and the ones in flight end at once', async () => {
  session.clear();
  const pages = new Pages({ log: quiet });
  const port = fakePort(9, 'doc-9', origin);
  port.posted = [];
  port.postMessage = (m) => port.posted.push(m);
  pages.attach(port, Promise.resolve());
  port.onMessage.fire({ type: 'announce', url: `${origin}/`, title: 'Shop', tools: [tool] });
  await flush();
  const running = pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000 });
  await flush();
  port.onMessage.fire({ type: 'frozen', frozen: true });
  assert.match((await running).error, /Chrome froze the tab .* The call may have run/);
  assert.match((await pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000 })).error, /Chrome has frozen the tab .* the call was not sent/);
  port.onMessage.fire({ type: 'frozen', frozen: false });
  await flush();
  const after = pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000 });
  await flush();
  port.onMessage.fire({ type: 'result', callId: port.posted.at(-1).callId, ok: true, result: 2 });
  assert.deepEqual(await after, { ok: true, result: 2 });
});

// After a worker restart the worker asks a remembered document to reconnect; one that runs
// nothing (frozen, or showing a dialog) never answers. The call ends at its deadline, and the
// document is not forgotten: it is blocked, not gone.
test('a remembered document that never answers the reconnect ends the call at its deadline', async () => {
  session.clear();
  const pages = new Pages({ log: quiet });
  const port = fakePort(10, 'doc-10', origin);
  pages.attach(port, Promise.resolve());
  port.onMessage.fire({ type: 'announce', url: `${origin}/`, title: 'Shop', tools: [tool] });
  await flush();
  pages.ports.delete('doc-10'); // as after a restart: the record remains, the port does not
  sendMessage = () => new Promise(() => {});
  const started = Date.now();
  const o = await pages.call({ origin, tool: 'search', args: {}, timeoutMs: 300 });
  assert.ok(Date.now() - started < 5000);
  assert.equal(o.code, codes.timeout);
  assert.match(o.error, /may be frozen by Chrome or showing a dialog\. Nothing was sent to it\./);
  assert.ok(pages.rec.docs['doc-10'], 'the document is remembered');
  sendMessage = async () => {
    throw new Error('Could not establish connection. Receiving end does not exist.');
  };
});
