import test from 'node:test';
import assert from 'node:assert/strict';
import { checkServerMessage, parseFrame, MAX_SERVER_FRAME, plan, openSites, resultMessage, retryable, hello, browserName, clockOffset, callTimeout } from '../lib/protocol.js';

const M = globalThis.TabbridgeMessages;
const MAX_RESULT_BYTES = M.defaults.maxResultBytes;

const site = { id: 's1', origin: 'https://shop.example', workspaceId: 'w1', workspaceName: 'Work' };

test('welcome and sites keep only checked shared sites', () => {
  const r = checkServerMessage({ type: 'welcome', id: 'h1', protocol: 1, name: 'Laptop', sharedSites: [site], limits: { pingSeconds: 20 }, extra: 1 });
  assert.equal(r.ok, true);
  assert.deepEqual(r.msg, { type: 'welcome', name: 'Laptop', sharedSites: [site], pingMs: 20000, limits: M.defaults });
  assert.equal(checkServerMessage({ type: 'welcome', protocol: 2, sharedSites: [] }).ok, false);
  assert.equal(checkServerMessage({ type: 'welcome', protocol: 1, sharedSites: [{ ...site, origin: 'javascript:alert(1)' }] }).ok, false);
  assert.equal(checkServerMessage({ type: 'sites', sharedSites: 'all' }).ok, false);
  assert.deepEqual(checkServerMessage({ type: 'sites', sharedSites: [] }).msg, { type: 'sites', sharedSites: [] });
  // A ping interval out of range falls back to 20 s.
  assert.equal(checkServerMessage({ type: 'welcome', protocol: 1, sharedSites: [], limits: { pingSeconds: 0 } }).msg.pingMs, 20000);
});

test("the welcome's limits are the server's; one missing or not a sensible number is the default", () => {
  const sent = { maxResultBytes: 1000, maxMessageBytes: 8192, callTimeoutMs: 1500, maxToolsPerSite: 2, maxDescriptorBytes: 4096, maxAnnouncementBytes: 8192, maxTitleBytes: 16, maxDescriptionBytes: 64, pingSeconds: 20, newerLimit: 7 };
  const { limits } = checkServerMessage({ type: 'welcome', protocol: 1, sharedSites: [], limits: sent }).msg;
  const { pingSeconds, newerLimit, ...kept } = sent;
  assert.deepEqual(limits, kept);
  // An older server's welcome without them, or nonsense, leaves protocol 1's values.
  assert.deepEqual(checkServerMessage({ type: 'welcome', protocol: 1, sharedSites: [] }).msg.limits, M.defaults);
  for (const bad of [0, -1, 1.5, '1000', 2 ** 31, null]) {
    assert.equal(checkServerMessage({ type: 'welcome', protocol: 1, sharedSites: [], limits: { maxResultBytes: bad } }).msg.limits.maxResultBytes, 256 << 10, String(bad));
  }
  // The result cap and the frame bound are the welcome's.
  assert.equal(resultMessage('c1', { ok: true, result: 'x'.repeat(1000) }, limits).ok, true);
  const m = resultMessage('c1', { ok: true, result: 'x'.repeat(1001) }, limits);
  assert.deepEqual([m.error.code, m.error.size, m.error.message], ['result_too_large', 1001, "The page's result is 1001 bytes; at most 1000 are allowed."]);
  assert.equal(resultMessage('c1', { ok: true, result: '\u0001'.repeat(700) }, limits).error.size, 6 * 700 + 2, 'over the frame once escaped');
  // A call runs at most the server's call timeout.
  assert.equal(callTimeout(1e12, 0, 0, limits.callTimeoutMs), 1500);
  assert.equal(callTimeout(100000, 160000, null, limits.callTimeoutMs), 1500);
});

test('a call must name an origin, a tool, object arguments and a deadline', () => {
  const good = { type: 'call', id: '01a2', site: 'https://shop.example', tool: 'search', arguments: { q: 'tea' }, documentId: 'ABC', url: 'https://shop.example/cart', deadline: 1e12 };
  assert.deepEqual(checkServerMessage(good).msg, { type: 'call', callId: '01a2', site: 'https://shop.example', tool: 'search', args: { q: 'tea' }, url: 'https://shop.example/cart', documentId: 'ABC', deadline: 1e12, gate: '' });
  for (const bad of [
    { id: '' }, { site: 'https://shop.example/path' }, { site: 'file:///etc' }, { tool: 'no spaces' },
    { arguments: [1] }, { arguments: null }, { deadline: 'soon' }, { id: 'x'.repeat(65) },
  ]) {
    assert.equal(checkServerMessage({ ...good, ...bad }).ok, false, JSON.stringify(bad));
  }
  // A url on another origin is not used to reopen the site.
  assert.equal(checkServerMessage({ ...good, url: 'https://evil.example/' }).msg.url, '');
});

