// observer.js runs in the page's own JavaScript world (MAIN), at document_start, in the top frame,
// right after bridge.js. It sees which WebMCP tools the page registers without becoming a tool
// provider: it wraps the browser's native registerTool, calls through and returns the native
// promise, and never adds a modelContext where the browser has none.
//
// It talks to the bridge only through CustomEvents whose type is a nonce the bridge put on <html>;
// it reads and removes that attribute before any page script runs, and it saves every global it
// uses now, so a page script that patches them later sees nothing and can forge nothing.
//
// While a nonce event is being dispatched, window.event is that event, so no page code may run
// then: the handler only parses and queues, and everything else happens in a microtask. Every
// object the observer builds has a null prototype (object literals with __proto__: null, arrays
// via nullArray), and every message it reads is read through own(), so no getter, setter or
// toJSON a page puts on Object.prototype or Array.prototype runs in its work, and nothing it sends
// can be overheard or changed that way.
//
// It also runs the page's tools for remote calls: it calls the page's own execute(input, {signal})
// with a per-call AbortSignal and forwards the page's own result or error message (Chromium's
// executeTool turns every page error into one generic UnknownError).
(() => {
  'use strict';

  const ATTR = 'data-tabbridge-nonce';
  const apply = Reflect.apply;
  const html = document.documentElement;
  if (!html) return;
  const nonce = apply(Element.prototype.getAttribute, html, [ATTR]);
  apply(Element.prototype.removeAttribute, html, [ATTR]);
  if (!nonce) return;

  let mc;
  try {
    mc = document.modelContext || navigator.modelContext;
  } catch {
    return;
  }
  if (!mc || typeof mc.registerTool !== 'function') return;

  // Everything used after page scripts start is saved here. A global named in a function body is
  // looked up when the function runs, and a page can replace it with a getter, so function bodies
  // name only these.
  const win = window;
  const addListener = EventTarget.prototype.addEventListener;
  const dispatch = EventTarget.prototype.dispatchEvent;
  const CE = CustomEvent;
  const detailOf = Object.getOwnPropertyDescriptor(CustomEvent.prototype, 'detail').get;
  const J = JSON;
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  const AC = AbortController;
  const abortCtl = AbortController.prototype.abort;
  const signalOf = Object.getOwnPropertyDescriptor(AbortController.prototype, 'signal').get;
  const abortedOf = Object.getOwnPropertyDescriptor(AbortSignal.prototype, 'aborted').get;
  const AS = AbortSignal;
  const then = Promise.prototype.then;
  const resolve = Promise.resolve.bind(Promise);
  const reject = Promise.reject.bind(Promise);
  const DOMEx = DOMException;
  const getProto = Object.getPrototypeOf;
  const setProto = Object.setPrototypeOf;
  const objectProto = Object.prototype;
  const hasOwn = Object.prototype.hasOwnProperty;
  const isArray = Array.isArray;
  const keys = Object.keys;
  const isFinite = Number.isFinite;
  const defineProperty = Object.defineProperty;
  const create = Object.create;
  const StringC = String;
  const queue = queueMicrotask;
  const MAX_DEPTH = 64;

  const proto = getProto(mc);
  const owner = proto && typeof proto.registerTool === 'function' ? proto : mc;
  const nativeRegister = owner.registerTool;

  // State. Null-prototype objects, so page patches to Object.prototype or Map cannot reach it.
  const tools = create(null); // name → current registration
  const calls = create(null); // callId → {reg, ctl, done}
  const NOT_DATA = create(null); // what data() returns for a value that is not JSON data
  let order = 0;

  // nullArray returns an empty array that inherits nothing, so neither writing its elements nor
  // stringifying it reaches Array.prototype or Object.prototype.
  function nullArray() {
    const a = [];
    setProto(a, null);
    return a;
  }

  // own reads o's own property k, never an inherited one.
  function own(o, k) {
    return o !== null && typeof o === 'object' && apply(hasOwn, o, [k]) ? o[k] : undefined;
  }

  // send posts msg, which must be built of null-prototype objects and arrays only: stringifying it
  // then looks up no toJSON, and the event's init dictionary no bubbles, cancelable or composed.
  function send(msg) {
    msg.from = 'observer';
    apply(dispatch, win, [new CE(nonce, { __proto__: null, detail: apply(stringify, J, [msg]) })]);
  }

  // data returns a copy of v made of null-prototype objects and arrays when v is JSON data that
  // survives a round trip unchanged, and NOT_DATA when it is not.
  function data(v, depth) {
    if (depth > MAX_DEPTH) return NOT_DATA;
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
    if (typeof v === 'number') return isFinite(v) ? v : NOT_DATA;
    if (typeof v !== 'object') return NOT_DATA;
    if (isArray(v)) {
      const a = nullArray();
      for (let i = 0; i < v.length; i++) {
        const x = data(v[i], depth + 1);
        if (x === NOT_DATA) return NOT_DATA;
        a[i] = x;
      }
      return a;
    }
    const p = getProto(v);
    if (p !== objectProto && p !== null) return NOT_DATA;
    const o = create(null);
    const ks = keys(v);
    for (let i = 0; i < ks.length; i++) {
      const x = data(v[ks[i]], depth + 1);
      if (x === NOT_DATA) return NOT_DATA;
      o[ks[i]] = x;
    }
    return o;
  }

  // describe copies the fields of a tool an agent is shown, or returns null when they cannot
  // survive JSON: such a tool can never be described to a remote agent, so it is not recorded.
  function describe(tool) {
    const d = { __proto__: null, name: tool.name, description: tool.description };
    if (tool.title !== undefined) d.title = tool.title;
    if (tool.inputSchema !== undefined) d.inputSchema = tool.inputSchema;
    if (tool.annotations !== undefined) d.annotations = tool.annotations;
    if (typeof d.name !== 'string') return null;
    const copy = data(d, 0);
    return copy === NOT_DATA ? null : copy;
  }

  function announce() {
    const list = nullArray();
    const names = keys(tools);
    for (let i = 0; i < names.length; i++) list[list.length] = tools[names[i]].desc;
    send({ __proto__: null, type: 'tools', tools: list });
  }

  function finish(callId, outcome) {
    const c = calls[callId];
    if (!c || c.done) return;
    c.done = true;
    delete calls[callId];
    delete c.reg.calls[callId];
    outcome.type = 'result';
    outcome.callId = callId;
    send(outcome);
  }

  function install(reg) {
    if (reg.signal && apply(abortedOf, reg.signal, [])) return;
    tools[reg.desc.name] = reg; // re-registration wins
    announce();
  }

  // withdraw removes a registration whose signal fired, unless a newer one replaced it, and
  // fails the calls still running on it.
  function withdraw(reg) {
    if (tools[reg.desc.name] === reg) {
      delete tools[reg.desc.name];
      announce();
    }
    const ids = keys(reg.calls);
    for (let i = 0; i < ids.length; i++) {
      const c = calls[ids[i]];
      if (c) apply(abortCtl, c.ctl, [new DOMEx('The page withdrew the tool.', 'AbortError')]);
      finish(ids[i], { __proto__: null, ok: false, error: `The page withdrew the tool "${reg.desc.name}" while the call was running.` });
    }
  }

  // isSignal says whether s is a real AbortSignal (instanceof would ask the page's hasInstance).
  function isSignal(s) {
    try {
      apply(abortedOf, s, []);
      return true;
    } catch {
      return false;
    }
  }

  function observe(tool, options, promise) {
    if (!tool || typeof tool !== 'object' || typeof tool.execute !== 'function') return;
    const desc = describe(tool);
    if (!desc) return;
    let signal = options && typeof options === 'object' ? options.signal : undefined;
    if (!isSignal(signal)) signal = undefined;
    const reg = { __proto__: null, desc, tool, execute: tool.execute, signal, calls: create(null), n: ++order };
    if (signal) apply(addListener, signal, ['abort', () => withdraw(reg), { __proto__: null, once: true }]);
    // Record it once the browser accepted it, so the record mirrors what is really registered.
    apply(then, promise, [() => install(reg), () => {}]);
  }

  function registerTool(tool, options) {
    const promise = apply(nativeRegister, this, arguments);
    try {
      if (this === mc && promise && typeof promise === 'object') observe(tool, options, promise);
    } catch {
      // The page's own registration went through; a tool the observer cannot read is not shared.
    }
    return promise;
  }
  defineProperty(registerTool, 'name', { __proto__: null, value: 'registerTool' });
  defineProperty(registerTool, 'length', { __proto__: null, value: nativeRegister.length });
  defineProperty(owner, 'registerTool', { __proto__: null, value: registerTool, writable: true, enumerable: true, configurable: true });

  function errorText(e) {
    try {
      if (e && typeof e === 'object' && typeof e.message === 'string' && e.message !== '') return e.message;
      return StringC(e);
    } catch {
      return 'The tool failed with an error that cannot be read.';
    }
  }

  // run and cancel take a message read by onEvent and run in a microtask, when the nonce event is
  // no longer window.event: they call into the page (execute, its abort listeners).
  function run(m) {
    const reg = tools[m.tool];
    if (calls[m.callId]) return;
    if (!reg) {
      send({ __proto__: null, type: 'result', callId: m.callId, ok: false, error: `The page has no tool "${m.tool}" now.` });
      return;
    }
    const ctl = new AC();
    calls[m.callId] = { __proto__: null, reg, ctl, done: false };
    reg.calls[m.callId] = true;
    let p;
    try {
      p = resolve(apply(reg.execute, reg.tool, [m.args, { signal: apply(signalOf, ctl, []) }]));
    } catch (e) {
      p = reject(e);
    }
    apply(then, p, [
      (result) => {
        const value = data(result === undefined ? null : result, 0);
        if (value === NOT_DATA) {
          finish(m.callId, { __proto__: null, ok: false, error: 'The tool returned a result that is not JSON data.' });
          return;
        }
        finish(m.callId, { __proto__: null, ok: true, result: value });
      },
      (e) => finish(m.callId, { __proto__: null, ok: false, error: errorText(e) }),
    ]);
  }

  function cancel(m) {
    const c = calls[m.callId];
    if (!c) return;
    const reason = typeof m.reason === 'string' && m.reason !== '' ? m.reason : 'The call was cancelled.';
    apply(abortCtl, c.ctl, [new DOMEx(reason, 'AbortError')]);
    finish(m.callId, { __proto__: null, ok: false, error: reason });
  }

  // onEvent runs while its event is window.event: it runs no page code, only parses (JSON.parse
  // defines properties, it sets none), reads own fields into a null-prototype message and queues.
  function onEvent(ev) {
    let raw;
    try {
      raw = apply(parse, J, [apply(detailOf, ev, [])]);
    } catch {
      return;
    }
    if (own(raw, 'from') !== 'bridge') return;
    const m = { __proto__: null, type: own(raw, 'type'), callId: own(raw, 'callId'), tool: own(raw, 'tool'), args: own(raw, 'args'), reason: own(raw, 'reason') };
    if (typeof m.callId !== 'string') return;
    if (m.type === 'call' && typeof m.tool === 'string' && m.args !== null && typeof m.args === 'object') {
      queue(() => run(m));
    } else if (m.type === 'cancel') {
      queue(() => cancel(m)); // after a run queued before it
    }
  }

  apply(addListener, win, [nonce, onEvent]);
})();
