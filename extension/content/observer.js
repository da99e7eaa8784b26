// observer.js runs in the page's own JavaScript world (MAIN), at document_start, in the top frame,
// right after bridge.js. It sees which WebMCP tools the page registers without becoming a tool
// provider: it wraps the browser's native registerTool, calls through and returns the native
// promise, and never adds a modelContext where the browser has none.
//
// It talks to the bridge only through CustomEvents whose type is a nonce the bridge put on <html>;
// it reads and removes that attribute before any page script runs, and it saves every global it
// uses now, so a page script that patches them later sees nothing and can forge nothing.
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

  // Everything used after page scripts start is saved here.
  const win = window;
  const addListener = EventTarget.prototype.addEventListener;
  const dispatch = EventTarget.prototype.dispatchEvent;
  const CE = CustomEvent;
  const detailOf = Object.getOwnPropertyDescriptor(CustomEvent.prototype, 'detail').get;
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
  const objectProto = Object.prototype;
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
  let order = 0;

  function send(msg) {
    msg.from = 'observer';
    apply(dispatch, win, [new CE(nonce, { detail: apply(stringify, JSON, [msg]) })]);
  }

  // plain says whether v is JSON data that survives a round trip unchanged.
  function plain(v, depth) {
    if (depth > MAX_DEPTH) return false;
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return true;
    if (typeof v === 'number') return isFinite(v);
    if (typeof v !== 'object') return false;
    if (isArray(v)) {
      for (let i = 0; i < v.length; i++) if (!plain(v[i], depth + 1)) return false;
      return true;
    }
    const p = getProto(v);
    if (p !== objectProto && p !== null) return false;
    const ks = keys(v);
    for (let i = 0; i < ks.length; i++) if (!plain(v[ks[i]], depth + 1)) return false;
    return true;
  }

  // describe copies the fields of a tool an agent is shown, or returns null when they cannot
  // survive JSON: such a tool can never be described to a remote agent, so it is not recorded.
  function describe(tool) {
    const d = { name: tool.name, description: tool.description };
    if (tool.title !== undefined) d.title = tool.title;
    if (tool.inputSchema !== undefined) d.inputSchema = tool.inputSchema;
    if (tool.annotations !== undefined) d.annotations = tool.annotations;
    if (typeof d.name !== 'string' || !plain(d, 0)) return null;
    return apply(parse, JSON, [apply(stringify, JSON, [d])]);
  }

  function announce() {
    const list = [];
    const names = keys(tools);
    for (let i = 0; i < names.length; i++) list[list.length] = tools[names[i]].desc;
    send({ type: 'tools', tools: list });
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
      finish(ids[i], { ok: false, error: `The page withdrew the tool "${reg.desc.name}" while the call was running.` });
    }
  }

  function observe(tool, options, promise) {
    if (!tool || typeof tool !== 'object' || typeof tool.execute !== 'function') return;
    const desc = describe(tool);
    if (!desc) return;
    let signal = options && typeof options === 'object' ? options.signal : undefined;
    if (!(signal instanceof AS)) signal = undefined;
    const reg = { desc, tool, execute: tool.execute, signal, calls: create(null), n: ++order };
    if (signal) apply(addListener, signal, ['abort', () => withdraw(reg), { once: true }]);
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
  defineProperty(registerTool, 'name', { value: 'registerTool' });
  defineProperty(registerTool, 'length', { value: nativeRegister.length });
  defineProperty(owner, 'registerTool', { value: registerTool, writable: true, enumerable: true, configurable: true });

  function errorText(e) {
    try {
      if (e && typeof e === 'object' && typeof e.message === 'string' && e.message !== '') return e.message;
      return StringC(e);
    } catch {
      return 'The tool failed with an error that cannot be read.';
    }
  }

  function run(m) {
    const reg = tools[m.tool];
    if (calls[m.callId]) return;
    if (!reg) {
      send({ type: 'result', callId: m.callId, ok: false, error: `The page has no tool "${m.tool}" now.` });
      return;
    }
    const ctl = new AC();
    calls[m.callId] = { reg, ctl, done: false };
    reg.calls[m.callId] = true;
    let p;
    try {
      p = resolve(apply(reg.execute, reg.tool, [m.args, { signal: apply(signalOf, ctl, []) }]));
    } catch (e) {
      p = reject(e);
    }
    apply(then, p, [
      (result) => {
        const value = result === undefined ? null : result;
        if (!plain(value, 0)) {
          finish(m.callId, { ok: false, error: 'The tool returned a result that is not JSON data.' });
          return;
        }
        finish(m.callId, { ok: true, result: value });
      },
      (e) => finish(m.callId, { ok: false, error: errorText(e) }),
    ]);
  }

  function cancel(m) {
    const c = calls[m.callId];
    if (!c) return;
    apply(abortCtl, c.ctl, [new DOMEx(m.reason || 'The call was cancelled.', 'AbortError')]);
    finish(m.callId, { ok: false, error: m.reason || 'The call was cancelled.' });
  }

  function onEvent(ev) {
    let m;
    try {
      m = apply(parse, JSON, [apply(detailOf, ev, [])]);
    } catch {
      return;
    }
    if (!m || m.from !== 'bridge' || typeof m.callId !== 'string') return;
    if (m.type === 'call' && typeof m.tool === 'string' && m.args && typeof m.args === 'object') {
      queue(() => run(m));
    } else if (m.type === 'cancel') {
      cancel(m);
    }
  }

  apply(addListener, win, [nonce, onEvent]);
})();
