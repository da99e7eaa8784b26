import test from 'node:test';
import assert from 'node:assert/strict';
import '../lib/messages.js';

const M = globalThis.TabbridgeMessages;
const good = { name: 'search', title: 'Search', description: 'Search the docs', inputSchema: { type: 'object', properties: { q: { type: 'string' } } }, annotations: { readOnlyHint: true } };
const page = (m) => JSON.stringify({ from: 'observer', ...m });

test('a good descriptor keeps only the fields an agent is shown', () => {
  const r = M.checkDescriptor({ ...good, execute: 'x', extra: 1 });
  assert.ok(r.ok);
  assert.deepEqual(r.msg, { name: 'search', title: 'Search', description: 'Search the docs', inputSchema: good.inputSchema, annotations: { readOnlyHint: true }, kind: 'imperative' });
});

test('every annotation the page gives is kept only as a real boolean, and a form carries none', () => {
  const r = M.checkDescriptor({ ...good, annotations: { readOnlyHint: true, consequentialHint: true, untrustedContentHint: 'yes' } });
  assert.deepEqual(r.msg.annotations, { readOnlyHint: true, consequentialHint: true });
  const f = M.checkDescriptor({ ...good, kind: 'declarative', autosubmit: 'yes', annotations: { readOnlyHint: true } });
  assert.deepEqual([f.msg.kind, f.msg.autosubmit, f.msg.annotations], ['declarative', false, { readOnlyHint: false }]);
  assert.match(M.checkDescriptor({ ...good, kind: 'magic' }).reason, /kind/);
});

test('an absent schema is an object and readOnlyHint must be a real boolean', () => {
  const r = M.checkDescriptor({ name: 'x', description: 'd', annotations: { readOnlyHint: 'yes' } });
  assert.deepEqual(r.msg.inputSchema, { type: 'object' });
  assert.equal(r.msg.annotations.readOnlyHint, false);
});

test('bad descriptors are refused with a reason', () => {
  const cases = [
    [null, /not an object/],
    [{ ...good, name: 'has space' }, /tool name/],
    [{ ...good, name: 'x'.repeat(129) }, /tool name/],
    [{ ...good, description: undefined }, /no description/],
    [{ ...good, description: 7 }, /description is not a string/],
    [{ ...good, title: 'a\nb' }, /title contains control/],
    [{ ...good, description: 'x'.repeat(9000) }, /description is over/],
    [{ ...good, inputSchema: [] }, /inputSchema/],
    [{ ...good, inputSchema: { type: 'object', default: NaN } }, /inputSchema/],
    [{ ...good, inputSchema: { f: () => 1 } }, /inputSchema/],
    [{ ...good, annotations: 'ro' }, /annotations/],
    [{ ...good, inputSchema: { enum: ['x'.repeat(70000)] } }, /descriptor is over/],
  ];
  for (const [d, reason] of cases) {
    const r = M.checkDescriptor(d);
    assert.equal(r.ok, false, JSON.stringify(d)?.slice(0, 80));
    assert.match(r.reason, reason);
  }
});

test('a tool list drops bad tools one by one, and those over the cap, and refuses duplicates whole', () => {
  const r = M.checkTools([good, { name: 'bad name', description: 'd' }]);
  assert.ok(r.ok);
  assert.deepEqual(r.msg.map((t) => t.name), ['search']);
  assert.deepEqual(r.refused, [{ name: 'bad name', reason: "the tool name must be 1 to 128 letters, digits, '_', '.' or '-'" }]);
  assert.match(M.checkTools([good, good]).reason, /twice/);
  assert.match(M.checkTools({}).reason, /not an array/);
  // A page with more tools than the cap shares the first 128 and is told of the rest.
  const many = M.checkTools(Array.from({ length: 130 }, (_, i) => ({ ...good, name: `t${i}` })));
  assert.deepEqual([many.ok, many.msg.length, many.msg.at(-1).name], [true, 128, 't127']);
  assert.deepEqual(many.refused.map((x) => x.name), ['t128', 't129']);
  assert.match(many.refused[0].reason, /at most 128 tools/);
  // So does one whose tools together are over the announcement's bytes.
  const big = (i) => ({ name: `b${i}`, description: 'd'.repeat(8000), inputSchema: { type: 'object', description: 'x'.repeat(50000) } });
  const heavy = M.checkTools(Array.from({ length: 25 }, (_, i) => big(i)));
  assert.ok(heavy.ok);
  assert.ok(heavy.msg.length >= 17 && heavy.msg.length < 25, `${heavy.msg.length} shared`);
  assert.ok(JSON.stringify(heavy.msg).length <= M.limits.maxMessageBytes - M.limits.announceRoomBytes);
  assert.deepEqual(heavy.refused.map((x) => x.name), Array.from({ length: 25 - heavy.msg.length }, (_, i) => `b${heavy.msg.length + i}`));
  assert.match(heavy.refused[0].reason, /at most 1015808 bytes together/);
});

