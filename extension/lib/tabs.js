// tabs.js chooses the document that runs a call: among the documents of the call's origin that
// offer the tool, the one in the most recently used tab; within one tab (a navigation in
// progress), the most recently announced document.

// offers says whether a document offers a tool.
export function offers(doc, tool) {
  return doc.tools.some((t) => t.name === tool);
}

// candidates lists the documents of origin offering tool, best first.
export function candidates(rec, origin, tool) {
  const used = (d) => rec.tabUsed[d.tabId] ?? 0;
  return Object.values(rec.docs)
    .filter((d) => d.origin === origin && offers(d, tool))
    .sort((a, b) => used(b) - used(a) || b.announcedAt - a.announcedAt);
}

// chooseDocument returns the best document for a call, or null when no open document of the
// origin offers the tool.
export function chooseDocument(rec, origin, tool) {
  return candidates(rec, origin, tool)[0] ?? null;
}
