// config.js holds the server's address. Only its origin is kept: the popup frames "<origin>/",
// and the extension holds host permission for exactly that origin (asked for on save, given
// back for the previous address), which is what lets the framed app share the sign-in cookie.

export const DEFAULT_SERVER = 'http://127.0.0.1:8080';
const KEY = 'server';

// parseServer returns the origin of an address a person typed, or throws with a reason.
export function parseServer(text) {
  let url;
  try {
    url = new URL(String(text).trim());
  } catch {
    throw new Error('That is not an address. Type one like https://tabbridge.example.com');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('The address must start with https:// (or http:// for a local server).');
  if (url.username || url.password) throw new Error('The address must not contain a user name or password.');
  return url.origin;
}

// hostPattern is the host permission pattern for an origin.
export function hostPattern(origin) {
  return `${origin}/*`;
}

export async function getServer() {
  const { [KEY]: server = DEFAULT_SERVER } = await chrome.storage.local.get(KEY);
  return server;
}

export async function setServer(origin) {
  await chrome.storage.local.set({ [KEY]: origin });
}

// getSavedServer is the address the person saved, or '' before they saved one (the welcome page
// asks for it rather than showing the default as if chosen).
export async function getSavedServer() {
  const { [KEY]: server = '' } = await chrome.storage.local.get(KEY);
  return server;
}