// gate says why the server let the call run; the worker runs it only where the tool still fits
// (lib/tabs.js). A gate it does not know is refused, and answered, rather than run by name.
test("a call's gate is read-only, grant, asked or none; any other is refused with the call's id", () => {
  const call = { type: 'call', id: 'c7', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: 1e12 };
  for (const gate of ['read-only', 'grant', 'asked', '']) {
    assert.equal(checkServerMessage({ ...call, gate }).msg.gate, gate);
  }
  assert.equal(checkServerMessage(call).msg.gate, '', 'an older server sends none');
  for (const gate of ['always', 'READ-ONLY', 'read-only ', 1, true, null, {}, ['asked']]) {
    const r = checkServerMessage({ ...call, gate });
    assert.deepEqual(r, { ok: false, reason: 'call: gate is not "read-only", "grant" or "asked"', callId: 'c7' }, JSON.stringify(gate));
  }
  assert.deepEqual(parseFrame(JSON.stringify({ ...call, gate: 'trusted' })).callId, 'c7');
});

test('cancel, approvals and errors are checked; unknown types are refused', () => {
  assert.deepEqual(checkServerMessage({ type: 'call.cancel', callId: 'c1', reason: 'timeout' }).msg, { type: 'call.cancel', callId: 'c1', reason: 'timeout' });
  assert.equal(checkServerMessage({ type: 'call.cancel' }).ok, false);
  const a = checkServerMessage({ type: 'approvals', pending: 2, event: 'approval.created', request: { id: 'r1', tool: 'buy', site: 'https://shop.example' } });
  assert.deepEqual(a.msg, { type: 'approvals', pending: 2, event: 'approval.created', request: { id: 'r1', tool: 'buy', site: 'https://shop.example' } });
  assert.equal(checkServerMessage({ type: 'approvals', pending: -1 }).ok, false);
  assert.equal(checkServerMessage({ type: 'error', code: 'x', message: 'y', ref: 'z' }).ok, true);
  assert.equal(checkServerMessage({ type: 'launch' }).ok, false);
  assert.equal(checkServerMessage([]).ok, false);
  assert.equal(parseFrame('{not json').ok, false);
  assert.equal(parseFrame(new ArrayBuffer(2)).ok, false);
  // The largest call the server sends, 1 MiB of arguments in its envelope, is read.
  const big = JSON.stringify({ type: 'call', id: 'c1', site: 'https://shop.example', tool: 'note', arguments: { text: 'x'.repeat(1 << 20) }, deadline: 1 });
  assert.equal(parseFrame(big).ok, true);
  assert.equal(parseFrame('"' + 'x'.repeat(MAX_SERVER_FRAME) + '"').ok, false);
  // A call refused for its fields names itself, so it can be answered.
  assert.equal(checkServerMessage({ type: 'call', id: 'c9', site: 'nope', tool: 'x', arguments: {}, deadline: 1 }).callId, 'c9');
});

test("the server's clock: pong time, offset from one ping, bounded call timeouts", () => {
  assert.deepEqual(checkServerMessage({ type: 'pong', id: 'p3', time: 1767225600123 }).msg, { type: 'pong', id: 'p3', time: 1767225600123 });
  assert.deepEqual(checkServerMessage({ type: 'pong', time: 'noon' }).msg, { type: 'pong', id: '', time: null });
  // Sent at 1000 and answered at 1200 by a server whose clock read 61100: it is 60 s ahead.
  assert.equal(clockOffset(1000, 1200, 61100), 60000);
  assert.equal(clockOffset(1000, 20000, 61100), null, 'an answer 19 s late says too little');
  assert.equal(clockOffset(1000, 900, 61100), null, 'the clock went back meanwhile');
  assert.equal(clockOffset(1000, 1200, null), null);
  assert.equal(callTimeout(100000, 50000, 0), 50000);
  assert.equal(callTimeout(100000, 110000, -60000), 50000, 'a browser clock 60 s fast');
  assert.equal(callTimeout(100000, 99900, 0), 1000, 'at least a second');
  assert.equal(callTimeout(1e12, 0, 0), 60000, 'at most the longest call');
  assert.equal(callTimeout(100000, 50000, null), 50000, 'no offset yet, a time left that makes sense');
  assert.equal(callTimeout(100000, 160000, null), 60000, 'no offset yet and the deadline looks past: the clocks disagree');
});

const doc = (id, origin, tools, url = `${origin}/`) => ({ documentId: id, tabId: 1, origin, url, title: 'T', tools, announcedAt: 1 });
const tool = (name) => ({ name, description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: false } });

