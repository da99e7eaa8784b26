import test from 'node:test';
import assert from 'node:assert/strict';

// The worker itself, with chrome faked: every event takes listeners and ignores them, storage is
// in memory, the server does not answer. Only the badge and notifications are watched.
const event = () => ({ addListener() {} });
const area = (m) => ({
  get: async (key) => (m.has(key) ? { [key]: m.get(key) } : {}),
  set: async (obj) => Object.entries(obj).forEach(([k, v]) => m.set(k, v)),
});
const badge = [];
const shown = new Map();
const log = [];
globalThis.self = globalThis;
globalThis.chrome = {
  runtime: { id: 'ext', onConnect: event(), onMessage: event(), onInstalled: event(), onStartup: event(), getURL: (p) => `chrome-extension://ext/${p}`, getPlatformInfo: async () => ({ os: 'linux' }), getManifest: () => ({ version: '0.1.0' }) },
  storage: { local: area(new Map()), session: area(new Map()), onChanged: event() },
  alarms: { create: async () => {}, onAlarm: event() },
  action: { setBadgeText: async ({ text }) => badge.push(text) },
  notifications: {
    onClicked: event(),
    create: async (id, opts) => {
      log.push(`create ${id}`);
      shown.set(id, opts);
    },
    clear: async (id) => {
      log.push(`clear ${id}`);
      return shown.delete(id);
    },
    update: async (id) => shown.has(id),
    getAll: async () => Object.fromEntries([...shown.keys()].map((id) => [id, true])),
  },
  tabs: { onActivated: event(), onRemoved: event(), onUpdated: event(), sendMessage: async () => {} },
  windows: { onFocusChanged: event(), WINDOW_ID_NONE: -1 },
  permissions: { onAdded: event(), onRemoved: event(), contains: async () => false, getAll: async () => ({ origins: [] }) },
  scripting: { getRegisteredContentScripts: async () => [], unregisterContentScripts: async () => {} },
  commands: { onCommand: event() },
};
globalThis.fetch = async () => ({ status: 401, ok: false, json: async () => ({ error: { code: 'signed_out' } }), clone() { return this; } });

// The worker as the end-to-end tests start it: sw.js under the test hook.
await import('../testhook.js');
const t = globalThis.__tabbridgeTest;
await t.ready();

const settled = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};
const req = (id) => ({ id, tool: 'buy', site: 'https://shop.example' });

test('the badge counts waiting requests; one notification shows them (lib/notify.js collapses a burst)', async () => {
  t.showApprovals({ type: 'approvals', pending: 1, event: 'approval.created', request: req('r1') });
  t.showApprovals({ type: 'approvals', pending: 2, event: 'approval.created', request: req('r2') }); // within the window
  await settled();
  assert.deepEqual([...shown.keys()], ['approval-r1']);
  shown.set('other', true); // not ours to clear
  // The worker was away while both were answered; the welcome's count carries no request.
  t.showApprovals({ type: 'approvals', pending: 0, event: '', request: { id: '', tool: '', site: '' } });
  await settled();
  assert.deepEqual([...shown.keys()], ['other']);
  assert.equal(badge.at(-1), '');
  // A count with requests still waiting and no request named leaves the notifications alone.
  log.length = 0;
  t.showApprovals({ type: 'approvals', pending: 1, event: '' });
  await settled();
  assert.deepEqual(log, []);
  assert.equal(badge.at(-1), '1');
});

test('the badge is cleared when the count is no longer known', async () => {
  const { link } = t;
  t.showApprovals({ type: 'approvals', pending: 3, event: '', request: { id: '', tool: '', site: '' } });
  assert.equal(badge.at(-1), '3');
  link.kick({ forget: true }); // the server address changed
  assert.equal(badge.at(-1), '');
  t.showApprovals({ type: 'approvals', pending: 3, event: '', request: { id: '', tool: '', site: '' } });
  await settled(); // the ticket finds the person signed out
  assert.equal(link.state, 'signed-out');
  assert.equal(badge.at(-1), '');
  link.teardown();
});
