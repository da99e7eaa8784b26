// status.js answers the options page's "is my server there, and am I signed in to it?" in one
// line a person reads: "Signed in as Alice (alice@example.com) · server reachable", or what is
// wrong and what to do. It asks /api/auth/me the way the popup does (lib/api.js authed), so an
// expired access token is refreshed rather than shown as signed out.

import { authed, SignedOutError } from './api.js';

// serverStatus returns {state, text}; state is one of 'signed-in', 'signed-out', 'no-access',
// 'unreachable', 'error'. hasAccess says whether the extension holds host permission for server
// (without it the cookie is not sent and the request fails like an unreachable server).
export async function serverStatus(server, { hasAccess = true, fetchFn = fetch } = {}) {
  if (!server) return { state: 'unset', text: 'No server address yet: type it above and save.' };
  if (!hasAccess) return { state: 'no-access', text: `Tabbridge has no access to ${server} yet: save the address to allow it.` };
  let res;
  try {
    res = await authed(server, 'GET', '/api/auth/me', undefined, { fetchFn });
  } catch (e) {
    if (e instanceof SignedOutError) return { state: 'signed-out', text: 'Not signed in · server reachable. Sign in from the app.' };
    return { state: 'unreachable', text: `${server} does not answer. Is the server running, and is the address right?` };
  }
  if (res.status === 401) return { state: 'signed-out', text: 'Not signed in · server reachable. Sign in from the app.' };
  if (!res.ok) return { state: 'error', text: `The server answered HTTP ${res.status}; is ${server} a Tabbridge server?` };
  let user;
  try {
    user = (await res.json())?.user;
  } catch {
    user = null;
  }
  if (!user?.email) return { state: 'error', text: `${server} answered, but not as a Tabbridge server does.` };
  return { state: 'signed-in', text: `Signed in as ${user.name} (${user.email}) · server reachable` };
}
