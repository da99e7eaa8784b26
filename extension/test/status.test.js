import test from 'node:test';
import assert from 'node:assert/strict';

import { serverStatus } from '../lib/status.js';
import { onInstalled, WELCOME_PATH } from '../lib/welcome.js';

const json = (status, body) => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });

test('signed in: the person and "server reachable"', async () => {
  const fetchFn = async (url) => {
    assert.equal(url, 'http://s.example/api/auth/me');
    return json(200, { user: { name: 'Alice', email: 'alice@example.com' } });
  };
  const s = await serverStatus('http://s.example', { fetchFn });
  assert.deepEqual(s, { state: 'signed-in', text: 'Signed in as Alice (alice@example.com) · server reachable' });
});

test('signed out, refused refresh, down, not Tabbridge, no access, no address', async () => {
  const signedOut = async () => json(401, { error: { code: 'signed_out', message: 'x' } });
  assert.equal((await serverStatus('http://s.example', { fetchFn: signedOut })).state, 'signed-out');
  const down = async () => {
    throw new TypeError('Failed to fetch');
  };
  const d = await serverStatus('http://s.example', { fetchFn: down });
  assert.equal(d.state, 'unreachable');
  assert.match(d.text, /does not answer/);
  assert.equal((await serverStatus('http://s.example', { fetchFn: async () => json(200, { hello: 1 }) })).state, 'error');
  assert.equal((await serverStatus('http://s.example', { fetchFn: async () => json(500, {}) })).state, 'error');
  let asked = false;
  const never = async () => ((asked = true), json(200, {}));
  assert.equal((await serverStatus('http://s.example', { hasAccess: false, fetchFn: never })).state, 'no-access');
  assert.equal((await serverStatus('', { fetchFn: never })).state, 'unset');
  assert.equal(asked, false, 'without access or an address nothing is fetched');
});

test('install opens the welcome page; an update opens nothing', async () => {
  const opened = [];
  const create = async (o) => opened.push(o.url);
  const getURL = (p) => `chrome-extension://id/${p}`;
  assert.equal(await onInstalled({ reason: 'update' }, create, getURL), false);
  assert.equal(await onInstalled({ reason: 'chrome_update' }, create, getURL), false);
  assert.deepEqual(opened, []);
  assert.equal(await onInstalled({ reason: 'install' }, create, getURL), true);
  assert.deepEqual(opened, [`chrome-extension://id/${WELCOME_PATH}`]);
});
