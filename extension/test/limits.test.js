import test from 'node:test';
import assert from 'node:assert/strict';

// A bridge's world (a content script) has no socket: it reads the last welcome's limits from
// storage.local, where the worker keeps them, and follows their changes.
const local = new Map([['limits', { maxToolsPerSite: 1, maxResultBytes: 5 }]]);
const listeners = [];
globalThis.chrome = {
  storage: {
    local: { get: async (key) => (local.has(key) ? { [key]: local.get(key) } : {}), set: async () => {} },
    onChanged: { addListener: (f) => listeners.push(f) },
  },
};
await import('../lib/messages.js');
const M = globalThis.TabbridgeMessages;
const flush = () => new Promise((r) => setImmediate(r));
const tool = (name) => ({ name, description: 'd' });

test("the bridge checks with the server's limits once storage has answered", async () => {
  await flush();
  assert.equal(M.limits.maxToolsPerSite, 1);
  const capped = M.checkTools([tool('a'), tool('b')]);
  assert.deepEqual(capped.msg.map((t) => t.name), ['a'], 'a page over the cap still shares the first tools');
  assert.match(capped.refused[0].reason, /at most 1 tools/);
  assert.equal(M.checkOutcome({ callId: 'c1', ok: true, result: 'x'.repeat(6) }).msg.code, 'result_too_large');
  // Another server's welcome: the worker changes what is kept, and every bridge follows.
  for (const f of listeners) f({ limits: { newValue: { maxToolsPerSite: 3 } } }, 'local');
  assert.equal(M.limits.maxToolsPerSite, 3);
  assert.equal(M.limits.maxResultBytes, M.defaults.maxResultBytes, 'one the server did not send is the default');
  for (const f of listeners) f({ limits: { newValue: { maxToolsPerSite: 9 } } }, 'session');
  assert.equal(M.limits.maxToolsPerSite, 3, 'only storage.local holds them');
});
