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

// A page the form went to that keeps its main thread (a dialog on load, a script that never
// yields) holds the injected read: the call ends at its deadline, said, not when the page lets go.
test('a navigating form whose page cannot be read ends at the deadline', async () => {
  const pages = new Pages({ log: quiet });
  const port = fakePort(8, 'doc-8', origin);
  pages.attach(port, Promise.resolve());
  port.onMessage.fire({ type: 'announce', url: `${origin}/order`, title: 'Order', tools: [{ name: 'orderForm', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: false }, kind: 'declarative', autosubmit: true }] });
  await flush();
  readPage = () => new Promise(() => {}); // never answers
  const started = Date.now();
  const call = pages.call({ callId: 'call-8', origin, tool: 'orderForm', args: { item: 'tea' }, timeoutMs: 300 });
  await flush();
  port.onMessage.fire({ type: 'result', callId: 'call-8', ok: true, result: null, navigating: true });
  await flush();
  chrome.tabs.onUpdated.fire(8, { status: 'complete' }, { id: 8, url: `${origin}/ordered` });
  const outcome = await call;
  assert.equal(outcome.ok, false);
  assert.equal(outcome.code, codes.timeout);
  assert.match(outcome.error, /^The form navigated to https:\/\/shop\.example\/ordered, but that page could not be read before the deadline/);
  assert.ok(Date.now() - started < 5000, 'at the deadline, not later');
});

// The tab is read by its id, so the read reaches whatever document the tab shows when the script
// runs, not the one whose address was checked: the site's page the form went to may send the tab
// on at once (to a payment provider, or, written to, to another site where the person is signed
// in). The real injected function runs here against the document the tab shows by then.
test('a navigating form whose page moved on to another site before the read is not read there', async () => {
  const pages = new Pages({ log: quiet });
  const port = fakePort(9, 'doc-9', origin);
  pages.attach(port, Promise.resolve());
  const form = { name: 'orderForm', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: false }, kind: 'declarative', autosubmit: true };
  // shows is the document in tab 9 when the script runs: its address and its JSON-LD.
  const inDocument = (shows) => async ({ target, func, args }) => {
    assert.equal(target.tabId, 9);
    const saved = { location: globalThis.location, document: globalThis.document };
    globalThis.location = new URL(shows.url);
    globalThis.document = { title: shows.title, querySelector: () => ({ textContent: shows.jsonLd }) };
    try {
      return [{ result: func(...(args ?? [])) }];
    } finally {
      Object.assign(globalThis, saved);
    }
  };
  const run = async (shows) => {
    port.onMessage.fire({ type: 'announce', url: `${origin}/order`, title: 'Order', tools: [form] });
    await flush();
    readPage = inDocument(shows);
    const call = pages.call({ callId: 'call-9', origin, tool: 'orderForm', args: { item: 'tea' }, timeoutMs: 60000 });
    await flush();
    port.onMessage.fire({ type: 'result', callId: 'call-9', ok: true, result: null, navigating: true });
    await flush();
    // Loaded on the site's own origin, as the tab said when it finished loading.
    chrome.tabs.onUpdated.fire(9, { status: 'complete' }, { id: 9, url: `${origin}/ordered?item=tea` });
    return call;
  };
  const moved = await run({ url: 'https://bank.example/account', title: 'Your account', jsonLd: '{"@type":"BankAccount","accountId":"DE89 3704"}' });
  assert.deepEqual(moved, { ok: true, result: { navigated: true, url: 'https://bank.example', note: 'The form navigated to another site (https://bank.example); its page is not read.' } });
  assert.doesNotMatch(JSON.stringify(moved), /DE89|Your account/);

  // Still on the site: read as before.
  const stayed = await run({ url: `${origin}/ordered?item=tea`, title: 'Ordered', jsonLd: '{"@type":"Order","orderedItem":"tea"}' });
  assert.deepEqual(stayed, { ok: true, result: { navigated: true, url: `${origin}/ordered?item=tea`, title: 'Ordered', result: { '@type': 'Order', orderedItem: 'tea' } } });

  // The document went away while the script ran (Chrome gives no result): said, never thrown.
  port.onMessage.fire({ type: 'announce', url: `${origin}/order`, title: 'Order', tools: [form] });
  await flush();
  readPage = async () => [{ result: undefined }];
  const call = pages.call({ callId: 'call-10', origin, tool: 'orderForm', args: { item: 'tea' }, timeoutMs: 60000 });
  await flush();
  port.onMessage.fire({ type: 'result', callId: 'call-10', ok: true, result: null, navigating: true });
  await flush();
  chrome.tabs.onUpdated.fire(9, { status: 'complete' }, { id: 9, url: `${origin}/ordered?item=tea` });
  const gone = await call;
  assert.equal(gone.ok, false);
  assert.equal(gone.code, codes.toolError);
  assert.match(gone.error, /went away before it could be read/);
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

// The gate: why the server let a call run. A call it let run without asking the person runs only
// in a document whose tool is still what the server checked (read-only; or, on a grant, not
// consequential); where the open pages offer it only otherwise, nothing runs.
const searchAs = (annotations, kind = 'imperative') => ({ name: 'search', description: 'd', inputSchema: { type: 'object' }, annotations, kind });
const write = searchAs({ readOnlyHint: false });
const readOnly = searchAs({ readOnlyHint: true });
const consequential = searchAs({ readOnlyHint: true, consequentialHint: true });

// openTab attaches a document of the site offering tools, its tab last used at used.
async function openTab(pages, tabId, tools, used) {
  const port = fakePort(tabId, `doc-${tabId}`, origin);
  port.posted = [];
  port.postMessage = (m) => port.posted.push(m);
  pages.attach(port, Promise.resolve());
  port.onMessage.fire({ type: 'announce', url: `${origin}/t${tabId}`, title: 'Shop', tools });
  await flush();
  pages.rec.tabUsed[tabId] = used;
  return port;
}

// runs starts a call and answers it from whichever port it reaches, naming the tab it ran in.
async function runs(pages, ports, c) {
  const call = pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000, ...c });
  await flush();
  const port = ports.find((p) => p.posted.at(-1)?.type === 'call' && !p.answered?.has(p.posted.at(-1).callId));
  if (!port) return call;
  const { callId } = port.posted.at(-1);
  (port.answered ??= new Set()).add(callId);
  port.onMessage.fire({ type: 'result', callId, ok: true, result: port.sender.tab.id });
  return call;
}

