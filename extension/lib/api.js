// api.js is the extension's side of the server's JSON API: every request of the popup and the
// ticket that opens the socket go through authed, which makes the one refresh of an expired access
// token the API allows. Requests carry
// the sign-in cookie (credentials: 'include'; the extension holds host permission for the server)
// and the extension's own Origin, which passes the server's CSRF check without a token.

// SignedOutError means the person must sign in (in a tab) before the extension can connect.
export class SignedOutError extends Error {
  constructor(message = 'You are signed out of the Tabbridge server; sign in from the popup.') {
    super(message);
    this.name = 'SignedOutError';
  }
}

// errorOf reads the API's one error shape {error: {code, message}} from a response.
export async function errorOf(res) {
  try {
    const body = await res.json();
    return { code: String(body?.error?.code ?? ''), message: String(body?.error?.message ?? `HTTP ${res.status}`) };
  } catch {
    return { code: '', message: `HTTP ${res.status}` };
  }
}

// request sends one JSON request to the server.
export function request(server, method, path, body, fetchFn = fetch) {
  const init = { method, credentials: 'include', headers: {} };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  return fetchFn(`${server}${path}`, init);
}

// refreshing holds the refresh in flight per server: requests that find the access token expired
// together (the popup asks for sites and workspaces at once) share one refresh.
const refreshing = new Map();

function refresh(server, fetchFn, onRefresh) {
  if (!refreshing.has(server)) {
    const p = (async () => {
      const res = await request(server, 'POST', '/api/auth/refresh', undefined, fetchFn);
      if (res.status === 401) throw new SignedOutError();
      if (!res.ok) throw new Error(`The server could not refresh your sign-in: ${(await errorOf(res)).message}`);
      onRefresh?.();
    })().finally(() => refreshing.delete(server));
    refreshing.set(server, p);
  }
  return refreshing.get(server);
}

// codeOf reads a 401's error code without using up the body the caller may still read.
async function codeOf(res) {
  return (await errorOf(res.clone())).code;
}

// authed sends one request for the signed-in person and resolves with its response. An expired
// access token (401 access_expired; the refresh cookie lives longer) is refreshed once (POST
// /api/auth/refresh; the extension's Origin passes the CSRF check) and the request sent again.
// It throws SignedOutError when the person must sign in: the server says signed_out, or the
// refresh is refused. Other answers, errors included, are the caller's to read. onRefresh, when
// given, is told about the refresh (the tests count them).
export async function authed(server, method, path, body, { fetchFn = fetch, onRefresh } = {}) {
  let res = await request(server, method, path, body, fetchFn);
  if (res.status !== 401) return res;
  let code = await codeOf(res);
  if (code === 'access_expired') {
    await refresh(server, fetchFn, onRefresh);
    res = await request(server, method, path, body, fetchFn);
    if (res.status !== 401) return res;
    code = await codeOf(res);
  }
  if (code === 'signed_out') throw new SignedOutError();
  return res;
}

// ticket asks for a one-minute socket ticket, refreshing an expired access token once (authed);
// any 401 left is SignedOutError.
export async function ticket(server, { fetchFn = fetch, onRefresh } = {}) {
  const res = await authed(server, 'POST', '/api/tickets', undefined, { fetchFn, onRefresh });
  if (res.status === 401) throw new SignedOutError();
  if (res.status !== 201) {
    const e = await errorOf(res);
    throw new Error(`The server refused a ticket: ${e.message}`);
  }
  const body = await res.json();
  if (typeof body?.ticket !== 'string' || body.ticket.length > 512) throw new Error('The server sent no ticket.');
  return body.ticket;
}

// socketURL is the extension socket's address for a server origin and a ticket.
export function socketURL(server, t) {
  const u = new URL('/ws/extension', server);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  u.searchParams.set('ticket', t);
  return u.href;
}
