// protocol.js is the pure half of the extension socket (docs/PROTOCOL.md, protocol 1): it checks
// every message the server sends before the worker uses it, builds what the worker sends, and
// works out which announcements a change of documents or shared sites needs. No chrome.* here, so
// Node's tests can run it.
//
// The server's limits (the result cap, the largest frame it reads, how long a call runs) are the
// ones its welcome sent, kept by messages.js (TabbridgeMessages.limits); the functions that use
// them take them as an argument, defaulting to those.

import './messages.js';

const M = globalThis.TabbridgeMessages;

export const PROTOCOL = 1;
export const PING_MS = 20000;
// MIN_CALL_MS is the least the worker waits for a call. The most is the welcome's
// limits.callTimeoutMs: a call's deadline is at most that long after the server sends it, and the
// server cancels a call at its deadline itself, so the worker's own timer is only a backstop.
export const MIN_CALL_MS = 1000;
// CLOCK_RTT_MAX_MS: a pong answered later than this says too little about the server's clock.
export const CLOCK_RTT_MAX_MS = 10000;

const encoder = new TextEncoder();
const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isString = (v, max) => typeof v === 'string' && v.length <= max;
const idPattern = /^[A-Za-z0-9_-]{1,128}$/;
const toolName = /^[A-Za-z0-9_.-]{1,128}$/;
// GATES are the values of a call's gate, why the server let it run: read-only and grant ran
// without asking the person, asked was approved by them; '' (or none) is an older server's call.
const GATES = Object.freeze(['', 'read-only', 'grant', 'asked']);
const refuse = (reason) => ({ ok: false, reason });
const accept = (msg) => ({ ok: true, msg });

// origin returns the normalised http(s) origin of text, or '' when it is not one. Every call
// names its site and page, the same few addresses again and again, so the answers are kept (up
// to ORIGINS_KEPT of them, then forgotten all at once): parsing a URL is the largest piece of the
// worker's own work on a call.
const ORIGINS_KEPT = 256;
const origins = new Map();
export function originOf(text) {
  if (typeof text !== 'string' || text.length > 2048) return '';
  let origin = origins.get(text);
  if (origin !== undefined) return origin;
  origin = parseOrigin(text);
  if (origins.size >= ORIGINS_KEPT) origins.clear();
  origins.set(text, origin);
  return origin;
}

function parseOrigin(text) {
  try {
    const u = new URL(text);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return '';
    return u.origin;
  } catch {
    return '';
  }
}

// checkSites checks a sharedSites list (welcome and sites) and keeps the known fields.
function checkSites(list) {
  if (!Array.isArray(list) || list.length > 10000) return null;
  const out = [];
  for (const s of list) {
    if (!isObject(s) || !isString(s.id, 128) || !isString(s.workspaceId, 128)) return null;
    const origin = originOf(s.origin);
    if (!origin) return null;
    out.push({ id: s.id, origin, workspaceId: s.workspaceId, workspaceName: isString(s.workspaceName, 200) ? s.workspaceName : '' });
  }
  return out;
}

