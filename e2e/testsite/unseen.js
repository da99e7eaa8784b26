// unseen.js registers tools the way sites Tabbridge had not met do: results that are not plain
// JSON data (undefined fields, Dates, class instances, MCP content), thrown values that are not
// Errors, odd names and schemas, a page that tampers with its own globals (?tamper=…), and
// single-page navigation with history.pushState. window.unseen records what the browser said.
(() => {
  const mc = document.modelContext || navigator.modelContext;
  const params = new URLSearchParams(location.search);
  window.unseen = { registered: [], errors: {}, log: [] };
  if (!mc) return;
  const reg = (tool, options) => {
    const p = mc.registerTool({ annotations: { readOnlyHint: true }, inputSchema: { type: 'object' }, ...tool }, options);
    p.then(() => window.unseen.registered.push(tool.name), (e) => (window.unseen.errors[tool.name] = `${e.name}: ${e.message}`));
    return p;
  };
  class Product {
    constructor(id, price) {
      this.id = id;
      this.price = price;
    }
    get label() {
      return `#${this.id}`;
    }
  }
  const ret = {
    retUndefinedField: () => ({ name: 'tea', discount: undefined, list: [1, undefined, 3] }),
    retDate: () => ({ at: new Date(Date.UTC(2026, 0, 2, 3, 4, 5)) }),
    retClass: () => ({ items: [new Product(1, 2.5)] }),
    retMap: () => ({ m: new Map([[1, 2]]), s: new Set([1]) }),
    retNaN: () => ({ n: NaN, inf: -Infinity }),
    retBigInt: () => ({ total: 10n }),
    retCycle: () => {
      const o = { a: 1 };
      o.self = o;
      return o;
    },
    retFunction: () => ({ f() {} }),
    retString: () => 'plain text',
    retNumber: () => 42,
    retUndefined: () => undefined,
    retNull: () => null,
    retMCPText: () => ({ content: [{ type: 'text', text: 'hello from MCP content' }] }),
    retMCPError: () => ({ content: [{ type: 'text', text: 'the page says no' }], isError: true }),
    retMCPImage: () => ({ content: [{ type: 'text', text: 'a picture' }, { type: 'image', data: 'iVBORw0KGgo=', mimeType: 'image/png' }] }),
    retSurrogate: () => ({ s: 'a\ud800b' }),
    retToJSON: () => ({ price: { toJSON: () => '2.50 EUR' } }),
    throwString: () => {
      throw 'out of stock';
    },
    throwObject: () => {
      throw { code: 'E42', detail: 'the basket is locked' };
    },
    throwNull: () => {
      throw null;
    },
    throwDOMException: () => {
      throw new DOMException('the person must sign in first', 'NotAllowedError');
    },
    throwEmptyError: () => {
      throw new TypeError();
    },
    rejectUndefined: () => Promise.reject(),
  };
  for (const [name, f] of Object.entries(ret)) reg({ name, description: `Unseen: ${name}.`, execute: async () => f() });
  // never answers only when cancelled: it says so in the page's log.
  reg({
    name: 'never',
    description: 'Never answers.',
    execute: (_, { signal }) => new Promise(() => {
      window.unseen.log.push('never: started');
      signal.addEventListener('abort', () => window.unseen.log.push(`never: aborted: ${signal.reason?.message}`));
    }),
  });
  // versioned is withdrawn with its AbortController and registered again with another schema.
  let versionCtl = new AbortController();
  const versioned = (v) => reg({
    name: 'versioned',
    description: `Version ${v}.`,
    inputSchema: v === 1 ? { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } : { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] },
    execute: async (args) => ({ v, args }),
  }, { signal: versionCtl.signal });
  versioned(1);
  window.unseen.reschema = () => {
    versionCtl.abort();
    versionCtl = new AbortController();
    return versioned(2);
  };

  // whoAmI says which of the site's tabs answered.
  reg({ name: 'whoAmI', description: 'Says which page answered.', execute: async () => location.search });

  // Names and schemas.
  for (const name of ['search products', 'shop:search', 'shop/search', 'recherche-é', 'a'.repeat(129)]) {
    reg({ name, description: 'An odd name.', execute: async () => ({ ok: true }) });
  }
  reg({
    name: 'refSchema',
    description: 'A schema with $defs and $ref.',
    inputSchema: { type: 'object', $defs: { q: { type: 'string', minLength: 2 } }, properties: { q: { $ref: '#/$defs/q' } }, required: ['q'] },
    execute: async ({ q }) => ({ q }),
  });
  reg({
    name: 'prefixItems',
    description: 'A 2020-12 schema.',
    inputSchema: { type: 'object', properties: { pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }] } } },
    execute: async (a) => a,
  });
  reg({ name: 'stringSchema', description: 'A schema that is not an object.', inputSchema: { type: 'string' }, execute: async (a) => a });
  reg({ name: 'noSchema', description: 'No input schema at all.', inputSchema: undefined, execute: async (a) => ({ got: a }) });
  reg({ name: 'textSchema', description: 'The schema as JSON text.', inputSchema: '{"type":"object"}', execute: async (a) => a });

  // Tools Tabbridge does not share, each saying why in the page's console.
  class ZodString {
    constructor() {
      this._def = { typeName: 'ZodString', checks: [] };
    }
    parse(v) {
      return v;
    }
  }
  reg({ name: 'zodSchema', description: 'A schema written with a Zod-like library.', inputSchema: { type: 'object', properties: { q: new ZodString() } }, execute: async (a) => a });
  reg({ name: 'bellDescription', description: 'A description with a bell \u0007 in it.', execute: async () => 1 });
  if (params.has('heavy')) {
    const schema = (i) => ({ type: 'object', description: `Schema ${i}: ${'a long, generated description of every field. '.repeat(1000)}` });
    for (let i = 0; i < 25; i++) reg({ name: `heavy${i}`, description: `Tool ${i} with a 48 KB schema.`, inputSchema: schema(i), execute: async () => i });
  }
  if (params.has('many')) {
    for (let i = 0; i < 130; i++) reg({ name: `many${i}`, description: `Tool ${i} of 130.`, execute: async () => i });
  }

  // Tampering after the observer started.
  const tamper = params.get('tamper') || '';
  if (tamper.includes('then')) Object.prototype.then = function () {};
  if (tamper.includes('tojson')) {
    Object.prototype.toJSON = function () {
      return 'hijacked';
    };
    Array.prototype.toJSON = function () {
      return 'hijacked';
    };
  }
  if (tamper.includes('json')) JSON.stringify = () => '"hijacked"';
  if (tamper.includes('promise')) window.Promise = function () {
    throw new Error('no Promise');
  };
  if (tamper.includes('events')) {
    window.CustomEvent = function () {
      throw new Error('no CustomEvent');
    };
    EventTarget.prototype.dispatchEvent = function () {
      return true;
    };
  }

  // A hash-routed single-page app (?hashspa#/catalogue, #/cart), as routers in hash mode do.
  if (params.has('hashspa')) {
    let ctl = null;
    const route = () => {
      if (ctl) ctl.abort();
      ctl = new AbortController();
      const name = location.hash === '#/cart' ? 'hashCart' : 'hashCatalogue';
      reg({ name, description: `Hash route tool ${name}.`, execute: async () => ({ hash: location.hash }) }, { signal: ctl.signal });
    };
    window.addEventListener('hashchange', route);
    route();
  }

  // Single-page navigation: ?spa shows a catalogue whose tools change with the route.
  if (params.has('spa')) {
    let ctl = null;
    const route = (path) => {
      if (ctl) ctl.abort();
      ctl = new AbortController();
      const name = path.includes('view=cart') ? 'viewCart' : 'browseCatalogue';
      reg({ name, description: `Route tool ${name}.`, execute: async () => ({ route: location.pathname + location.search }) }, { signal: ctl.signal });
      window.unseen.log.push(`route ${path}`);
    };
    window.unseen.go = (path) => {
      history.pushState({}, '', path);
      route(path);
    };
    route(location.pathname + location.search);
  }
})();
