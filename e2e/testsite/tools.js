// tools.js registers the test site's WebMCP tools. Everything the tests read is written into the
// page (window.testsite and #log), so a test can tell the page's own behaviour from the
// extension's.
(() => {
  const mc = document.modelContext || navigator.modelContext;
  const log = (line) => {
    window.testsite.log.push(line);
    const el = document.getElementById('log');
    if (el) el.textContent = window.testsite.log.join('\n');
  };
  const secret = Math.random().toString(36).slice(2);
  let searches = 0;
  let items = [];
  let withdrawable = null; // {version, controller}
  let release = null;

  window.testsite = { log: [], secret, registered: {}, errors: {} };
  if (!mc) {
    log('no modelContext');
    return;
  }

  const track = (name, promise) => promise.then(
    () => (window.testsite.registered[name] = true),
    (e) => (window.testsite.errors[name] = `${e.name}: ${e.message}`),
  );

  track('search', mc.registerTool({
    name: 'search',
    title: 'Search this page',
    description: 'Searches the page; answers with what only the page knows.',
    inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    annotations: { readOnlyHint: true },
    execute: async ({ q }) => {
      searches++;
      return { title: document.title, count: searches, q, secret };
    },
  }));

  track('addItem', mc.registerTool({
    name: 'addItem',
    description: 'Adds an item to the page\'s list.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    execute: async ({ text }) => {
      if (text === 'fail') throw new Error('the page refuses to add "fail"');
      items.push(text);
      log(`added ${text}`);
      return { items };
    },
  }));

  track('goTo', mc.registerTool({
    name: 'goTo',
    description: 'Navigates this tab to another address after answering.',
    inputSchema: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
    execute: async ({ to }) => {
      const from = location.href;
      setTimeout(() => (location.href = to), 0);
      return { from, to };
    },
  }));

  track('slow', mc.registerTool({
    name: 'slow',
    description: 'Waits for the given seconds, or until the call is cancelled.',
    inputSchema: { type: 'object', properties: { seconds: { type: 'number' } } },
    execute: ({ seconds = 30 }, { signal } = {}) => new Promise((resolve, reject) => {
      log(`slow started (${seconds} s)`);
      const timer = setTimeout(() => {
        log('slow finished');
        resolve({ waited: seconds });
      }, seconds * 1000);
      signal?.addEventListener('abort', () => {
        clearTimeout(timer);
        log(`slow aborted: ${signal.reason?.message ?? signal.reason}`);
        reject(new Error('aborted by the caller'));
      });
    }),
  }));

  // registerWithdrawable registers version v of "withdrawable" with its own AbortSignal; with
  // hold set, a call waits until released or withdrawn.
  window.testsite.registerWithdrawable = (version) => {
    const controller = new AbortController();
    const p = mc.registerTool({
      name: 'withdrawable',
      description: `A tool the page can withdraw (version ${version}).`,
      execute: ({ hold } = {}) => {
        log(`withdrawable v${version} called`);
        if (!hold) return { version };
        return new Promise((resolve) => (release = () => resolve({ version })));
      },
    }, { signal: controller.signal });
    withdrawable = { version, controller };
    window.testsite.lastWithdrawable = { version, controller };
    return p.then(() => 'registered', (e) => `${e.name}: ${e.message}`);
  };
  // registerBig registers "big", a read-only tool whose result is over the 256 KiB cap.
  window.testsite.registerBig = () => mc.registerTool({
    name: 'big',
    description: 'Answers with about 300 KiB of text.',
    annotations: { readOnlyHint: true },
    execute: async () => ({ text: 'x'.repeat(300 * 1024) }),
  }).then(() => 'registered', (e) => `${e.name}: ${e.message}`);
  // registerExact registers "exact", a read-only tool whose result is a string of exactly the
  // 256 KiB cap: the cap counts the string's own bytes, not its JSON quotes (issue 11, item 8).
  window.testsite.registerExact = () => mc.registerTool({
    name: 'exact',
    description: 'Answers with exactly 256 KiB of text.',
    annotations: { readOnlyHint: true },
    execute: async () => 'y'.repeat(256 * 1024),
  }).then(() => 'registered', (e) => `${e.name}: ${e.message}`);
  window.testsite.withdraw = () => withdrawable?.controller.abort();
  window.testsite.release = () => release?.();
  window.testsite.getTools = async () => (await mc.getTools()).map((t) => t.name).sort();

  addEventListener('pageshow', (e) => log(`pageshow persisted=${e.persisted}`));
})();