// checkServerMessage checks a parsed frame from the server and returns a fresh object holding only
// the fields the worker uses, or a reason. Unknown types are refused (the worker logs and drops
// them), so a newer server cannot make an older extension act on something it does not know.
export function checkServerMessage(m) {
  if (!isObject(m) || typeof m.type !== 'string') return refuse('not an object with a type');
  switch (m.type) {
    case 'welcome': {
      const sites = checkSites(m.sharedSites);
      if (m.protocol !== PROTOCOL || !sites) return refuse('welcome: bad protocol or sharedSites');
      const ping = Number.isInteger(m.limits?.pingSeconds) && m.limits.pingSeconds >= 5 && m.limits.pingSeconds <= 300 ? m.limits.pingSeconds * 1000 : PING_MS;
      return accept({ type: 'welcome', name: isString(m.name, 200) ? m.name : '', sharedSites: sites, pingMs: ping, limits: M.checkLimits(m.limits) });
    }
    case 'sites': {
      const sites = checkSites(m.sharedSites);
      return sites ? accept({ type: 'sites', sharedSites: sites }) : refuse('sites: bad sharedSites');
    }
    case 'pong':
      return accept({ type: 'pong', id: isString(m.id, 64) ? m.id : '', time: Number.isFinite(m.time) ? m.time : null });
    case 'browser':
      return accept({ type: m.type });
    case 'tools.accepted': {
      // The server's refusals of a document's tools, for the page's console (lib/pages.js). A
      // refusal of a tool's name has no tool (the name could not be read): its reason says which.
      const named = (r) => r.tool === undefined || isString(r.tool, 128);
      const refused = Array.isArray(m.refused) ? m.refused.filter((r) => isObject(r) && named(r) && isString(r.reason, 1024)).slice(0, 256).map((r) => ({ tool: r.tool ?? '', reason: r.reason })) : [];
      return accept({ type: m.type, documentId: isString(m.documentId, 128) ? m.documentId : '', refused });
    }
    case 'error':
      return accept({ type: 'error', code: isString(m.code, 64) ? m.code : '', message: isString(m.message, 4096) ? m.message : '', ref: isString(m.ref, 64) ? m.ref : '' });
    case 'call': {
      if (!isString(m.id, 64) || m.id === '') return refuse('call: no id');
      // A call refused from here on is answered (callId), so the agent hears at once.
      const refuseCall = (reason) => ({ ok: false, reason, callId: m.id });
      // The bridge names a call to the page only by such an id; one it cannot name it cannot
      // answer either, and the call would wait out its deadline in the page unheard.
      if (!M.checkCallId(m.id)) return refuseCall("call: id is not 1 to 64 letters, digits, '_' or '-'");
      const site = originOf(m.site);
      if (!site || site !== m.site) return refuseCall('call: site is not an origin');
      if (typeof m.tool !== 'string' || !toolName.test(m.tool)) return refuseCall('call: bad tool name');
      if (!isObject(m.arguments)) return refuseCall('call: arguments must be an object');
      if (!Number.isFinite(m.deadline)) return refuseCall('call: no deadline');
      const url = originOf(m.url) === site ? m.url : '';
      const documentId = typeof m.documentId === 'string' && idPattern.test(m.documentId) ? m.documentId : '';
      // gate is why the server let the call run; it limits which documents may run it (tabs.js).
      // One this worker does not know may allow less than any it knows, so the call is refused
      // rather than run in whichever document offers the tool.
      const gate = m.gate === undefined ? '' : m.gate;
      if (!GATES.includes(gate)) return refuseCall('call: gate is not "read-only", "grant" or "asked"');
      return accept({ type: 'call', callId: m.id, site, tool: m.tool, args: m.arguments, url, documentId, deadline: m.deadline, gate });
    }
    case 'call.cancel':
      if (!isString(m.callId, 64) || m.callId === '') return refuse('call.cancel: no callId');
      return accept({ type: 'call.cancel', callId: m.callId, reason: m.reason === 'timeout' ? 'timeout' : 'cancelled' });
    case 'approvals': {
      if (!Number.isInteger(m.pending) || m.pending < 0 || m.pending > 1e6) return refuse('approvals: bad pending');
      const r = isObject(m.request) ? m.request : {};
      const request = {
        id: isString(r.id, 128) ? r.id : '',
        tool: isString(r.tool, 128) ? r.tool : '',
        site: originOf(r.site),
      };
      return accept({ type: 'approvals', pending: m.pending, event: isString(m.event, 64) ? m.event : '', request });
    }
    default:
      return refuse(`unknown type ${String(m.type).slice(0, 40)}`);
  }
}

// MAX_SERVER_FRAME bounds a frame the worker reads from the server. The largest the server sends is
// a call carrying up to 1 MiB of arguments (sitetools.MaxArgumentsBytes) inside its envelope, so
// the bound is well above that: a call the server accepted is never dropped for its size.
export const MAX_SERVER_FRAME = 4 << 20;

// parseFrame parses and checks one text frame.
export function parseFrame(data) {
  if (typeof data !== 'string' || data.length > MAX_SERVER_FRAME) return refuse('not a text frame within 4 MiB');
  let m;
  try {
    m = JSON.parse(data);
  } catch {
    return refuse('not JSON');
  }
  return checkServerMessage(m);
}

// hello is the first message on every socket.
export function hello({ browserId, name, version }) {
  return { type: 'hello', id: 'h1', protocol: PROTOCOL, minProtocol: PROTOCOL, browserId, name, version };
}

// browserName is the default name a browser introduces itself with.
export function browserName(os) {
  const names = { mac: 'macOS', win: 'Windows', linux: 'Linux', cros: 'ChromeOS', android: 'Android', openbsd: 'OpenBSD', fuchsia: 'Fuchsia' };
  return `Chrome on ${names[os] ?? 'this computer'}`;
}

// signature is what decides whether a document must be announced again.
function signature(doc) {
  return JSON.stringify([doc.url, doc.title, doc.tools]);
}

