// messages.js checks every message that crosses a trust boundary inside the extension:
// page (observer, main world) → bridge, worker → bridge, and bridge → worker. Each check returns
// {ok: true, msg} with a fresh object holding only the known fields, or {ok: false, reason} with a
// sentence saying what is wrong. Nothing here trusts its input: the page's world is the page's.
//
// It is deliberately a plain script, not an ES module with exports: the bridge loads it as a
// classic content script in the isolated world (content scripts cannot import), while the service
// worker and Node's tests import it for its side effect. It defines globalThis.TabbridgeMessages,
// which only that world sees.
//
// It also holds the limits the server sends in its welcome (docs/PROTOCOL.md, limits): the worker
// applies each welcome's (useLimits) and keeps them in storage.local, where every bridge reads
// them; until then the defaults, protocol 1's values, hold.
(function (root) {
  'use strict';

  // defaults are the welcome's limits as protocol 1 defines them (bridge.Limits, each one Go
  // constant on the server). They hold until a welcome has told this extension the server's own:
  // those are the numbers that count, so an extension older or newer than the server neither
  // refuses what the server takes nor passes on what it refuses.
  const defaults = Object.freeze({
    maxToolsPerSite: 128,
    maxDescriptorBytes: 64 << 10,
    maxAnnouncementBytes: 1 << 20,
    maxTitleBytes: 256,
    maxDescriptionBytes: 8 << 10,
    maxResultBytes: 256 << 10,
    maxMessageBytes: 1 << 20, // the largest frame the server reads
    callTimeoutMs: 60000, // the longest a call runs
  });
  // local are the extension's own bounds, which no server changes. announceRoomBytes is what a
  // tools.announce frame keeps, beside the page's tools, for the rest of it: the address (at most
  // maxUrlChars, each character at most two bytes of JSON), the origin, the title (170 UTF-16
  // units, at most six bytes each) and the ids, about 26 KB at their longest.
  const local = Object.freeze({ maxErrorChars: 4096, maxUrlChars: 8192, maxDepth: 64, announceRoomBytes: 32 << 10 });
  const LIMITS_KEY = 'limits'; // in storage.local: the last welcome's limits
  let limits = Object.freeze({ ...defaults, ...local });

  const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

  // checkLimits keeps the welcome's limits that are whole numbers in [1, 2^30]; any other, or one
  // an older server does not send, is the default.
  function checkLimits(l) {
    const out = { ...defaults };
    for (const k of Object.keys(defaults)) {
      const v = isObject(l) ? l[k] : undefined;
      if (Number.isSafeInteger(v) && v > 0 && v <= 2 ** 30) out[k] = v;
    }
    return Object.freeze(out);
  }

  function setLimits(l) {
    limits = Object.freeze({ ...checkLimits(l), ...local });
    return limits;
  }

  // useLimits is the worker's, on every welcome: it applies the server's limits here and, when
  // they changed, keeps them for the bridges.
  const storage = root.chrome?.storage;
  function useLimits(l) {
    const before = JSON.stringify(limits);
    setLimits(l);
    if (JSON.stringify(limits) !== before) storage?.local?.set({ [LIMITS_KEY]: checkLimits(l) }).catch(() => {});
    return limits;
  }
  if (storage?.local && storage.onChanged) {
    storage.local.get(LIMITS_KEY).then((v) => v?.[LIMITS_KEY] && setLimits(v[LIMITS_KEY]), () => {});
    storage.onChanged.addListener((changes, area) => {
      if (area === 'local' && changes[LIMITS_KEY]) setLimits(changes[LIMITS_KEY].newValue);
    });
  }

  const toolName = /^[A-Za-z0-9_.-]{1,128}$/;
  const callId = /^[A-Za-z0-9_-]{1,64}$/;
  const encoder = new TextEncoder();

  const bytes = (s) => encoder.encode(s).length;
  const refuse = (reason) => ({ ok: false, reason });
  const accept = (msg) => ({ ok: true, msg });

  // jsonSafe says whether value is plain JSON data: what JSON.stringify would write without
  // dropping or changing anything (no functions, undefined, NaN, Infinity, symbols, class
  // instances or cycles), at most maxDepth deep.
  function jsonSafe(value, depth = 0) {
    if (depth > limits.maxDepth) return false;
    if (value === null) return true;
    switch (typeof value) {
      case 'string':
      case 'boolean':
        return true;
      case 'number':
        return Number.isFinite(value);
      case 'object':
        break;
      default:
        return false;
    }
    if (Array.isArray(value)) return value.every((v) => jsonSafe(v, depth + 1));
    const proto = Object.getPrototypeOf(value);
    if (proto !== Object.prototype && proto !== null) return false;
    return Object.values(value).every((v) => jsonSafe(v, depth + 1));
  }

  // checkText refuses a title or description that is the wrong type, too long, or holds control
  // characters (a description may hold line breaks and tabs).
  function checkText(value, field, limit, required, allowLines) {
    if (value === undefined || value === null) {
      return required ? `the tool has no ${field}` : null;
    }
    if (typeof value !== 'string') return `the tool's ${field} is not a string`;
    if (bytes(value) > limit) return `the tool's ${field} is over ${limit} bytes`;
    // eslint-disable-next-line no-control-regex
    const control = allowLines ? /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/ : /[\u0000-\u001f\u007f-\u009f]/;
    if (control.test(value)) return `the tool's ${field} contains control characters`;
    return null;
  }

  // checkDescriptor checks one tool descriptor and returns a copy holding only the fields a
  // remote agent is shown. An absent inputSchema means WebMCP's default, an object.
  function checkDescriptor(d) {
    if (!isObject(d)) return refuse('the tool descriptor is not an object');
    if (typeof d.name !== 'string' || !toolName.test(d.name)) {
      return refuse("the tool name must be 1 to 128 letters, digits, '_', '.' or '-'");
    }
    const bad = checkText(d.title, 'title', limits.maxTitleBytes, false, false) ||
      checkText(d.description, 'description', limits.maxDescriptionBytes, true, true);
    if (bad) return refuse(bad);
    const inputSchema = d.inputSchema === undefined ? { type: 'object' } : d.inputSchema;
    if (!isObject(inputSchema) || !jsonSafe(inputSchema)) {
      return refuse("the tool's inputSchema is not a JSON object");
    }
    if (d.annotations !== undefined && (!isObject(d.annotations) || !jsonSafe(d.annotations))) {
      return refuse("the tool's annotations are not a JSON object");
    }
    const out = { name: d.name, description: d.description, inputSchema };
    if (typeof d.title === 'string' && d.title !== '') out.title = d.title;
    out.annotations = { readOnlyHint: d.annotations?.readOnlyHint === true };
    if (d.annotations?.untrustedContentHint === true) out.annotations.untrustedContentHint = true;
    if (d.annotations?.consequentialHint === true) out.annotations.consequentialHint = true;
    // kind says how the tool runs: imperative (registerTool, the page's own execute) or
    // declarative (a <form toolname>, run by the browser's executeTool). A form carries no
    // annotations, so whatever the page's world claims for one is dropped.
    if (d.kind === 'declarative') {
      out.kind = 'declarative';
      out.autosubmit = d.autosubmit === true;
      out.annotations = { readOnlyHint: false };
    } else if (d.kind === undefined || d.kind === 'imperative') {
      out.kind = 'imperative';
    } else {
      return refuse('the tool\'s kind is neither imperative nor declarative');
    }
    if (bytes(JSON.stringify(out)) > limits.maxDescriptorBytes) {
      return refuse(`the tool descriptor is over ${limits.maxDescriptorBytes} bytes`);
    }
    return accept(out);
  }

  // toolsBytes is how many bytes a page's tools may take together: maxAnnouncementBytes, and
  // never so many that the tools.announce frame carrying them is over maxMessageBytes. The server
  // closes the socket on a longer frame (1009, not dialled again), which would cut every shared
  // site off for one page's tools.
  function toolsBytes() {
    return Math.max(0, Math.min(limits.maxAnnouncementBytes, limits.maxMessageBytes - limits.announceRoomBytes));
  }

  // checkTools checks a whole tool list. Bad descriptors are dropped one by one, each with its
  // reason in refused, and so are the tools beyond the first maxToolsPerSite, or beyond
  // toolsBytes() together (a page with more still shares what fits); a list that is not a
  // list, or names a tool twice, is refused whole.
  function checkTools(list) {
    if (!Array.isArray(list)) return refuse('the tool list is not an array');
    const room = toolsBytes();
    const tools = [];
    const refused = [];
    const seen = new Set();
    let size = 2; // the list's brackets
    for (const d of list) {
      const r = checkDescriptor(d);
      const name = isObject(d) && typeof d.name === 'string' ? d.name.slice(0, 128) : '';
      if (r.ok && tools.length >= limits.maxToolsPerSite) {
        refused.push({ name, reason: `a page may offer at most ${limits.maxToolsPerSite} tools; this one was registered after them` });
        continue;
      }
      const own = r.ok ? bytes(JSON.stringify(r.msg)) + (tools.length > 0 ? 1 : 0) : 0;
      if (r.ok && size + own > room && !seen.has(r.msg.name)) {
        refused.push({ name, reason: `a page's tools may take at most ${room} bytes together; this one was registered after those that fill them` });
        continue;
      }
      if (!r.ok) {
        refused.push({ name, reason: r.reason });
        continue;
      }
      if (seen.has(r.msg.name)) return refuse(`the tool list names "${r.msg.name}" twice`);
      seen.add(r.msg.name);
      tools.push(r.msg);
      size += own;
    }
    if (bytes(JSON.stringify(tools)) > room) {
      return refuse(`the tool list is over ${room} bytes`);
    }
    return { ok: true, msg: tools, refused };
  }

  function checkCallId(id) {
    return typeof id === 'string' && callId.test(id);
  }

  // resultSize is what the result cap counts, as the server does (sitetools.ResultSize): a
  // string's own UTF-8 bytes, not its JSON quotes and escapes; any other value's JSON text.
  const resultSize = (result) => (typeof result === 'string' ? bytes(result) : bytes(JSON.stringify(result)));

  // tooLarge is the failure a result over the cap becomes: refused with its size, never cut.
  function tooLarge(callId, size) {
    return accept({ type: 'result', callId, ok: false, code: 'result_too_large', size, error: `The page's result is ${size} bytes; at most ${limits.maxResultBytes} are allowed.` });
  }

  // checkOutcome checks the result or error of one call, as both the observer and the bridge
  // send it: {callId, ok: true, result} or {callId, ok: false, error}. A result over the cap is
  // turned into the failure result_too_large with its size (so the call ends at once, not at its
  // deadline), which is the one failure that carries a code and a size.
  function checkOutcome(m) {
    if (!checkCallId(m.callId)) return refuse('the result has no valid callId');
    if (m.ok === true) {
      if (!jsonSafe(m.result === undefined ? null : m.result)) return refuse('the result is not JSON data');
      const result = m.result === undefined ? null : m.result;
      const size = resultSize(result);
      if (size > limits.maxResultBytes) return tooLarge(m.callId, size);
      // navigating: a form tool's page navigated instead of answering (executeTool gave null);
      // the worker then reads the result from the page it navigated to.
      if (m.navigating === true) return accept({ type: 'result', callId: m.callId, ok: true, result: null, navigating: true });
      return accept({ type: 'result', callId: m.callId, ok: true, result });
    }
    if (m.ok === false && m.code === 'result_too_large' && Number.isSafeInteger(m.size) && m.size > limits.maxResultBytes) {
      return tooLarge(m.callId, m.size);
    }
    if (m.ok === false && typeof m.error === 'string') {
      return accept({ type: 'result', callId: m.callId, ok: false, error: m.error.slice(0, limits.maxErrorChars) });
    }
    return refuse('the result is neither ok with a result nor failed with an error string');
  }

  // checkDialog checks the observer's word that the page opened a dialog (alert, confirm or
  // prompt: the page is blocked until the person answers it) or that it returned:
  // {type: "dialog", open: true, kind, text} or {type: "dialog", open: false}.
  function checkDialog(m) {
    if (m.open === false) return accept({ type: 'dialog', open: false });
    if (m.open !== true || !['alert', 'confirm', 'prompt'].includes(m.kind)) return refuse('the dialog message has no kind');
    return accept({ type: 'dialog', open: true, kind: m.kind, text: typeof m.text === 'string' ? m.text.slice(0, 256) : '' });
  }

  // parsePageMessage decodes the detail of a nonce-typed CustomEvent sent by the observer: a JSON
  // string of {from: "observer", type: "tools", tools} or {from: "observer", type: "result", ...}.
  // Events the bridge itself sent (from: "bridge") come back as {ok: true, msg: null}.
  function parsePageMessage(detail) {
    if (typeof detail !== 'string') return refuse('the event detail is not a JSON string');
    let m;
    try {
      m = JSON.parse(detail);
    } catch {
      return refuse('the event detail is not valid JSON');
    }
    if (detail.length > limits.maxAnnouncementBytes + limits.maxResultBytes) {
      // A result is still read far enough to end its call at once: with the result's size, or
      // with its error cut. A string full of escapes can be this long and still within the cap:
      // checkOutcome counts.
      if (isObject(m) && m.from === 'observer' && m.type === 'result' && checkCallId(m.callId)) return outcome(m);
      return refuse('the event is too large');
    }
    if (!isObject(m)) return refuse('the message is not an object');
    if (m.from === 'bridge') return accept(null);
    if (m.from !== 'observer') return refuse('the message does not say who sent it');
    if (m.type === 'tools') {
      const r = checkTools(m.tools);
      // whole: the observer's list itself was refused, so the page shares nothing (said in its console).
      return r.ok ? { ok: true, msg: { type: 'tools', tools: r.msg }, refused: r.refused } : { ...r, whole: true };
    }
    if (m.type === 'result') return outcome(m);
    if (m.type === 'dialog') return checkDialog(m);
    return refuse(`unknown message type ${JSON.stringify(String(m.type)).slice(0, 40)}`);
  }

  // outcome checks a call's result from the page; a refusal names the call when it can (callId),
  // so the bridge fails that call at once instead of leaving it to its deadline.
  function outcome(m) {
    const r = checkOutcome(m);
    return r.ok || !checkCallId(m.callId) ? r : { ...r, callId: m.callId };
  }

  // checkWorkerMessage checks what the worker sends a bridge over its port: a call to run or a
  // call to cancel.
  function checkWorkerMessage(m) {
    if (!isObject(m)) return refuse('the message is not an object');
    if (m.type === 'refused') return checkRefused(m);
    if (!checkCallId(m.callId)) return refuse('the message has no valid callId');
    if (m.type === 'call') {
      if (typeof m.tool !== 'string' || !toolName.test(m.tool)) return refuse('the call names no valid tool');
      if (!isObject(m.args) || !jsonSafe(m.args)) return refuse('the call arguments are not a JSON object');
      return accept({ type: 'call', callId: m.callId, tool: m.tool, args: m.args });
    }
    if (m.type === 'cancel') {
      const reason = typeof m.reason === 'string' ? m.reason.slice(0, limits.maxErrorChars) : 'The call was cancelled.';
      return accept({ type: 'cancel', callId: m.callId, reason });
    }
    return refuse('unknown message type');
  }

  // checkRefused checks the worker's word of which of the page's tools were not shared:
  // {type: "refused", by: "server" | "extension", tools: [{tool, reason}]}.
  function checkRefused(m) {
    if (m.by !== 'server' && m.by !== 'extension') return refuse('the refusal does not say who refused');
    if (!Array.isArray(m.tools) || m.tools.length > 1024) return refuse('the refusal has no list of tools');
    const tools = [];
    for (const r of m.tools) {
      if (!isObject(r) || typeof r.tool !== 'string' || typeof r.reason !== 'string') return refuse('a refused tool has no name or reason');
      tools.push({ tool: r.tool.slice(0, 128), reason: r.reason.slice(0, 1024) });
    }
    return accept({ type: 'refused', by: m.by, tools });
  }

  // checkBridgeMessage checks what a bridge sends the worker over its port: an announcement of
  // the page's tools (with its address and title), the outcome of a call, or that the page is
  // blocked by a dialog or frozen (and runs again). pageOrigin is the
  // origin Chrome reports for the port's sender; an announced address on another origin is
  // refused, so a page cannot claim to be another site.
  function checkBridgeMessage(m, pageOrigin) {
    if (!isObject(m)) return refuse('the message is not an object');
    if (m.type === 'announce') {
      if (typeof m.url !== 'string' || m.url.length > limits.maxUrlChars) return refuse('the announcement has no address');
      let url;
      try {
        url = new URL(m.url);
      } catch {
        return refuse('the announced address is not a URL');
      }
      if (url.origin !== pageOrigin) return refuse('the announced address is not on the page\'s origin');
      if (url.href.length > limits.maxUrlChars) return refuse('the announced address is too long');
      const r = checkTools(m.tools);
      if (!r.ok) return r;
      const title = typeof m.title === 'string' ? m.title.slice(0, limits.maxTitleBytes) : '';
      return accept({ type: 'announce', url: url.href, title, tools: r.msg });
    }
    if (m.type === 'result') return checkOutcome(m);
    if (m.type === 'dialog') return checkDialog(m);
    if (m.type === 'frozen' && typeof m.frozen === 'boolean') return accept({ type: 'frozen', frozen: m.frozen });
    return refuse('unknown message type');
  }

  root.TabbridgeMessages = Object.freeze({
    get limits() {
      return limits;
    },
    defaults,
    checkLimits,
    setLimits,
    useLimits,
    jsonSafe,
    checkDescriptor,
    checkTools,
    checkCallId,
    checkOutcome,
    checkDialog,
    resultSize,
    parsePageMessage,
    checkWorkerMessage,
    checkBridgeMessage,
  });
})(globalThis);