test('plan announces shared documents once, again on change, and says gone', () => {
  const shared = new Set(['https://shop.example']);
  let docs = { d1: doc('d1', 'https://shop.example', [tool('a')]), d2: doc('d2', 'https://other.example', [tool('b')]), d3: doc('d3', 'https://shop.example', []) };
  let r = plan(new Map(), docs, shared, { 1: 42 });
  assert.deepEqual(r.messages.map((m) => [m.type, m.documentId, m.lastUsed]), [['tools.announce', 'd1', 42]]);
  const sent = r.sent;
  // Nothing changed: nothing to send.
  assert.deepEqual(plan(sent, docs, shared).messages, []);
  // The page withdrew its tool: the empty list replaces the old one.
  docs = { ...docs, d1: doc('d1', 'https://shop.example', []) };
  r = plan(sent, docs, shared);
  assert.deepEqual(r.messages.map((m) => [m.type, m.documentId, m.tools.length]), [['tools.announce', 'd1', 0]]);
  // The document unloaded: gone.
  const { d1, ...rest } = docs;
  r = plan(r.sent, rest, shared);
  assert.deepEqual(r.messages, [{ type: 'document.gone', documentId: 'd1' }]);
  assert.equal(r.sent.size, 0);
});

// A frame over the server's maxMessageBytes closes the socket with 1009, which the extension does not
// dial again after: one page whose tools fill their share, at a long address, would cut every
// shared site off. What a page announces is bounded so that its whole announcement still fits.
test("a page's tools that fill their share, at its longest address, still fit one frame the server reads", () => {
  const origin = 'https://shop.example';
  const url = `${origin}/?${'q\\'.repeat(4000)}`.slice(0, M.limits.maxUrlChars); // a backslash is two bytes in JSON
  const title = '\u0001'.repeat(400);
  const tool = (i, n) => ({ name: `heavy${i}`, description: 'd', inputSchema: { type: 'object', description: 'x'.repeat(n) } });
  const tools = Array.from({ length: 20 }, (_, i) => tool(i, 50000));
  const used = new TextEncoder().encode(JSON.stringify(M.checkTools(tools).msg)).length;
  tools.push(tool(20, M.limits.maxAnnouncementBytes - used - 200)); // the list just under its share
  const page = M.checkBridgeMessage({ type: 'announce', url, title, tools }, origin);
  assert.equal(page.ok, true, page.reason);
  assert.ok(page.msg.tools.length >= 19, `${page.msg.tools.length} tools shared`);
  const docs = { d1: { documentId: 'D'.repeat(32), tabId: 2 ** 31 - 1, origin, url: page.msg.url, title: page.msg.title, tools: page.msg.tools } };
  const [m] = plan(new Map(), docs, new Set([origin]), { [2 ** 31 - 1]: Date.now() }).messages;
  const frame = new TextEncoder().encode(JSON.stringify({ ...m, id: 'a-999999999' })).length;
  assert.ok(frame <= M.limits.maxMessageBytes, `the announcement is ${frame} bytes; the server reads at most ${M.limits.maxMessageBytes}`);
});

test('plan: a newly shared site is announced, an unshared one is dropped in silence', () => {
  const docs = { d2: doc('d2', 'https://other.example', [tool('b')]) };
  let r = plan(new Map(), docs, new Set());
  assert.deepEqual(r.messages, []);
  r = plan(r.sent, docs, new Set(['https://other.example']));
  assert.equal(r.messages.length, 1);
  r = plan(r.sent, docs, new Set());
  assert.deepEqual(r.messages, []);
  assert.equal(r.sent.size, 0);
});