test('jsonSafe accepts plain data only', () => {
  assert.ok(M.jsonSafe({ a: [1, 'x', null, true, { b: 2.5 }] }));
  for (const v of [undefined, () => 1, Symbol('s'), 1n, Infinity, new Date(), new Map(), { a: undefined }]) {
    assert.equal(M.jsonSafe(v), false, String(v));
  }
  const cycle = {};
  cycle.self = cycle;
  assert.equal(M.jsonSafe(cycle), false);
  let deep = {};
  for (let i = 0; i < 100; i++) deep = { deep };
  assert.equal(M.jsonSafe(deep), false);
});

test('page messages: tools and results are accepted, the bridge\'s own echo is ignored', () => {
  const tools = M.parsePageMessage(page({ type: 'tools', tools: [good] }));
  assert.deepEqual(tools.msg, { type: 'tools', tools: [M.checkDescriptor(good).msg] });
  assert.deepEqual(M.parsePageMessage(page({ type: 'result', callId: 'c-1', ok: true, result: { n: 1 } })).msg, { type: 'result', callId: 'c-1', ok: true, result: { n: 1 } });
  assert.deepEqual(M.parsePageMessage(page({ type: 'result', callId: 'c-1', ok: true })).msg.result, null);
  assert.deepEqual(M.parsePageMessage(page({ type: 'result', callId: 'c-1', ok: false, error: 'boom' })).msg, { type: 'result', callId: 'c-1', ok: false, error: 'boom' });
  assert.deepEqual(M.parsePageMessage(JSON.stringify({ from: 'bridge', type: 'call' })), { ok: true, msg: null });
});

test('malformed page messages are refused with a reason', () => {
  const cases = [
    [{ not: 'a string' }, /not a JSON string/],
    ['{', /not valid JSON/],
    ['[1]', /not an object/],
    [JSON.stringify({ type: 'tools', tools: [] }), /who sent it/],
    [page({ type: 'steal' }), /unknown message type/],
    [page({ type: 'tools', tools: 'all' }), /not an array/],
    [page({ type: 'result', callId: '../x', ok: true }), /callId/],
    [page({ type: 'result', callId: 'c', ok: 'yes' }), /neither ok/],
    [page({ type: 'result', callId: 'c', ok: false }), /neither ok/],
  ];
  for (const [detail, reason] of cases) {
    const r = M.parsePageMessage(detail);
    assert.equal(r.ok, false, String(detail).slice(0, 60));
    assert.match(r.reason, reason);
  }
});

test('worker messages: calls and cancels, nothing else', () => {
  assert.deepEqual(M.checkWorkerMessage({ type: 'call', callId: 'c1', tool: 'search', args: { q: 'x' }, extra: 1 }).msg, { type: 'call', callId: 'c1', tool: 'search', args: { q: 'x' } });
  assert.equal(M.checkWorkerMessage({ type: 'cancel', callId: 'c1' }).msg.reason, 'The call was cancelled.');
  assert.match(M.checkWorkerMessage({ type: 'call', callId: 'c1', tool: 'search', args: [1] }).reason, /arguments/);
  assert.match(M.checkWorkerMessage({ type: 'call', callId: 'c1', tool: 'a b', args: {} }).reason, /no valid tool/);
  assert.match(M.checkWorkerMessage({ type: 'call', tool: 'search', args: {} }).reason, /callId/);
  assert.match(M.checkWorkerMessage({ type: 'eval', callId: 'c1' }).reason, /unknown/);
  assert.match(M.checkWorkerMessage('call').reason, /not an object/);
});

