// hostile.js is a page that lies to the scripts on it (?lie=…, comma-separated), as real pages do
// by accident (polyfills, zone.js, "helpers" on Object.prototype) or on purpose: it replaces the
// globals and prototypes a script in its world would use, and spies for the extension's channel.
// Its tools use none of what it breaks. window.hostile records what the page saw.
(() => {
  const mc = document.modelContext;
  const params = new URLSearchParams(location.search);
  const lies = (params.get('lie') || '').split(',');
  const log = [];
  const spied = [];
  window.hostile = { log, spied, registered: 0 };
  if (!mc) return;
  const ro = { readOnlyHint: true };
  const schema = { type: 'object' };
  const tools = [
    { name: 'whoAmI', description: 'Says which page answers.', execute: async () => location.search },
    { name: 'hostileAsync', description: 'An async execute.', execute: async (args) => ({ ok: 'async', args }) },
    { name: 'hostileSync', description: 'A plain execute.', execute: () => ({ ok: 'sync', list: [1, 2] }) },
    {
      name: 'spyEvent', description: 'Says what window.event is while it runs.',
      execute: () => ({ event: window.event === undefined ? null : `${window.event && window.event.type}` }),
    },
    {
      name: 'lateThen', description: 'Defines Object.prototype.then while it runs.',
      execute: async () => {
        Object.prototype.then = function () {};
        return { never: 'settles' };
      },
    },
    {
      name: 'dialog', description: 'Opens a dialog of the kind asked.',
      inputSchema: { type: 'object', properties: { kind: { type: 'string' } }, required: ['kind'] },
      execute: ({ kind }) => {
        const answer = window[kind]('Delete 3 items?');
        note(log, `${kind} answered ${answer}`);
        return { answer };
      },
    },
    {
      name: 'huge', description: 'Returns mb MB of text (5 unless asked).',
      inputSchema: { type: 'object', properties: { mb: { type: 'number' } } },
      execute: ({ mb }) => 'x'.repeat((mb || 5) * 1024 * 1024),
    },
    {
      name: 'hugeError', description: 'Throws an Error whose message is mb MB long (3 unless asked).',
      inputSchema: { type: 'object', properties: { mb: { type: 'number' } } },
      execute: ({ mb }) => {
        throw new Error(`out of stock. ${'x'.repeat((mb || 3) * 1024 * 1024)}`);
      },
    },
    {
      name: 'slowThenLeave', description: 'Never answers; the test navigates the tab meanwhile.',
      execute: () => {
        note(log, 'slowThenLeave: started');
        return new Promise(() => {});
      },
    },
  ];

  // Once the page has broken them, neither this script nor its tools use Array methods,
  // Function.prototype.call or String: what is needed is read now.
  const lie = { globals: lies.includes('globals'), promise: lies.includes('promise'), ctor: lies.includes('ctor'), objthen: lies.includes('objthen'), arraythen: lies.includes('arraythen') };
  const rapply = Reflect.apply;
  const define = Object.defineProperty;
  const note = (list, text) => (list[list.length] = text);
  const ours = /^(submit|load|DOMContentLoaded|toolchange|abort|pagehide|pageshow|message|error|unhandledrejection|readystatechange)$/;
  const spy = (what) => (type) => {
    if (typeof type !== 'string' || !ours.test(type)) note(spied, `${what}:${type}`);
  };
  window.hostile.note = note;
  if (lie.globals) {
    // Everything a script in this world might use to talk, copy or loop, replaced or poisoned.
    const boom = (name) => function () {
      throw new Error(`the page broke ${name}`);
    };
    const attrs = document.documentElement.getAttributeNames();
    for (let j = 0; j < attrs.length; j++) note(spied, `attribute:${attrs[j]}`);
    new MutationObserver((records) => {
      for (let j = 0; j < records.length; j++) note(spied, `attribute:${records[j].attributeName}`);
    }).observe(document.documentElement, { attributes: true });
    const addSpy = spy('addEventListener');
    const origAdd = EventTarget.prototype.addEventListener;
    EventTarget.prototype.addEventListener = function (type, listener, options) {
      addSpy(type);
      return rapply(origAdd, this, [type, listener, options]);
    };
    const dispatchSpy = spy('dispatchEvent');
    EventTarget.prototype.dispatchEvent = function (e) {
      dispatchSpy(e && e.type);
      return true;
    };
    const ceSpy = spy('CustomEvent');
    window.CustomEvent = function (type) {
      ceSpy(type);
      throw new Error('no CustomEvent');
    };
    JSON.stringify = () => '"hijacked"';
    JSON.parse = () => ({ from: 'bridge', type: 'result', callId: 'forged', ok: true, result: 'forged' });
    const accessors = ['callId', 'result', 'type', 'from', 'ok', 'error', 'signal', 'detail', 'tools', 'then'];
    for (let j = 0; j < accessors.length; j++) {
      const k = accessors[j];
      if (k === 'then') continue; // a then getter would be the objthen lie, checked on its own
      define(Object.prototype, k, { configurable: true, get() { note(spied, `get:${k}`); }, set() { note(spied, `set:${k}`); } });
    }
    const objectFns = ['defineProperty', 'keys', 'create', 'getOwnPropertyDescriptor', 'getPrototypeOf', 'setPrototypeOf', 'entries', 'assign'];
    for (let j = 0; j < objectFns.length; j++) Object[objectFns[j]] = boom(`Object.${objectFns[j]}`);
    Object.prototype.hasOwnProperty = boom('Object.prototype.hasOwnProperty');
    Array.isArray = boom('Array.isArray');
    const arrayFns = ['push', 'map', 'slice', 'join', 'forEach', 'indexOf', 'includes', 'concat', 'filter'];
    for (let j = 0; j < arrayFns.length; j++) Array.prototype[arrayFns[j]] = boom(`Array.prototype.${arrayFns[j]}`);
    Array.prototype[Symbol.iterator] = boom('Array.prototype[Symbol.iterator]');
    Function.prototype.call = boom('Function.prototype.call');
    Function.prototype.apply = boom('Function.prototype.apply');
    Function.prototype.bind = boom('Function.prototype.bind');
    Reflect.apply = boom('Reflect.apply');
    window.structuredClone = boom('structuredClone');
    window.queueMicrotask = boom('queueMicrotask');
    window.String = boom('String');
  }
  if (lie.promise) {
    // What zone.js-like and broken polyfills do: then replaced, species redirected, Promise gone.
    Promise.prototype.then = function () {
      return this;
    };
    define(Promise, Symbol.species, { configurable: true, get() {
      return function Fake(executor) {
        executor(() => {}, () => {});
      };
    } });
    window.Promise = function () {
      throw new Error('no Promise');
    };
  }
  if (lie.ctor) {
    Promise.prototype.then = function () {
      return this;
    };
    define(Promise.prototype, 'constructor', { configurable: true, writable: true, value: Object });
  }
  if (lie.objthen) Object.prototype.then = function () {};
  if (lie.arraythen) Array.prototype.then = function () {};

  // Registered without anything the page broke (not even an array loop).
  let i = 0;
  const next = () => {
    if (i >= tools.length) return;
    const t = tools[i++];
    mc.registerTool({ annotations: ro, inputSchema: schema, ...t });
    window.hostile.registered = i;
    next();
  };
  next();

  // ?churn: a tool registered and withdrawn 200 times in a tight loop, then left registered.
  if (params.has('churn')) {
    let n = 0;
    const churn = () => {
      const ctl = new AbortController();
      const last = n === 199;
      mc.registerTool({ name: 'churned', description: `Churn ${n}.`, annotations: ro, inputSchema: schema, execute: () => ({ n: last ? 'last' : n }) }, { signal: ctl.signal });
      if (!last) ctl.abort();
      n++;
      if (n < 200) churn();
    };
    churn();
  }

  // ?tick: a tool withdrawn and registered again every few milliseconds for 1.5 s (hundreds of
  // changes of the page's tool list, each list over 4 KB), then "ticked" registered for good.
  // renew registers a tool while it runs, just after another change: the answer must not
  // overtake the announcement of the tool.
  if (params.has('tick')) {
    const h = window.hostile;
    const pad = 'x'.repeat(4096);
    h.ticks = 0;
    let ctl = null;
    const start = performance.now();
    const timer = setInterval(() => {
      if (ctl) ctl.abort();
      if (performance.now() - start > 1500) {
        clearInterval(timer);
        h.tickedFor = performance.now() - start;
        mc.registerTool({ name: 'ticked', description: `After ${h.ticks} ticks.`, annotations: ro, inputSchema: schema, execute: () => h.ticks });
        return;
      }
      ctl = new AbortController();
      mc.registerTool({ name: 'ticking', description: `Tick ${h.ticks}. ${pad}`, annotations: ro, inputSchema: schema, execute: () => h.ticks }, { signal: ctl.signal });
      h.ticks++;
    }, 2);
    mc.registerTool({
      name: 'renew', description: 'Registers warm, then fresh, while it runs.', annotations: ro, inputSchema: schema,
      execute: async () => {
        await mc.registerTool({ name: 'warm', description: `Warm. ${'w'.repeat(8000)}`, annotations: ro, inputSchema: schema, execute: () => 'warm' });
        await new Promise((r) => setTimeout(r, 0)); // warm's announcement has gone: the next change waits out its gap
        await mc.registerTool({ name: 'fresh', description: 'Registered just before its answer.', annotations: ro, inputSchema: schema, execute: () => 'fresh' });
        return 'renewed';
      },
    });
  }

  // ?twice: the same name registered twice; the browser's answer to the second is recorded.
  if (params.has('twice')) {
    mc.registerTool({ name: 'twice', description: 'First.', annotations: ro, inputSchema: schema, execute: () => 'first' });
    try {
      mc.registerTool({ name: 'twice', description: 'Second.', annotations: ro, inputSchema: schema, execute: () => 'second' })
        .then(() => note(log, 'twice: second accepted'), (e) => note(log, `twice: second refused: ${e.name}: ${e.message}`));
    } catch (e) {
      note(log, `twice: second threw: ${e.name}: ${e.message}`);
    }
  }
})();