test('a read-only call skips a tab whose tool is now a write or consequential; asked and no gate run anywhere', async () => {
  session.clear();
  created.length = 0;
  const pages = new Pages({ log: quiet });
  const ports = [await openTab(pages, 21, [write], 30), await openTab(pages, 22, [readOnly], 10), await openTab(pages, 23, [consequential], 20)];
  assert.deepEqual(await runs(pages, ports, { gate: 'read-only' }), { ok: true, result: 22 }, 'the one tab still read-only, though used least recently');
  assert.deepEqual(await runs(pages, ports, { gate: 'grant' }), { ok: true, result: 21 }, 'a grant covers the write, not the consequential one');
  assert.deepEqual(await runs(pages, ports, { gate: 'asked' }), { ok: true, result: 21 }, 'the person approved it: the most recently used tab');
  assert.deepEqual(await runs(pages, ports, {}), { ok: true, result: 21 }, 'an older server: as before');
  pages.rec.tabUsed[23] = 40;
  assert.deepEqual(await runs(pages, ports, { gate: 'grant' }), { ok: true, result: 21 }, 'a consequential version is skipped even when most recent');
  assert.deepEqual(await runs(pages, ports, { gate: '' }), { ok: true, result: 23 });
  assert.equal(created.length, 0);
});