test('bridge messages: an announcement must stay on the page\'s own origin', () => {
  const a = { type: 'announce', url: 'https://a.test/x?y#z', title: 'T', tools: [good] };
  const r = M.checkBridgeMessage(a, 'https://a.test');
  assert.ok(r.ok);
  assert.equal(r.msg.url, 'https://a.test/x?y#z');
  assert.match(M.checkBridgeMessage(a, 'https://b.test').reason, /not on the page's origin/);
  assert.match(M.checkBridgeMessage({ ...a, url: 'not a url' }, 'https://a.test').reason, /not a URL/);
  assert.match(M.checkBridgeMessage({ ...a, url: 5 }, 'https://a.test').reason, /no address/);
  assert.match(M.checkBridgeMessage({ ...a, tools: [good, good] }, 'https://a.test').reason, /twice/);
  assert.equal(M.checkBridgeMessage({ type: 'result', callId: 'c', ok: true, result: 1 }, 'https://a.test').msg.result, 1);
  assert.match(M.checkBridgeMessage({ type: 'hello' }, 'https://a.test').reason, /unknown/);
});

test('a result over 256 KiB becomes result_too_large with its size, at any size', () => {
  for (const n of [300 << 10, 2 << 20]) {
    const r = M.parsePageMessage(page({ type: 'result', callId: 'c', ok: true, result: 'x'.repeat(n) }));
    assert.equal(r.ok, true);
    assert.deepEqual({ ...r.msg, error: undefined }, { type: 'result', callId: 'c', ok: false, code: 'result_too_large', size: n, error: undefined });
    assert.match(r.msg.error, new RegExp(`${n} bytes; at most 262144`));
    // The bridge forwards it; the worker accepts it with the same code and size.
    const w = M.checkBridgeMessage({ type: 'result', callId: 'c', ok: false, code: 'result_too_large', size: n, error: 'x' }, 'https://a.example');
    assert.equal(w.msg.code, 'result_too_large');
    assert.equal(w.msg.size, n);
  }
  // The cap is on the result as the page returned it: a string's UTF-8 bytes, not its JSON quotes
  // (issue 11, item 8); any other value's JSON text.
  for (const result of ['x'.repeat(256 << 10), '\n'.repeat(256 << 10), '\u0001'.repeat(256 << 10), ['y'.repeat((256 << 10) - 4)]]) {
    const r = M.parsePageMessage(page({ type: 'result', callId: 'c', ok: true, result }));
    assert.equal(r.msg.ok, true, `a result of exactly 256 KiB was refused: ${r.msg.error}`);
    assert.deepEqual(r.msg.result, result);
  }
  assert.equal(M.parsePageMessage(page({ type: 'result', callId: 'c', ok: true, result: 'x'.repeat(256 << 10) + 'é' })).msg.size, (256 << 10) + 2);
  assert.equal(M.parsePageMessage(page({ type: 'result', callId: 'c', ok: true, result: ['y'.repeat((256 << 10) - 3)] })).msg.size, (256 << 10) + 1);
  // A page cannot make another failure look like one with a code.
  const forged = M.checkBridgeMessage({ type: 'result', callId: 'c', ok: false, code: 'page_gone', error: 'x' }, 'https://a.example');
  assert.equal(forged.msg.code, undefined);
});

test('a dialog message says its kind when it opens, and is checked on both hops', () => {
  const page = (m) => M.parsePageMessage(JSON.stringify({ from: 'observer', type: 'dialog', ...m }));
  assert.deepEqual(page({ open: true, kind: 'prompt', text: 'x'.repeat(300) }).msg, { type: 'dialog', open: true, kind: 'prompt', text: 'x'.repeat(256) });
  assert.deepEqual(page({ open: false, kind: 'ignored' }).msg, { type: 'dialog', open: false });
  assert.equal(page({ open: true, kind: 'print' }).ok, false);
  assert.equal(page({ open: 'yes', kind: 'alert' }).ok, false);
  assert.deepEqual(M.checkBridgeMessage({ type: 'dialog', open: true, kind: 'alert', text: 7 }, 'https://a.example').msg, { type: 'dialog', open: true, kind: 'alert', text: '' });
});

// Whatever the bridge refuses of a result it still names the call, so the bridge fails it at once
// instead of leaving it to its deadline; a failure of any length is taken, its text cut.
test('a result the bridge refuses names its call; a failure of any length is taken, cut', () => {
  const long = M.parsePageMessage(page({ type: 'result', callId: 'c1', ok: false, error: 'e'.repeat(2 << 20) }));
  assert.equal(long.ok, true, long.reason);
  assert.deepEqual(long.msg, { type: 'result', callId: 'c1', ok: false, error: 'e'.repeat(M.limits.maxErrorChars) });
  const odd = M.parsePageMessage(page({ type: 'result', callId: 'c3', ok: 'yes' }));
  assert.deepEqual([odd.ok, odd.callId], [false, 'c3']);
  assert.equal(M.parsePageMessage(page({ type: 'result', callId: 'bad id!', ok: 'yes' })).callId, undefined);
});
