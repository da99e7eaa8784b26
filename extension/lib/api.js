// api.js is the extension's side of the server's JSON API: the ticket that opens the socket (with
// the one refresh of the access token the API allows), and sharing for the popup. Requests carry
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

// ticket asks for a one-minute socket ticket. An expired access token is refreshed once
// (POST /api/auth/refresh) and the ticket asked for again; any other 401 is SignedOutError.
// onRefresh, when given, is told about the refresh (the tests count them).
export async function ticket(server, { fetchFn = fetch, onRefresh } = {}) {
  let res = await request(server, 'POST', '/api/tickets', undefined, fetchFn);
  if (res.status === 401) {
    const e = await errorOf(res);
    if (e.code !== 'access_expired') throw new SignedOutError();
    const refreshed = await request(server, 'POST', '/api/auth/refresh', undefined, fetchFn);
    if (!refreshed.ok) throw new SignedOutError();
    onRefresh?.();
    res = await request(server, 'POST', '/api/tickets', undefined, fetchFn);
    if (res.status === 401) throw new SignedOutError();
  }
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
