import test from 'node:test';
import assert from 'node:assert/strict';
import { ApprovalNotices, COLLAPSE_MS, MANY_ID } from '../lib/notify.js';

// A fake chrome.notifications that records every change, a clock the test moves, and timers that
// fire when the test says.
function world() {
  const shown = new Map();
  const log = [];
  const timers = [];
  let now = 1_000_000;
  const notifications = {
    create: async (id, opts) => {
      log.push(`create ${id}: ${opts.message}`);
      shown.set(id, opts);
    },
    update: async (id, opts) => {
      if (!shown.has(id)) return false;
      log.push(`update ${id}: ${opts.message}`);
      Object.assign(shown.get(id), opts);
      return true;
    },
    clear: async (id) => {
      if (shown.delete(id)) log.push(`clear ${id}`);
      return true;
    },
    getAll: async () => Object.fromEntries([...shown.keys()].map((id) => [id, true])),
  };
  const n = new ApprovalNotices({
    notifications,
    now: () => now,
    setTimer: (f, ms) => {
      const t = { f, at: now + ms };
      timers.push(t);
      return t;
    },
    clearTimer: (t) => timers.splice(timers.indexOf(t), 1),
  });
  // advance moves the clock by ms, firing the timers that come due.
  const advance = async (ms) => {
    now += ms;
    for (const t of timers.filter((t) => t.at <= now)) {
      timers.splice(timers.indexOf(t), 1);
      t.f();
    }
    await n.chain;
  };
  return { n, shown, log, timers, advance };
}

const req = (i) => ({ id: `r${i}`, tool: 'buy', site: 'https://shop.example' });
const created = (i, pending) => ({ type: 'approvals', pending, event: 'approval.created', request: req(i) });

test('a burst of requests is one notification: "12 requests waiting"', async () => {
  const { n, shown, log, timers, advance } = world();
  // The first request of a quiet spell is shown at once, by name.
  await n.show(created(1, 1));
  assert.deepEqual(log, ['create approval-r1: buy on https://shop.example waits for your answer.']);
  // Eleven more within the window change nothing yet...
  for (let i = 2; i <= 12; i++) await n.show(created(i, i));
  assert.equal(log.length, 1);
  assert.equal(timers.length, 1, 'one timer for the whole burst');
  // ...and when the window ends they are one notification with the count, replacing the first.
  await advance(COLLAPSE_MS);
  assert.deepEqual([...shown.keys()], [MANY_ID]);
  assert.equal(shown.get(MANY_ID).message, '12 requests waiting for your answer.');
  assert.deepEqual(log.slice(1), ['clear approval-r1', `create ${MANY_ID}: 12 requests waiting for your answer.`]);

  // Answered elsewhere, requests lower the count without a new alert.
  log.length = 0;
  await n.show({ type: 'approvals', pending: 11, event: 'approval.decided', request: req(3) });
  assert.deepEqual(log, [`update ${MANY_ID}: 11 requests waiting for your answer.`]);
  // None waiting: the notification goes.
  await n.show({ type: 'approvals', pending: 0, event: 'approval.decided', request: req(4) });
  assert.deepEqual([...shown.keys()], []);
});

test('300 requests in 2 s make at most three alerts, all of one notification', async () => {
  const { n, shown, log, advance } = world();
  for (let i = 1; i <= 300; i++) {
    await n.show(created(i, i));
    await advance(2000 / 300);
  }
  await advance(COLLAPSE_MS);
  const creates = log.filter((l) => l.startsWith('create'));
  assert.ok(creates.length <= 3, `${creates.length} alerts: ${creates}`);
  assert.deepEqual([...shown.keys()], [MANY_ID]);
  assert.equal(shown.get(MANY_ID).message, '300 requests waiting for your answer.');
});

test('a request after a quiet spell is shown at once again; a burst ended by none waiting shows nothing', async () => {
  const { n, shown, log, timers, advance } = world();
  await n.show(created(1, 1));
  await n.show(created(2, 2)); // collapsing
  await n.show({ type: 'approvals', pending: 0, event: '', request: { id: '' } });
  assert.equal(timers.length, 0, 'the burst is dropped');
  assert.deepEqual([...shown.keys()], []);
  await advance(10 * COLLAPSE_MS);
  assert.deepEqual([...shown.keys()], []);
  log.length = 0;
  await n.show(created(3, 1));
  assert.deepEqual(log, ['create approval-r3: buy on https://shop.example waits for your answer.']);
  // Settled, its own notification goes.
  await n.show({ type: 'approvals', pending: 1, event: 'approval.withdrawn', request: req(3) });
  assert.deepEqual([...shown.keys()], []);
});

test('a count of none clears only our notifications', async () => {
  const { n, shown } = world();
  shown.set('other', {});
  await n.show(created(1, 1));
  await n.show({ type: 'approvals', pending: 0 });
  assert.deepEqual([...shown.keys()], ['other']);
});
