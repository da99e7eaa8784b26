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
//
// Declarative tools (a <form toolname tooldescription [toolautosubmit]>) never pass through
// registerTool: Chromium builds them from the form itself. The observer reads them from the
// browser's own getTools() whenever the page's modelContext fires toolchange (once per form added,
// changed or removed), keeps those of this frame that a form of this document declares, and runs
// them with the browser's executeTool(tool, input, {signal}), which fills the form and submits it.
// Measured on Chromium 156: executeTool resolves with the JSON text of the value the page passed to
// the submit event's respondWith, with null when the form navigated instead, and rejects with a
// generic UnknownError when respondWith's promise rejects (so respondWith is wrapped, calling
// through, to hear the page's own reason). A form without toolautosubmit waits for
// the person to press its submit button; it is announced with autosubmit: false and a remote call
// of it is refused at once (see docs/PROTOCOL.md).
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
  const isExtensible = Object.isExtensible;
  const deleteProperty = Reflect.deleteProperty;
  const strSlice = String.prototype.slice;
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
  const doc = document;
  const getAttr = Element.prototype.getAttribute;
  const hasAttr = Element.prototype.hasAttribute;
  const qsa = typeof doc.querySelectorAll === 'function' ? doc.querySelectorAll : null;
  const NL = typeof NodeList === 'function' ? NodeList.prototype : null;
  const listLength = NL ? Object.getOwnPropertyDescriptor(NL, 'length').get : null;
  const listItem = NL ? NL.item : null;
  const ownDesc = Object.getOwnPropertyDescriptor;
  const arrayProto = Array.prototype;
  const reTest = RegExp.prototype.test;
  const IDENT = /^[A-Za-z_$][\w$]*$/;
  const con = console;
  const warnLog = console.warn;
  const shadowDesc = typeof Element === 'function' ? ownDesc(Element.prototype, 'shadowRoot') : undefined;
  const shadowOf = shadowDesc && shadowDesc.get;
  const fragQsa = typeof DocumentFragment === 'function' ? DocumentFragment.prototype.querySelectorAll : null;
  const MAX_DEPTH = 64;
  const MAX_ERROR = 4096; // the bridge's maxErrorChars
  const later = typeof setTimeout === 'function' ? setTimeout : null;
  const MO = typeof MutationObserver === 'function' ? MutationObserver : null;
  const persistedDesc = typeof PageTransitionEvent === 'function' ? ownDesc(PageTransitionEvent.prototype, 'persisted') : undefined;
  const persistedOf = persistedDesc && typeof persistedDesc.get === 'function' ? persistedDesc.get : null;
  const CACHED = 'The page was put in the back/forward cache while the call was running: the call was given up.';
  const observeNodes = MO ? MO.prototype.observe : null;

  const proto = getProto(mc);
  const owner = proto && typeof proto.registerTool === 'function' ? proto : mc;
  const nativeRegister = owner.registerTool;
  const nativeGetTools = typeof owner.getTools === 'function' ? owner.getTools : null;
  const nativeExecuteTool = typeof owner.executeTool === 'function' ? owner.executeTool : null;

  // State. Null-prototype objects, so page patches to Object.prototype or Map cannot reach it.
  const tools = create(null); // name → current registration
  let forms = create(null); // name → {desc, calls} of a declarative tool of this document
  const pageErrors = create(null); // form tool name → the page's reason its respondWith promise rejected
  let formsText = '[]'; // forms' descriptors as JSON, to announce only a change
  const calls = create(null); // callId → {reg, ctl, done}
  const observed = create(null); // name → true for every tool the page passed to registerTool
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

  // follow runs ok(value) once v has settled, or err(reason) once it failed, and never both; it
  // never asks the page's world how, and its own promises never reject (so nothing of the
  // observer reaches the page's unhandledrejection listeners).
  //
  // A native promise (the browser's, or the page's own) is followed with the then saved at
  // document_start, with an own constructor of undefined on it for that one synchronous call:
  // Promise.prototype.then otherwise reads promise.constructor[Symbol.species] (both the
  // page's to replace) and makes its promise with that; await and Promise.resolve read
  // promise.constructor and, when the page changed it, follow the page's then. The property is
  // removed at once, before any page code can run. A thenable the page made itself (its own
  // class's then) is the page's answer and is awaited; a then that every object inherits (the
  // page's Object.prototype.then) is ignored, as JSON ignores it. Anything else is the value,
  // in a later microtask.
  function follow(v, ok, err) {
    const okOnce = (x) => {
      try {
        ok(x);
      } catch {
        // ok is the observer's own; its failure must not reach the page.
      }
    };
    const errOnce = (e) => {
      try {
        err(e);
      } catch {
        // As above.
      }
    };
    let native = false;
    try {
      if (v !== null && typeof v === 'object' && !ownDesc(v, 'constructor') && isExtensible(v)) {
        defineProperty(v, 'constructor', { __proto__: null, value: undefined, configurable: true });
        try {
          apply(then, v, [okOnce, errOnce]);
          native = true;
        } catch {
          // Not a native promise: its then is the page's, below.
        } finally {
          deleteProperty(v, 'constructor');
        }
      }
    } catch {
      // A Proxy whose traps throw: not a native promise either.
    }
    if (!native) awaitValue(v, okOnce, errOnce);
  }

  async function awaitValue(v, ok, err) {
    let value;
    try {
      if (thenable(v)) value = await v;
      else {
        await undefined;
        value = v;
      }
    } catch (e) {
      err(e);
      return;
    }
    ok(value);
  }

  // thenable says whether v has a then of its own or of its class (not one every object or
  // array inherits), read without running a getter.
  function thenable(v) {
    if (v === null || (typeof v !== 'object' && typeof v !== 'function')) return false;
    for (let o = v, hops = 0; o !== null && hops < 32; o = getProto(o), hops++) {
      if (o !== v && (o === objectProto || o === arrayProto || getProto(o) === null)) return false;
      const d = ownDesc(o, 'then');
      if (d) return typeof d.value === 'function' || d.get !== undefined;
    }
    return false;
  }

  // lie names what the page changed that makes its promises unanswerable, or returns null: with
  // a then on Object.prototype (or Array.prototype) every object is a thenable, so no promise
  // of an object ever settles, the page's own async execute's included (the engine itself then
  // calls the page's then), and nothing outside the page can make it. Read without running any
  // page code.
  function lie() {
    const d = ownDesc(objectProto, 'then');
    if (d && (d.get || typeof d.value === 'function')) return 'defines Object.prototype.then, so every object on it looks like a promise and no promise of one ever settles';
    for (let o = arrayProto, hops = 0; o !== null && o !== objectProto && hops < 32; o = getProto(o), hops++) {
      const a = ownDesc(o, 'then');
      if (a && (a.get || typeof a.value === 'function')) return 'defines Array.prototype.then, so every array on it looks like a promise and no promise of one ever settles';
    }
    return null;
  }

  // send posts msg, which must be built of null-prototype objects and arrays only: stringifying it
  // then looks up no toJSON, and the event's init dictionary no bubbles, cancelable or composed.
  function send(msg) {
    msg.from = 'observer';
    apply(dispatch, win, [new CE(nonce, { __proto__: null, detail: apply(stringify, J, [msg]) })]);
  }

  // plain says whether v is a plain object: its prototype is null or the root of a realm's
  // objects (Object.prototype of this page or of one of its frames, whose objects a frame may
  // hand the page), not a class's (a Zod schema, a Map, a Date).
  function plain(v) {
    const p = getProto(v);
    return p === null || p === objectProto || getProto(p) === null;
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
    if (!plain(v)) return NOT_DATA;
    const o = create(null);
    const ks = keys(v);
    for (let i = 0; i < ks.length; i++) {
      const x = data(v[ks[i]], depth + 1);
      if (x === NOT_DATA) return NOT_DATA;
      o[ks[i]] = x;
    }
    return o;
  }

  // toJSONOf returns the toJSON method v's own class gives it (Date's, or a library's money or
  // date type), found without a lookup: an own data property or one on a prototype other than
  // Object.prototype and Array.prototype (of any realm: the page's or a frame's), so a page's
  // patch of those is never run.
  function toJSONOf(v) {
    for (let o = v, hops = 0; o !== null && hops < 32; o = getProto(o), hops++) {
      if (o !== v && (o === objectProto || o === arrayProto || getProto(o) === null || isArray(o))) break;
      const d = ownDesc(o, 'toJSON');
      if (d) return typeof d.value === 'function' ? d.value : undefined;
    }
    return undefined;
  }

  // pathOf names where in a result a value sits, for the agent: result.items[2].price.
  function pathOf(path, k) {
    return typeof k === 'number' ? `${path}[${k}]` : apply(reTest, IDENT, [k]) ? `${path}.${k}` : `${path}[${apply(stringify, J, [k])}]`;
  }

  // result converts what a tool's execute returned into JSON data as JSON.stringify would (the
  // page's own fetch bodies and other WebMCP clients do the same): toJSON is called (a Date
  // becomes its ISO text), a class instance gives its own enumerable fields, undefined and
  // functions are left out of objects and become null in arrays, NaN and ±Infinity become null.
  // What JSON.stringify would throw on, and what it would not write at all, fails with the place
  // and the reason: {error}. Otherwise {value}, built of null-prototype objects and arrays.
  function result(v, root) {
    const stack = nullArray();
    let failure = null;
    const fail = (text) => {
      failure = text;
      return NOT_DATA;
    };
    const convert = (v, key, path, depth) => {
      if (v !== null && (typeof v === 'object' || typeof v === 'function')) {
        const toJSON = toJSONOf(v);
        if (toJSON) {
          try {
            v = apply(toJSON, v, [key]);
          } catch (e) {
            return fail(`its toJSON at ${path} threw: ${errorText(e)}`);
          }
        }
      }
      if (v === null || typeof v === 'string' || typeof v === 'boolean') return v;
      if (typeof v === 'number') return isFinite(v) ? v : null;
      if (typeof v === 'bigint') return fail(`it holds a BigInt at ${path}, which JSON cannot carry (return it as a string or a number)`);
      if (typeof v !== 'object') return undefined; // undefined, a function or a symbol: left out
      if (depth >= MAX_DEPTH) return fail(`it is nested more than ${MAX_DEPTH} levels deep at ${path}`);
      for (let i = 0; i < stack.length; i++) {
        if (stack[i] === v) return fail(`it refers to itself at ${path} (a cycle), which JSON cannot carry`);
      }
      stack[stack.length] = v;
      let out;
      if (isArray(v)) {
        out = nullArray();
        const n = v.length;
        for (let i = 0; i < n; i++) {
          const x = convert(v[i], StringC(i), pathOf(path, i), depth + 1);
          if (x === NOT_DATA) return NOT_DATA;
          out[i] = x === undefined ? null : x;
        }
      } else {
        out = create(null);
        const ks = keys(v);
        for (let i = 0; i < ks.length; i++) {
          const x = convert(v[ks[i]], ks[i], pathOf(path, ks[i]), depth + 1);
          if (x === NOT_DATA) return NOT_DATA;
          if (x !== undefined) out[ks[i]] = x;
        }
      }
      stack.length--;
      return out;
    };
    if (v === undefined) return { __proto__: null, value: null };
    if (typeof v === 'function' || typeof v === 'symbol') {
      return { __proto__: null, error: `The tool returned a ${typeof v}, not JSON data. This is the site's to fix; no arguments change it.` };
    }
    let value;
    try {
      value = convert(v, '', root || 'result', 0);
    } catch (e) {
      value = fail(`reading it threw: ${errorText(e)}`);
    }
    if (value === NOT_DATA) return { __proto__: null, why: failure, error: `The tool's result cannot be sent as JSON: ${failure}. This is the site's to fix; no arguments change it.` };
    return { __proto__: null, value: value === undefined ? null : value };
  }

  // describe copies the fields of a tool an agent is shown, or returns null when they cannot
  // survive JSON: such a tool can never be described to a remote agent, so it is not recorded.
  function describe(tool) {
    const d = { __proto__: null, name: tool.name, description: tool.description, kind: 'imperative' };
    if (tool.title !== undefined) d.title = tool.title;
    if (tool.inputSchema !== undefined) d.inputSchema = tool.inputSchema;
    if (tool.annotations !== undefined) d.annotations = tool.annotations;
    if (typeof d.name !== 'string') return null;
    const copy = data(d, 0);
    return copy === NOT_DATA ? null : copy;
  }

  let announced = false; // the page's tools were sent at least once
  function announce() {
    announced = true;
    const list = nullArray();
    const names = keys(tools);
    for (let i = 0; i < names.length; i++) list[list.length] = tools[names[i]].desc;
    const declared = keys(forms);
    for (let i = 0; i < declared.length; i++) {
      if (!tools[declared[i]]) list[list.length] = forms[declared[i]].desc;
    }
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
    // The page's error text may be any length (a message of megabytes); the bridge keeps 4096
    // characters of it, and would drop a message far longer whole, leaving the call unanswered.
    if (typeof outcome.error === 'string' && outcome.error.length > MAX_ERROR) outcome.error = apply(strSlice, outcome.error, [0, MAX_ERROR]);
    send(outcome);
  }

  function install(reg) {
    if (reg.signal && apply(abortedOf, reg.signal, [])) return;
    tools[reg.desc.name] = reg; // re-registration wins
    announce();
  }

  // formOf returns the first <form> of this document whose toolname is name, or null. Only such a
  // tool counts as declarative: getTools() also lists the tools of child frames.
  // A form may sit in an open shadow root (a web component's): Chromium lists it as a tool of
  // this document, so it is looked for there too, after the document itself.
  function formOf(name) {
    if (!qsa || !listLength) return null;
    try {
      return formIn(qsa, doc, name, 0);
    } catch {
      return null;
    }
  }

  function formIn(query, root, name, depth) {
    const found = apply(query, root, ['form[toolname]']);
    const n = apply(listLength, found, []);
    for (let i = 0; i < n; i++) {
      const f = apply(listItem, found, [i]);
      if (apply(getAttr, f, ['toolname']) === name) return f;
    }
    if (!shadowOf || !fragQsa || depth >= 8) return null;
    const all = apply(query, root, ['*']);
    const m = apply(listLength, all, []);
    for (let i = 0; i < m; i++) {
      const sr = apply(shadowOf, apply(listItem, all, [i]), []);
      const f = sr ? formIn(fragQsa, sr, name, depth + 1) : null;
      if (f) return f;
    }
    return null;
  }

  // describeForm copies what the browser reports of a form tool. Forms carry no annotations, so
  // none are sent (the server treats the tool as a write); autosubmit says whether the form may be
  // submitted without the person.
  function describeForm(t, form) {
    const d = { __proto__: null, name: own(t, 'name'), description: own(t, 'description'), kind: 'declarative', autosubmit: apply(hasAttr, form, ['toolautosubmit']) };
    const schema = own(t, 'inputSchema');
    if (schema !== undefined) d.inputSchema = schema;
    const copy = data(d, 0);
    return copy === NOT_DATA ? null : copy;
  }

  // findTools returns a promise of the browser's own list of this document's tools.
  function findTools(ok, err) {
    let p;
    try {
      p = apply(nativeGetTools, mc, []);
    } catch (e) {
      follow(undefined, () => err(e), err);
      return;
    }
    follow(p, ok, err);
  }

  // adopt takes the browser's tool list and keeps the declarative tools of this document.
  function adopt(list) {
    const next = create(null);
    const descs = nullArray();
    const n = isArray(list) ? list.length : 0;
    for (let i = 0; i < n; i++) {
      const t = list[i];
      const name = own(t, 'name');
      if (typeof name !== 'string' || next[name]) continue;
      if (own(t, 'window') !== win) {
        warnOnce(`frame:${name}`, `the WebMCP tool "${name}" is registered in a frame of this page, and Tabbridge shares only the top frame's tools (frames may be other sites). Register it in the top document to share it.`);
        continue;
      }
      const form = formOf(name);
      if (!form && !observed[name]) {
        warnOnce(`form:${name}`, `the WebMCP tool "${name}" is not shared: the browser lists it, but Tabbridge finds neither its <form toolname="${name}"> in the document or an open shadow root (a closed shadow root hides it), nor its registerTool call.`);
      }
      const desc = form && describeForm(t, form);
      if (!desc) continue;
      const prev = forms[name];
      next[name] = { __proto__: null, desc, calls: prev ? prev.calls : create(null) };
      descs[descs.length] = desc;
    }
    const text = apply(stringify, J, [descs]);
    forms = next;
    if (text === formsText) return;
    formsText = text;
    announce();
  }

  // refresh reads getTools() again, one read at a time; a toolchange during a read reads again.
  let reading = false;
  let readAgain = false;
  function refresh() {
    if (!nativeGetTools) return;
    const lying = lie();
    if (lying) {
      // getTools() resolves with an array, which the page's then would swallow: no read ever
      // ends. The forms are not shared while the page is so.
      warnOnce('lie:forms', `this page ${lying}, so Tabbridge cannot read its form tools, and no call of its tools could answer. Remove that definition to share them.`);
      return;
    }
    if (reading) {
      readAgain = true;
      return;
    }
    reading = true;
    const done = () => {
      reading = false;
      if (readAgain) {
        readAgain = false;
        refresh();
      }
    };
    findTools((list) => {
      try {
        adopt(list);
      } finally {
        done();
      }
    }, done);
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

  // warnOnce tells the site's developer, in the page's console, why a tool is not shared, once
  // per key.
  const warned = create(null);
  let warnings = 0;
  function warnOnce(key, text) {
    if (warned[key] || warnings >= 1000) return;
    warned[key] = true;
    warnings++;
    try {
      apply(warnLog, con, [`Tabbridge: ${text}`]);
    } catch {
      // The page replaced its console; nothing else to tell.
    }
  }

  // unreadable tells the site's developer, in the page's console, which field of a tool the
  // browser took cannot be described to an agent, so the tool is not shared.
  function unreadable(tool) {
    const fields = ['name', 'title', 'description', 'inputSchema', 'annotations'];
    let bad = 'its name is not a string';
    for (let i = 0; i < fields.length; i++) {
      const v = tool[fields[i]];
      if (v !== undefined && (fields[i] !== 'name' || typeof v === 'string') && data(v, 0) === NOT_DATA) {
        const r = result(v, fields[i]);
        bad = r.why !== undefined ? `its ${fields[i]} cannot be sent as JSON: ${r.why}` :
          `its ${fields[i]} is not JSON data (it holds a function, a class instance such as a Zod schema, NaN or undefined): give a plain JSON object`;
        break;
      }
    }
    const name = typeof tool.name === 'string' ? tool.name : '';
    warnOnce(`unreadable:${name}`, `the WebMCP tool "${name}" is not shared: ${bad}.`);
  }

  function observe(tool, options, promise) {
    if (!tool || typeof tool !== 'object' || typeof tool.execute !== 'function') return;
    if (typeof tool.name === 'string') observed[tool.name] = true;
    const desc = describe(tool);
    if (!desc) {
      follow(promise, () => unreadable(tool), () => {}); // only a tool the browser took
      return;
    }
    let signal = options && typeof options === 'object' ? options.signal : undefined;
    if (!isSignal(signal)) signal = undefined;
    const reg = { __proto__: null, desc, tool, execute: tool.execute, signal, calls: create(null), n: ++order };
    if (signal) apply(addListener, signal, ['abort', () => withdraw(reg), { __proto__: null, once: true }]);
    // Record it once the browser accepted it, so the record mirrors what is really registered.
    follow(promise, () => install(reg), () => {});
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

  // respondWith is wrapped, like registerTool, only to hear why a form tool's promise rejected:
  // Chromium's executeTool then rejects with a generic "respondWith promise was rejected", and the
  // page's own reason is what an agent can act on. It calls through and returns what the browser
  // returns; a page that calls it on anything else is left to the browser's own checks.
  const SE = typeof SubmitEvent === 'function' ? SubmitEvent.prototype : null;
  const nativeRespondWith = SE && typeof SE.respondWith === 'function' ? SE.respondWith : null;
  const targetOf = typeof Event === 'function' ? Object.getOwnPropertyDescriptor(Event.prototype, 'target').get : null;
  if (nativeRespondWith && targetOf) {
    const respondWith = function respondWith(promise) {
      try {
        const form = apply(targetOf, this, []);
        const name = form ? apply(getAttr, form, ['toolname']) : null;
        if (typeof name === 'string' && forms[name]) {
          if (submits[name]) submits[name].responded = true;
          delete pageErrors[name];
          follow(promise, () => {}, (e) => (pageErrors[name] = errorText(e)));
        }
      } catch {
        // Not an event of a form tool, or not a promise: the browser's own call decides.
      }
      return apply(nativeRespondWith, this, arguments);
    };
    defineProperty(respondWith, 'length', { __proto__: null, value: nativeRespondWith.length });
    defineProperty(SE, 'respondWith', { __proto__: null, value: respondWith, writable: true, enumerable: true, configurable: true });
  }

  // alert(), confirm() and prompt() stop the page's main thread until the person answers them in
  // the tab: nothing of the page runs meanwhile, this observer and the bridge included, so a call
  // whose execute opens one (or that arrives while one is open) could answer only at its
  // deadline, and the agent would not know why. They are wrapped, calling through, to end the
  // running calls first, saying so, and to tell the worker the page is blocked until the dialog
  // returns (the bridge posts both before the dialog blocks), so it sends no call meanwhile. The
  // calls are not aborted: the page goes on where it was once the person answers, which is why
  // the agent is told that the call may have run and may still.
  const DIALOGS = ['alert', 'confirm', 'prompt'];
  for (let i = 0; i < DIALOGS.length; i++) {
    const kind = DIALOGS[i];
    const d = ownDesc(win, kind);
    const native = d && d.value;
    if (typeof native !== 'function') continue;
    const wrapped = {
      [kind]() {
        try {
          dialogOpened(kind, arguments.length > 0 ? arguments[0] : undefined);
        } catch {
          // The page's own dialog still opens.
        }
        try {
          return apply(native, this, arguments);
        } finally {
          send({ __proto__: null, type: 'dialog', open: false });
        }
      },
    }[kind];
    defineProperty(wrapped, 'length', { __proto__: null, value: native.length });
    defineProperty(win, kind, { __proto__: null, value: wrapped, writable: d.writable, enumerable: d.enumerable, configurable: d.configurable });
  }

  function dialogOpened(kind, message) {
    const ids = keys(calls);
    let said = '';
    let text = '';
    if (message !== undefined) {
      try {
        text = StringC(message);
      } catch {
        text = '';
      }
      if (text.length > 200) text = `${apply(strSlice, text, [0, 200])}…`;
      if (text !== '') said = ` saying ${apply(stringify, J, [text])}`;
    }
    for (let i = 0; i < ids.length; i++) {
      finish(ids[i], { __proto__: null, ok: false, error: `The page opened ${kind === 'alert' ? 'an' : 'a'} ${kind}() dialog${said} while the call was running. The dialog stops the page until the person answers it in the tab, so no answer can come now. The call may have run, and may still go on once the person answers: ask them, or check the page's state, before calling again.` });
    }
    send({ __proto__: null, type: 'dialog', open: true, kind, text });
  }

  // A form of a running call that the page's own script handles (its submit listener calls
  // preventDefault(), as nearly every site's does) without respondWith, since the site never heard
  // of WebMCP: Chromium's executeTool then rejects ("the site has a programming error"), yet the
  // page did handle the submit — the subscription made, the message sent. Saying "failed" would
  // have an agent repeat it, so the call answers that the form was submitted and nothing came
  // back. submits[name] is that call's submit event, seen in the capture phase (before any page
  // listener), and whether respondWith was called.
  const submits = create(null);
  const preventedOf = typeof Event === 'function' ? Object.getOwnPropertyDescriptor(Event.prototype, 'defaultPrevented').get : null;
  function onSubmit(ev) {
    try {
      const form = apply(targetOf, ev, []);
      const name = form ? apply(getAttr, form, ['toolname']) : null;
      if (typeof name === 'string' && submits[name] && submits[name].ev === null) submits[name].ev = ev;
    } catch {
      // Not a form of ours.
    }
  }

  // handledInScript says whether the form of a call (its submit record s) was submitted and the
  // page prevented its default without answering.
  function handledInScript(s) {
    return !!(s && s.ev && !s.responded && apply(preventedOf, s.ev, []));
  }

  // formError is why a form call failed: the page's own reason when its respondWith promise
  // rejected, else what the browser said.
  function formError(name, e) {
    const reason = pageErrors[name];
    delete pageErrors[name];
    return reason !== undefined ? `The form's answer failed: ${reason}` : errorText(e);
  }

  // errorText is what the page threw, in words: an Error's message (its name when it has none),
  // a thrown string as it is, a thrown object as its JSON, nothing at all said as such.
  function errorText(e) {
    try {
      if (e === undefined || e === null || e === '') return `The tool failed without saying why (it threw ${e === '' ? 'an empty string' : StringC(e)}).`;
      if (typeof e !== 'object' && typeof e !== 'function') return StringC(e);
      const message = own(e, 'message') !== undefined ? own(e, 'message') : e.message;
      if (typeof message === 'string' && message !== '') return message;
      const name = e.name;
      if (typeof name === 'string' && name !== '' && typeof message === 'string') return `${name}, with no message`;
      const r = result(e);
      if (r.error === undefined && r.value !== null) {
        const text = apply(stringify, J, [r.value]);
        if (text !== '{}') return `The tool threw ${text}`;
      }
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
    if (!reg && forms[m.tool]) {
      runForm(m, forms[m.tool]);
      return;
    }
    if (!reg) {
      send({ __proto__: null, type: 'result', callId: m.callId, ok: false, error: `The page has no tool "${m.tool}" now.` });
      return;
    }
    if (refuseLying(m)) return;
    const ctl = new AC();
    calls[m.callId] = { __proto__: null, reg, ctl, done: false };
    reg.calls[m.callId] = true;
    watch();
    const returned = (v) => {
      const r = result(v);
      if (r.error !== undefined) {
        finish(m.callId, { __proto__: null, ok: false, error: r.error });
        return;
      }
      const size = over(r.value, m.max);
      if (size > 0) {
        finish(m.callId, { __proto__: null, ok: false, code: 'result_too_large', size, error: 'The result is too large.' });
        return;
      }
      finish(m.callId, { __proto__: null, ok: true, result: r.value });
    };
    const threw = (e) => finish(m.callId, { __proto__: null, ok: false, error: errorText(e) });
    let p;
    try {
      p = apply(reg.execute, reg.tool, [m.args, { signal: apply(signalOf, ctl, []) }]);
    } catch (e) {
      follow(undefined, () => threw(e), threw);
      return;
    }
    follow(p, returned, threw);
  }

  // over returns how large a result is when it is surely over the cap max (the bridge's
  // maxResultBytes), else 0. Its length in UTF-16 units is counted (a string as it is, anything
  // else as its JSON), which is never more than its UTF-8 bytes, so a result counted over is
  // over; the bridge counts the bytes of any result sent, and says the size.
  function over(value, max) {
    if (typeof max !== 'number' || !(max > 0)) return 0;
    let n;
    try {
      n = typeof value === 'string' ? value.length : apply(stringify, J, [value]).length;
    } catch {
      n = jsonLength(value); // its JSON is longer than the longest string the engine makes
    }
    return n > max ? n : 0;
  }

  // jsonLength counts the length of value's JSON text without writing it, escapes not counted (so
  // never more than it is). value is JSON data built by result(): null-prototype objects and
  // arrays, finite numbers, no cycles, at most MAX_DEPTH deep.
  function jsonLength(v) {
    if (typeof v === 'string') return v.length + 2;
    if (v === null || typeof v !== 'object') return StringC(v).length;
    let n = 2;
    if (isArray(v)) {
      for (let i = 0; i < v.length; i++) n += (i > 0 ? 1 : 0) + jsonLength(v[i]);
      return n;
    }
    const ks = keys(v);
    for (let i = 0; i < ks.length; i++) n += (i > 0 ? 1 : 0) + ks[i].length + 3 + jsonLength(v[ks[i]]);
    return n;
  }

  // refuseLying answers a call at once, without running it, on a page whose promises cannot
  // answer (lie()); it says whether it did.
  function refuseLying(m) {
    const lying = lie();
    if (!lying) return false;
    send({ __proto__: null, type: 'result', callId: m.callId, ok: false, error: `The page ${lying}: none of its tools can answer. The call was not run. This is the site's to fix (remove that definition); no arguments change it.` });
    return true;
  }

  // watch checks, once a second while calls run, that the page has not since made its promises
  // unanswerable (a script loaded later that defines Object.prototype.then): the calls then
  // end now, saying so, instead of at their deadline. No page code runs in the check.
  let watching = false;
  function watch() {
    if (watching || !later) return;
    watching = true;
    later(tick, 1000);
  }
  function tick() {
    watching = false;
    const ids = keys(calls);
    if (ids.length === 0) return;
    const lying = lie();
    if (!lying) {
      watch();
      return;
    }
    for (let i = 0; i < ids.length; i++) {
      finish(ids[i], { __proto__: null, ok: false, error: `The page ${lying} (it did so while the call ran), so no answer can come. The call may have run: check the page's state before calling again. This is the site's to fix.` });
    }
  }

  // runForm runs a declarative tool through the browser's executeTool. A form without
  // toolautosubmit would wait, silently, for the person to submit it: it is refused instead.
  function runForm(m, f) {
    const form = formOf(m.tool);
    if (!form) {
      send({ __proto__: null, type: 'result', callId: m.callId, ok: false, error: `The page has no form "${m.tool}" now.` });
      return;
    }
    if (!apply(hasAttr, form, ['toolautosubmit'])) {
      send({ __proto__: null, type: 'result', callId: m.callId, ok: false, error: `The form "${m.tool}" has no toolautosubmit: the site wants the person to check and submit it themselves, so it cannot be run remotely. Nothing was filled in or submitted.` });
      return;
    }
    // A form has one set of fields: a second call while one fills and submits it would mix the
    // two calls' values and answers. It is refused until the first has answered (or ended).
    const busy = submits[m.tool];
    if (busy && calls[busy.callId] && !calls[busy.callId].done) {
      send({ __proto__: null, type: 'result', callId: m.callId, ok: false, error: `The form "${m.tool}" is being filled and submitted for another call right now, and a form holds one call's values at a time. Call again once that call has answered. Nothing was filled in or submitted.` });
      return;
    }
    if (refuseLying(m)) return;
    const ctl = new AC();
    calls[m.callId] = { __proto__: null, reg: f, ctl, done: false, form: true };
    f.calls[m.callId] = true;
    watch();
    const signal = apply(signalOf, ctl, []);
    // This call's submit record; a call that ended early (cancelled) leaves the form to the next,
    // whose record its late answer must not touch.
    const rec = { __proto__: null, ev: null, responded: false, callId: m.callId };
    const release = () => {
      if (submits[m.tool] === rec) delete submits[m.tool];
    };
    const answered = (text) => {
      release();
      finish(m.callId, formOutcome(text));
    };
    const failed = (e) => {
      const handled = handledInScript(rec);
      release();
      if (handled) {
        delete pageErrors[m.tool];
        const result = { __proto__: null, submitted: true, answer: null, note: `The form was filled and submitted, and the page's own script handled it, but the page gave no answer (it does not call respondWith), so whether it succeeded is not known. Do not submit it again to find out: check the page's state with another of its tools, or ask the person.` };
        finish(m.callId, { __proto__: null, ok: true, result });
        return;
      }
      finish(m.callId, { __proto__: null, ok: false, error: formError(m.tool, e) });
    };
    submits[m.tool] = rec;
    findTools((list) => {
      const n = isArray(list) ? list.length : 0;
      for (let i = 0; i < n; i++) {
        if (own(list[i], 'name') === m.tool && own(list[i], 'window') === win) {
          let p;
          try {
            p = apply(nativeExecuteTool, mc, [list[i], m.args, { __proto__: null, signal }]);
          } catch (e) {
            failed(e);
            return;
          }
          follow(p, answered, failed);
          return;
        }
      }
      failed(new DOMEx(`The page has no form "${m.tool}" now.`, 'NotFoundError'));
    }, failed);
  }

  // formOutcome turns what executeTool resolved with into a result: the JSON text of the page's
  // respondWith value, or null when the form navigated (the worker then reads the new page).
  function formOutcome(text) {
    if (text === null || text === undefined) return { __proto__: null, ok: true, result: null, navigating: true };
    let value = text;
    if (typeof text === 'string') {
      try {
        value = apply(parse, J, [text]);
      } catch {
        value = text; // not JSON text: the page's answer as it is
      }
    }
    const copy = data(value, 0);
    if (copy === NOT_DATA) return { __proto__: null, ok: false, error: 'The form answered with a result that is not JSON data.' };
    return { __proto__: null, ok: true, result: copy };
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
    const m = { __proto__: null, type: own(raw, 'type'), callId: own(raw, 'callId'), tool: own(raw, 'tool'), args: own(raw, 'args'), reason: own(raw, 'reason'), max: own(raw, 'max') };
    if (typeof m.callId !== 'string') return;
    if (m.type === 'call' && typeof m.tool === 'string' && m.args !== null && typeof m.args === 'object') {
      queue(() => run(m));
    } else if (m.type === 'cancel') {
      queue(() => cancel(m)); // after a run queued before it
    }
  }

  // A form tool's page that is being left navigated (the form's action, measured: executeTool's
  // null may come only after the page is gone): its calls end now, while the bridge's port is
  // still open, so the worker knows to follow the tab to the page the form went to. Only the
  // observer's own state is read here; no page code runs. A pagehide the page dispatched itself
  // is not the page leaving: isTrusted is an own property of every event that no script can
  // redefine ([LegacyUnforgeable]), so reading it runs no page code either.
  //
  // A page going into the back/forward cache (persisted) is not gone: shown again, it goes on
  // where it was, and a call's execute would finish its work then, long after the worker failed
  // the call (its port closes now) and nobody hears the answer. So its other calls are aborted
  // here, as the worker cancels the calls of a tab Chrome freezes: the page's execute hears its
  // signal now, before the page is frozen in the cache, and can stop (its abort listeners run
  // here: this is the page's own pagehide, not an event of the channel). No answer is sent: the
  // port's close ends the call in the worker. persisted is read with the getter saved at start.
  function leaving(ev) {
    if (!ev.isTrusted) return;
    let cached = false;
    try {
      cached = persistedOf !== null && apply(persistedOf, ev, []) === true;
    } catch {
      // Not a PageTransitionEvent: a page leaving for good.
    }
    const ids = keys(calls);
    for (let i = 0; i < ids.length; i++) {
      const c = calls[ids[i]];
      if (!c) continue; // ended meanwhile by the page's own abort listener of another call
      if (c.form) {
        finish(ids[i], { __proto__: null, ok: true, result: null, navigating: true });
      } else if (cached) {
        // Ended without an answer: the port's close tells the worker (page_gone), as for any
        // page left mid-call; an answer sent now could overtake it.
        c.done = true;
        delete calls[ids[i]];
        delete c.reg.calls[ids[i]];
        apply(abortCtl, c.ctl, [new DOMEx(CACHED, 'AbortError')]);
      }
    }
  }

  // A page may carry a registry of its own on navigator.modelContext beside the browser's (MCP-B's
  // @mcp-b/global installs one where the browser has none there: Chromium 156 has only
  // document.modelContext). Its tools are the script's, not the browser's, so they are not shared
  // (docs/DECISIONS.md); the site's developer is told, once, after load and again a little later.
  const nav = navigator;
  function otherRegistry() {
    let other;
    try {
      other = nav.modelContext;
    } catch {
      return;
    }
    if (other && typeof other === 'object' && other !== mc) {
      warnOnce('registry', "this page has a navigator.modelContext of its own (a script such as MCP-B's @mcp-b/global put it there) beside the browser's document.modelContext. Tools registered on it are not the browser's, so Tabbridge does not see or share them: register them with document.modelContext.registerTool.");
    }
  }
  apply(addListener, win, ['load', () => {
    otherRegistry();
    if (later) later(otherRegistry, 3000);
  }, { __proto__: null, once: true }]);

  // listen adds the observer's listeners on the window; adding one still there does nothing.
  // document.open() (or document.write() after load) erases them, the bridge's too, while the
  // page stays the same document with its tools registered: every call would then wait for its
  // deadline unheard, and the page's later tools would never be announced (measured on Chromium
  // 156). The document's childList change is seen by a mutation observer the page has no
  // reference to; in that microtask, after the bridge's (made first) has listened again, the
  // listeners are added again and the page's tools sent again if any were.
  function listen() {
    apply(addListener, win, [nonce, onEvent]);
    apply(addListener, win, ['pagehide', leaving]);
    if (targetOf && preventedOf) apply(addListener, win, ['submit', onSubmit, { __proto__: null, capture: true }]);
  }
  listen();
  if (MO && observeNodes) {
    try {
      apply(observeNodes, new MO(() => {
        listen();
        if (announced) announce();
      }), [doc, { __proto__: null, childList: true }]);
    } catch {
      // No mutation observer: a page that opens itself again is not heard from after.
    }
  }
  if (nativeGetTools && nativeExecuteTool) {
    try {
      apply(addListener, mc, ['toolchange', refresh]);
    } catch {
      // A modelContext that is no EventTarget announces no toolchange: only imperative tools.
    }
    refresh();
  }
})();