test('results: the page\'s own value, errors with their code, too large refused with its size', () => {
  assert.deepEqual(resultMessage('c1', { ok: true, result: { n: 1 } }), { type: 'call.result', callId: 'c1', ok: true, result: { n: 1 } });
  assert.deepEqual(resultMessage('c1', { ok: true }), { type: 'call.result', callId: 'c1', ok: true, result: null });
  assert.deepEqual(resultMessage('c1', { ok: false, code: 'tool_error', error: 'Out of stock' }), { type: 'call.result', callId: 'c1', ok: false, error: { code: 'tool_error', message: 'Out of stock' } });
  // The cap is on the result as the page returned it: a string's own bytes, not its JSON quotes
  // (issue 11, item 8), and any other value's JSON text.
  const exact = 'x'.repeat(MAX_RESULT_BYTES);
  assert.deepEqual(resultMessage('c1', { ok: true, result: exact }), { type: 'call.result', callId: 'c1', ok: true, result: exact });
  assert.equal(resultMessage('c1', { ok: true, result: '\n'.repeat(MAX_RESULT_BYTES) }).ok, true);
  assert.equal(resultMessage('c1', { ok: true, result: ['y'.repeat(MAX_RESULT_BYTES - 4)] }).ok, true);
  const m = resultMessage('c1', { ok: true, result: exact + 'é' });
  assert.equal(m.ok, false);
  assert.equal(m.error.code, 'result_too_large');
  assert.equal(m.error.size, MAX_RESULT_BYTES + 2);
  assert.equal(resultMessage('c1', { ok: true, result: ['y'.repeat(MAX_RESULT_BYTES - 3)] }).error.size, MAX_RESULT_BYTES + 1);
  // Within the cap but too long for one frame once escaped: refused with that length, so the
  // server never closes the socket over it.
  const ctl = resultMessage('c1', { ok: true, result: '\u0001'.repeat(MAX_RESULT_BYTES) });
  assert.equal(ctl.error.code, 'result_too_large');
  assert.equal(ctl.error.size, 6 * MAX_RESULT_BYTES + 2);
  // Multi-byte text counts in bytes.
  assert.equal(resultMessage('c1', { ok: true, result: 'é'.repeat(MAX_RESULT_BYTES / 2 + 1) }).error.code, 'result_too_large');
  assert.equal(resultMessage('c1', { ok: true, result: 'é'.repeat(MAX_RESULT_BYTES / 2) }).ok, true);
});

test('hello, names and close codes', () => {
  assert.deepEqual(hello({ browserId: 'b-12345678', name: 'Chrome on Linux', version: '0.1.0' }),
    { type: 'hello', id: 'h1', protocol: 1, minProtocol: 1, browserId: 'b-12345678', name: 'Chrome on Linux', version: '0.1.0' });
  assert.equal(browserName('mac'), 'Chrome on macOS');
  assert.equal(browserName('zz'), 'Chrome on this computer');
  assert.equal(retryable(1006), true);
  assert.equal(retryable(1001), true);
  assert.equal(retryable(4001), false);
  assert.equal(retryable(4000), false);
});

test('openSites counts tabs per shared origin with their last use', () => {
  const docs = {
    a: { ...doc('a', 'https://shop.example', [tool('x')]), tabId: 1 },
    b: { ...doc('b', 'https://shop.example', []), tabId: 2 },
    c: { ...doc('c', 'https://shop.example', [tool('x')]), tabId: 2 },
    d: { ...doc('d', 'https://other.example', [tool('x')]), tabId: 3 },
  };
  assert.deepEqual(openSites(docs, new Set(['https://shop.example']), { 1: 10, 2: 20, 3: 30 }), [{ origin: 'https://shop.example', lastUsed: 20, tabs: 2 }]);
  assert.deepEqual(openSites(docs, new Set()), []);
});

test("tools.accepted keeps the server's refusals, for the page's console", () => {
  const m = checkServerMessage({ type: 'tools.accepted', ref: 'a-1', documentId: 'DOC', accepted: ['a'], refused: [{ tool: 'b', reason: 'its schema is not an object' }, { tool: 7 }, 'x'] }).msg;
  assert.deepEqual(m, { type: 'tools.accepted', documentId: 'DOC', refused: [{ tool: 'b', reason: 'its schema is not an object' }] });
  assert.deepEqual(checkServerMessage({ type: 'tools.accepted' }).msg, { type: 'tools.accepted', documentId: '', refused: [] });
  // A refused name has no tool: its reason still reaches the console.
  const unnamed = checkServerMessage({ type: 'tools.accepted', documentId: 'DOC', refused: [{ reason: 'the tool name "bad name!" is not allowed' }, { tool: null, reason: 'x' }] }).msg;
  assert.deepEqual(unnamed.refused, [{ tool: '', reason: 'the tool name "bad name!" is not allowed' }]);
});

// The bridge takes a call only with an id of 1 to 64 letters, digits, '_' or '-' (it names the
// call to the page in that form), and it cannot answer a call it cannot name: such a call would
// run to the page and wait out its deadline unheard. So the worker refuses it first, answered.
test("a call id the bridge could not name is refused with the id, so it is answered at once", () => {
  const call = { type: 'call', site: 'https://shop.example', tool: 'search', arguments: {}, deadline: 1e12 };
  for (const id of ['01a2.5', 'call:1', 'a b', 'tea\u00e9', 'x/y']) {
    assert.equal(M.checkCallId(id), false, id);
    const r = checkServerMessage({ ...call, id });
    assert.equal(r.ok, false, id);
    assert.equal(r.callId, id, 'named, so the link answers it');
  }
  for (const id of ['01a2', '0193b0a4-7c1e-7f00-8000-000000000000', 'A_b-9']) {
    assert.equal(checkServerMessage({ ...call, id }).ok, true, id);
  }
});