test('a call the open tabs offer only otherwise than the server let run fails tool_changed, nothing run or reopened', async () => {
  session.clear();
  created.length = 0;
  const pages = new Pages({ log: quiet });
  pages.rec.addresses[origin] = { url: `${origin}/cart`, title: 'Shop', at: 1 };
  const ports = [await openTab(pages, 31, [write], 2)];
  let o = await pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000, gate: 'read-only' });
  assert.deepEqual(o, { ok: false, code: 'tool_changed', error: 'The open tab of https://shop.example now offers "search" as a tool that changes something, but the server let this call run without asking the person because the tool was read-only when it checked the call. Nothing was run. Call getSiteToolDefinition to see the tool as it is now, then call again with a taskId, since it now needs the person\'s approval.' });
  ports.push(await openTab(pages, 32, [consequential], 1));
  o = await pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000, gate: 'read-only' });
  assert.equal(o.error, 'The open tabs of https://shop.example now offer "search" as a tool that changes something or a consequential tool, but the server let this call run without asking the person because the tool was read-only when it checked the call. Nothing was run. Call getSiteToolDefinition to see the tool as it is now, then call again with a taskId, since it now needs the person\'s approval.');
  // A declarative form is never read-only.
  ports.push(await openTab(pages, 33, [searchAs({ readOnlyHint: true }, 'declarative')], 3));
  assert.equal((await pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000, gate: 'read-only' })).code, codes.toolChanged);

  ports[0].onDisconnect.fire();
  ports[2].onDisconnect.fire();
  await flush();
  o = await pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000, gate: 'grant' });
  assert.deepEqual(o, { ok: false, code: 'tool_changed', error: 'The open tab of https://shop.example now offers "search" as a consequential tool, but the server let this call run without asking the person because of a standing grant when it checked the call, and a grant never covers a consequential tool. Nothing was run. Call getSiteToolDefinition to see the tool as it is now, then call again with a taskId, since it now needs the person\'s approval every time it runs.' });
  for (const p of ports) assert.deepEqual(p.posted, [], 'nothing was sent to any page');
  assert.equal(created.length, 0, 'nothing was reopened');
  assert.deepEqual(await runs(pages, ports, { gate: 'asked' }), { ok: true, result: 32 }, 'the person approved it as it is');
});

test('a reopened page offering the tool as a write fails a read-only call with tool_changed', async () => {
  session.clear();
  created.length = 0;
  tabStatus = 'loading';
  let next = 50;
  createTab = async () => ({ id: ++next });
  const pages = closedSite();
  const reopenAs = async (tools, gate) => {
    const call = pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000, gate });
    await flush();
    const port = fakePort(next, `doc-${next}`, origin);
    port.posted = [];
    port.postMessage = (m) => port.posted.push(m);
    pages.attach(port, Promise.resolve());
    port.onMessage.fire({ type: 'announce', url: `${origin}/cart`, title: 'Shop', tools });
    await flush();
    const sent = port.posted.at(-1);
    if (sent) port.onMessage.fire({ type: 'result', callId: sent.callId, ok: true, result: 'ran' });
    const o = await call;
    port.onDisconnect.fire(); // the tab is closed again
    await flush();
    return { o, posted: port.posted };
  };
  let r = await reopenAs([write], 'read-only');
  assert.deepEqual(r.o, { ok: false, code: 'tool_changed', error: 'https://shop.example/cart was reopened in a background tab, and it now offers "search" as a tool that changes something, but the server let this call run without asking the person because the tool was read-only when it checked the call. Nothing was run. Call getSiteToolDefinition to see the tool as it is now, then call again with a taskId, since it now needs the person\'s approval.' });
  assert.deepEqual(r.posted, [], 'nothing was sent to the page');
  r = await reopenAs([consequential], 'grant');
  assert.equal(r.o.code, codes.toolChanged);
  assert.match(r.o.error, /^https:\/\/shop\.example\/cart was reopened in a background tab, and it now offers "search" as a consequential tool, but .* because of a standing grant/);
  assert.deepEqual(r.posted, []);
  assert.deepEqual((await reopenAs([readOnly], 'read-only')).o, { ok: true, result: 'ran' });
  assert.deepEqual((await reopenAs([write], 'asked')).o, { ok: true, result: 'ran' });
  assert.deepEqual((await reopenAs([consequential], undefined)).o, { ok: true, result: 'ran' });
  assert.equal(created.length, 5);
});