// plan works out what to send so the server knows exactly the documents of shared origins:
// sent maps documentId → the signature last announced on this socket; docs is the worker's
// record (documentId → doc); shared is a Set of shared origins. It returns the messages (without
// ids) and the new sent map. A document that was never announced with tools and has none is not
// announced; one that was and is gone (or its site unshared) gets document.gone.
export function plan(sent, docs, shared, tabUsed = {}) {
  const messages = [];
  const next = new Map();
  for (const doc of Object.values(docs)) {
    if (!shared.has(doc.origin)) continue;
    const sig = signature(doc);
    const before = sent.get(doc.documentId);
    if (before === undefined && doc.tools.length === 0) continue;
    next.set(doc.documentId, sig);
    if (before === sig) continue;
    messages.push({
      type: 'tools.announce', documentId: doc.documentId, origin: doc.origin, url: doc.url,
      title: String(doc.title ?? '').slice(0, 170), tabId: doc.tabId, lastUsed: tabUsed[doc.tabId] ?? 0, tools: doc.tools,
    });
  }
  for (const id of sent.keys()) {
    if (!next.has(id) && docs[id] === undefined) messages.push({ type: 'document.gone', documentId: id });
  }
  return { messages, sent: next };
}

// openSites is the sites.open list: per shared origin with a tracked document, how many tabs
// show it and when one of them was last used. Sorted, so equal lists encode the same.
export function openSites(docs, shared, tabUsed = {}) {
  const by = new Map();
  for (const d of Object.values(docs)) {
    if (!shared.has(d.origin)) continue;
    const s = by.get(d.origin) ?? { origin: d.origin, lastUsed: 0, tabs: new Set() };
    s.tabs.add(d.tabId);
    s.lastUsed = Math.max(s.lastUsed, tabUsed[d.tabId] ?? 0);
    by.set(d.origin, s);
  }
  return [...by.values()].sort((a, b) => (a.origin < b.origin ? -1 : 1)).map((s) => ({ origin: s.origin, lastUsed: s.lastUsed, tabs: s.tabs.size }));
}

// resultSize is what the result cap counts, as the server does (sitetools.ResultSize): a
// string's own UTF-8 bytes, not its JSON quotes and escapes; any other value's JSON text.
export function resultSize(result) {
  return typeof result === 'string' ? encoder.encode(result).length : encoder.encode(JSON.stringify(result)).length;
}

// resultMessage turns a Pages outcome into call.result, refusing a result over the server's cap
// (limits.maxResultBytes) with its size (checked here, before sending, and never truncated). A
// result within the cap whose JSON would still not fit in one frame the server reads
// (limits.maxMessageBytes: a string of control characters, each escaped as \u00XX) is refused too,
// with the size of that JSON, rather than get the socket closed.
export function resultMessage(callId, outcome, limits = M.limits) {
  if (outcome.ok) {
    const result = outcome.result ?? null;
    const size = resultSize(result);
    const cap = limits.maxResultBytes;
    const framed = size <= cap ? encoder.encode(JSON.stringify(result)).length : 0;
    if (size > cap || framed > limits.maxMessageBytes - 4096) {
      const n = Math.max(size, framed);
      return { type: 'call.result', callId, ok: false, error: { code: 'result_too_large', message: `The page's result is ${n} bytes; at most ${cap} are allowed.`, size: n } };
    }
    return { type: 'call.result', callId, ok: true, result };
  }
  const message = String(outcome.error ?? 'The call failed.').slice(0, 4000);
  const error = { code: String(outcome.code || 'tool_error'), message };
  if (Number.isSafeInteger(outcome.size)) error.size = outcome.size;
  return { type: 'call.result', callId, ok: false, error };
}

// clockOffset estimates the server's clock minus this browser's from one ping: sentAt and
// receivedAt are this browser's clock when the ping left and its pong arrived, serverTime the
// pong's time. It assumes the pong was stamped halfway; null when the answer came too late to tell.
export function clockOffset(sentAt, receivedAt, serverTime) {
  const rtt = receivedAt - sentAt;
  if (!(rtt >= 0 && rtt <= CLOCK_RTT_MAX_MS) || !Number.isFinite(serverTime)) return null;
  return serverTime - (sentAt + rtt / 2);
}

// callTimeout is how long the worker gives a call whose deadline is the server's clock in ms:
// deadline less the server's time now (this browser's clock plus offset), within
// [MIN_CALL_MS, maxMs], maxMs being the longest a call runs on the server (the welcome's
// limits.callTimeoutMs). With no offset measured yet (null), a time left outside that range means
// the clocks disagree, and the worker waits the longest a call can run: the server cancels the
// call at its deadline anyway.
export function callTimeout(deadline, now, offset, maxMs = M.limits.callTimeoutMs) {
  const most = Math.max(MIN_CALL_MS, maxMs);
  const left = deadline - (now + (offset ?? 0));
  if (offset === null && !(left >= MIN_CALL_MS && left <= most)) return most;
  return Math.min(most, Math.max(MIN_CALL_MS, left));
}

// retryable says whether a close code means "dial again with backoff".
export function retryable(code) {
  return code !== 4000 && code !== 4001 && code !== 4002 && code !== 1003 && code !== 1009;
}
