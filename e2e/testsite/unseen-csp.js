// unseen-csp.js: a tool on a page whose CSP allows only its own scripts and enforces Trusted Types
// with no policy at all, so no string may reach an HTML or script sink.
document.modelContext?.registerTool({
  name: 'cspTool',
  description: 'A tool of a page with a strict CSP.',
  inputSchema: { type: 'object', properties: {} },
  annotations: { readOnlyHint: true },
  execute: async () => {
    let blocked = false;
    try {
      document.body.innerHTML = '<b>x</b>';
    } catch {
      blocked = true;
    }
    return { csp: true, trustedTypesEnforced: blocked };
  },
});
