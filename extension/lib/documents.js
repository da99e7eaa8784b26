// documents.js is the worker's record of which documents (not tabs) offer which tools. A document
// is known by Chrome's documentId: after a cross-site navigation the new page may announce before
// the old one's port closes, and both live in the same tab for a moment, so a tab id would mix
// them up. The record is plain data so it can be kept in chrome.storage.session across the
// worker being stopped; every function returns nothing and changes the record in place.

// MAX_ADDRESSES bounds the sites whose last address is kept. They are keyed by origin, which a
// page chooses (a site may send its tab through any number of subdomains, each address up to
// 8 KB), and the record is written whole to chrome.storage.session (10 MB in all) on every change.
// The least recently announced go first; a call with no address kept reopens the server's url.
export const MAX_ADDRESSES = 128;

// emptyRecord is a record with no documents.
export function emptyRecord() {
  return {
    docs: {}, // documentId → {documentId, tabId, origin, url, title, tools, announcedAt}
    tabUsed: {}, // tabId → when the person last used it (ms)
    addresses: {}, // origin → {url, title, at}: where to reopen a site with no tab open
  };
}

// announce records (or replaces) what a document offers. The announcement is the whole list:
// tools missing from it are gone.
export function announce(rec, { documentId, tabId, origin, url, title, tools, now }) {
  rec.docs[documentId] = { documentId, tabId, origin, url, title, tools, announcedAt: now };
  if (tools.length > 0) {
    delete rec.addresses[origin]; // re-added last, so the oldest is the first key
    rec.addresses[origin] = { url, title, at: now };
    const origins = Object.keys(rec.addresses);
    for (let i = 0; i < origins.length - MAX_ADDRESSES; i++) delete rec.addresses[origins[i]];
  }
  if (rec.tabUsed[tabId] === undefined) rec.tabUsed[tabId] = now;
}

// forget removes a document: it unloaded, went into the back/forward cache, or stopped answering.
export function forget(rec, documentId) {
  delete rec.docs[documentId];
}

// forgetTab removes every document of a closed tab.
export function forgetTab(rec, tabId) {
  for (const d of Object.values(rec.docs)) {
    if (d.tabId === tabId) delete rec.docs[d.documentId];
  }
  delete rec.tabUsed[tabId];
}

// touchTab notes that the person used a tab (activated it or focused its window) at a time. A
// stamp older than the one kept is ignored: a window-focus event, answered after an asynchronous
// query, can arrive after a newer activation of another tab and must not outrank it.
export function touchTab(rec, tabId, at) {
  rec.tabUsed[tabId] = Math.max(rec.tabUsed[tabId] ?? 0, at);
}

// documentsOf lists the documents of a tab.
export function documentsOf(rec, tabId) {
  return Object.values(rec.docs).filter((d) => d.tabId === tabId);
}

// callsOf lists the ids of the calls sent to a document, from a map callId → {documentId}.
export function callsOf(calls, documentId) {
  const ids = [];
  for (const [id, c] of calls) {
    if (c.documentId === documentId) ids.push(id);
  }
  return ids;
}
