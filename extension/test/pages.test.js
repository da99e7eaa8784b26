import test from 'node:test';
import assert from 'node:assert/strict';

// Fakes for what Pages touches: chrome.storage.session, chrome.runtime and chrome.tabs. Pages and
// everything it imports are the real modules.
const session = new Map();
const created = [];
let createTab = async () => ({ id: 99 });
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
    sendMessage: async () => {
      throw new Error('Could not establish connection.');
    },
  },
};

const { Pages, codes } = await import('../lib/pages.js');

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