// After a worker restart a remembered document reconnects and announces again before the call is
// sent: if its tool changed meanwhile, the call is not sent to it.
test('a remembered document that reconnects with the tool now a write gets no read-only call', async () => {
  session.clear();
  const pages = new Pages({ log: quiet });
  pages.rec.docs['doc-60'] = { documentId: 'doc-60', tabId: 60, origin, url: `${origin}/`, title: 'Shop', tools: [readOnly], announcedAt: 1 };
  let port;
  sendMessage = async (tabId, msg, opts) => {
    assert.deepEqual([tabId, msg.type, opts.documentId], [60, 'connect', 'doc-60']);
    port = fakePort(60, 'doc-60', origin);
    port.posted = [];
    port.postMessage = (m) => port.posted.push(m);
    pages.attach(port, Promise.resolve());
    port.onMessage.fire({ type: 'announce', url: `${origin}/`, title: 'Shop', tools: [write] });
    return { ok: true };
  };
  const o = await pages.call({ origin, tool: 'search', args: {}, timeoutMs: 60000, gate: 'read-only' });
  assert.equal(o.code, codes.toolChanged);
  assert.match(o.error, /^The open tab of https:\/\/shop\.example now offers "search" as a tool that changes something/);
  assert.deepEqual(port.posted, []);
  sendMessage = async () => {
    throw new Error('Could not establish connection. Receiving end does not exist.');
  };
});

// A reopened page settles on its own quiet: another tab announcing all the while (a page churning
// its tools, every 250 ms at most, or several busy tabs) must not hold it until the deadline.
test("another tab's announcements do not hold a reopened page's tools from settling", async () => {
  session.clear();
  created.length = 0;
  createTab = async () => ({ id: 70 });
  tabStatus = 'complete';
  const pages = closedSite();
  pages.settleMs = 100;
  const busy = fakePort(71, 'doc-71', 'https://busy.example');
  pages.attach(busy, Promise.resolve());
  const churn = setInterval(() => busy.onMessage.fire({ type: 'announce', url: 'https://busy.example/', title: 'Busy', tools: [{ ...tool, description: String(Math.random()) }] }), 30);
  try {
    const started = Date.now();
    const o = await pages.call({ origin, tool: 'search', args: {}, timeoutMs: 2000 });
    assert.equal(o.code, codes.noTool);
    assert.match(o.error, /once its tools settled it no longer offers "search"/, 'settled, not the deadline');
    assert.ok(Date.now() - started < 1500, `settled after ${Date.now() - started} ms`);
  } finally {
    clearInterval(churn);
  }
});

// A page whose announcement the worker refuses (its address made longer than 8192 characters with
// history.replaceState, say) is not known on its port, so its port's close returned early: the
// dialog or freeze it reported stayed in Pages.blocked for good, one entry per such document.
test('a page never announced leaves nothing behind in blocked when it goes', async () => {
  session.clear();
  const pages = new Pages({ log: quiet });
  for (let i = 0; i < 100; i++) {
    const port = fakePort(80, `doc-80-${i}`, origin);
    pages.attach(port, Promise.resolve());
    port.onMessage.fire({ type: 'announce', url: `${origin}/#${'x'.repeat(9000)}`, title: 'Shop', tools: [tool] });
    port.onMessage.fire({ type: 'dialog', open: true, kind: 'alert', text: 'x'.repeat(256) });
    port.onMessage.fire({ type: 'frozen', frozen: true });
    await flush();
    assert.equal(pages.rec.docs[`doc-80-${i}`], undefined, 'the announcement was refused');
    port.onDisconnect.fire();
    await flush();
  }
  assert.equal(pages.blocked.size, 0);
});
