// tabs.js chooses the document that runs a call: among the documents of the call's origin whose
// tool of that name the call's gate allows (see allows), the one in the most recently used tab;
// within one tab (a navigation in progress), the most recently announced document. The gate is
// why the server let the call run: a document offering the tool otherwise than the server checked
// it (now a write, or consequential) must not run a call the person was never asked about.

// offers says whether a document offers a tool.
export function offers(doc, tool) {
  return doc.tools.some((t) => t.name === tool);
}

// toolOf is a document's descriptor of a tool, or undefined.
export function toolOf(doc, tool) {
  return doc.tools.find((t) => t.name === tool);
}

// allows says whether a call the server let through on gate may run a tool with this descriptor,
// by the server's own rules: read-only runs only a tool that is still read-only (not
// consequential, not a declarative form), a grant never covers a consequential tool, and a call the
// person approved (or one with no gate) runs any version.
export function allows(descriptor, gate) {
  const a = descriptor.annotations ?? {};
  if (gate === 'read-only') return a.readOnlyHint === true && a.consequentialHint !== true && descriptor.kind !== 'declarative';
  if (gate === 'grant') return a.consequentialHint !== true;
  return true;
}

// candidates lists the documents of origin offering tool in a version gate allows, best first.
export function candidates(rec, origin, tool, gate = '') {
  const used = (d) => rec.tabUsed[d.tabId] ?? 0;
  return Object.values(rec.docs)
    .filter((d) => d.origin === origin && offers(d, tool) && allows(toolOf(d, tool), gate))
    .sort((a, b) => used(b) - used(a) || b.announcedAt - a.announcedAt);
}

// chooseDocument returns the best document for a call, or null when no open document of the
// origin offers the tool in a version its gate allows.
export function chooseDocument(rec, origin, tool, gate = '') {
  return candidates(rec, origin, tool, gate)[0] ?? null;
}
