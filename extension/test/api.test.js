import test from 'node:test';
import assert from 'node:assert/strict';

import { authed, ticket, SignedOutError } from '../lib/api.js';

const server = 'https://tb.example';

// fakeServer answers requests from a table path → list of [status, body], one per request, and
// records each request as "METHOD /path". A response's body can be read once, as fetch's.
function fakeServer(table) {
  const seen = [];
  const respond = (status, body) => {
    let used = false;
    const res = {
      status,
      ok: status >= 200 && status < 300,
      json: async () => {
        if (used) throw new TypeError('Body is unusable: Body has already been read');
        used = true;
        return body;
      },
      clone: () => respond(status, body),
    };
    return res;
  };
  const fetchFn = async (url, init) => {
    const path = new URL(url).pathname;
    seen.push(`${init.method} ${path}`);
    assert.equal(init.credentials, 'include');
    const next = table[path]?.shift();
    if (!next) throw new Error(`unexpected ${init.method} ${path}`);
    await new Promise((r) => setImmediate(r));
    return respond(...next);
  };
  return { fetchFn, seen };
}

const expired = [401, { error: { code: 'access_expired', message: 'Your sign-in needs refreshing.' } }];
const signedOut = [401, { error: { code: 'signed_out', message: 'You are not signed in.' } }];

test('an expired access token is refreshed once and the request sent again', async () => {
  const { fetchFn, seen } = fakeServer({ '/api/sites': [expired, [200, { sites: [] }]], '/api/auth/refresh': [[200, { refreshed: true }]] });
  let refreshes = 0;
  const res = await authed(server, 'GET', '/api/sites', undefined, { fetchFn, onRefresh: () => refreshes++ });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { sites: [] });
  assert.deepEqual(seen, ['GET /api/sites', 'POST /api/auth/refresh', 'GET /api/sites']);
  assert.equal(refreshes, 1);
});

test('requests that find the token expired together share one refresh', async () => {
  const { fetchFn, seen } = fakeServer({
    '/api/sites': [expired, [200, { sites: [] }]],
    '/api/workspaces': [expired, [200, { workspaces: [] }]],
    '/api/auth/refresh': [[200, { refreshed: true }]],
  });
  const [a, b] = await Promise.all([authed(server, 'GET', '/api/sites', undefined, { fetchFn }), authed(server, 'GET', '/api/workspaces', undefined, { fetchFn })]);
  assert.equal(a.status, 200);
  assert.equal(b.status, 200);
  assert.equal(seen.filter((r) => r === 'POST /api/auth/refresh').length, 1);
});

test('signed out only when the server says so or refuses the refresh', async () => {
  let s = fakeServer({ '/api/auth/me': [signedOut] });
  await assert.rejects(authed(server, 'GET', '/api/auth/me', undefined, { fetchFn: s.fetchFn }), SignedOutError);

  s = fakeServer({ '/api/auth/me': [expired], '/api/auth/refresh': [[401, { error: { code: 'refresh_reused', message: 'ended' } }]] });
  await assert.rejects(authed(server, 'GET', '/api/auth/me', undefined, { fetchFn: s.fetchFn }), SignedOutError);
  assert.deepEqual(s.seen, ['GET /api/auth/me', 'POST /api/auth/refresh'], 'no retry after a refused refresh');

  s = fakeServer({ '/api/auth/me': [expired, signedOut], '/api/auth/refresh': [[200, {}]] });
  await assert.rejects(authed(server, 'GET', '/api/auth/me', undefined, { fetchFn: s.fetchFn }), SignedOutError);

  // A refresh the server could not make (it is down) is an error to show, not a sign-out.
  s = fakeServer({ '/api/auth/me': [expired], '/api/auth/refresh': [[503, { error: { code: 'unavailable', message: 'Try again later.' } }]] });
  await assert.rejects(authed(server, 'GET', '/api/auth/me', undefined, { fetchFn: s.fetchFn }), (e) => !(e instanceof SignedOutError) && /could not refresh your sign-in: Try again later/.test(e.message));

  // Any other 401 is the caller's to show, its body still readable.
  s = fakeServer({ '/api/sites': [[401, { error: { code: 'agent_token_not_allowed', message: 'Agent tokens work only on agent endpoints.' } }]] });
  const res = await authed(server, 'POST', '/api/sites', { origin: 'https://shop.example' }, { fetchFn: s.fetchFn });
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error.code, 'agent_token_not_allowed');
});

test('a ticket is asked for again after one refresh; any 401 left means signed out', async () => {
  let s = fakeServer({ '/api/tickets': [expired, [201, { ticket: 'tbt_1' }]], '/api/auth/refresh': [[200, {}]] });
  assert.equal(await ticket(server, { fetchFn: s.fetchFn }), 'tbt_1');
  s = fakeServer({ '/api/tickets': [[401, { error: { code: 'something_else' } }]] });
  await assert.rejects(ticket(server, { fetchFn: s.fetchFn }), SignedOutError);
});
