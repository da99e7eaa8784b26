// dump.js feeds streams to @xterm/headless, with the Unicode 11 add-on the
// viewer loads, and prints what each terminal shows. Input (stdin): a JSON
// array of cases {cols, rows, streams: [stream, ...]}; each stream goes to
// its own fresh terminal of that size, and is either base64 (one write) or
// a list of steps, each {w: base64} (a write) or {r: [cols, rows]} (a
// resize, as a viewer's terminal.resize). Output (stdout): for each case,
// one dump per stream: every line of the normal buffer (scrollback
// included) and of the alternate one, each cell as [chars, width, fg, bg,
// flags], which lines are soft-wrapped, the cursor, modes, title, and the
// same after a probe ("Xy") that shows the pen, the character set, insert
// mode and a pending wrap.
'use strict';
const { Terminal } = require('@xterm/headless');
const { Unicode11Addon } = require('@xterm/addon-unicode11');

function newTerm(cols, rows) {
  // cursorBlink as the viewer makes it (server/web/static/terminal.js)
  const t = new Terminal({ cols, rows, scrollback: 1000, allowProposedApi: true, cursorBlink: true });
  t.loadAddon(new Unicode11Addon());
  t.unicode.activeVersion = '11';
  t._title = '';
  t.onTitleChange((s) => { t._title = s; });
  // the colours OSC 4/10/11/12 set and 104/110/111/112 restore, as the
  // browser's xterm.js applies them to its theme (index 256–258: the
  // default foreground, background and cursor)
  t._palette = {};
  t._core._inputHandler.onColor((ev) => {
    for (const e of ev) {
      if (e.type === 1) t._palette[e.index] = e.color.join(',');
      if (e.type === 2 && e.index === undefined) {
        for (let i = 0; i < 256; i++) delete t._palette[i];
      } else if (e.type === 2) delete t._palette[e.index];
    }
  });
  return t;
}

// write parses data at once (the core's writeSync: no event loop turn per
// write, which made a stream of thousands of steps take minutes); what is
// parsed, and how, is what write does.
function write(t, data) {
  t._core.writeSync(data);
}

function cellFlags(c) {
  return (c.isBold() ? 1 : 0) | (c.isDim() ? 2 : 0) | (c.isItalic() ? 4 : 0) |
    (c.isUnderline() ? 8 : 0) | (c.isBlink() ? 16 : 0) | (c.isInverse() ? 32 : 0) |
    (c.isInvisible() ? 64 : 0) | (c.isStrikethrough() ? 128 : 0) | (c.isOverline() ? 256 : 0) |
    (c.isProtected() ? 512 : 0);
}

// extended is what the renderer draws of a cell's extended attributes, as
// "STYLE|COLOUR|ID;URI", or '' when it draws none: the underline's style
// and colour while the cell is underlined (a hyperlink underlines it,
// dashed), and the hyperlink (its id when the program gave one, and which
// link it is).
function extended(t, c) {
  if (!c || !c.hasExtendedAttrs() || !c.isUnderline()) return '';
  // as the renderers draw it: 5 (dashed) for a hyperlink; 0 (a DECRC can
  // restore the underline flag beside an extended style of none) as single
  const style = c.extended.underlineStyle || 1;
  const ul = c.isUnderlineColorDefault() ? '' : color(c.getUnderlineColorMode(), c.getUnderlineColor());
  let link = '';
  if (c.extended.urlId) {
    const d = t._core._oscLinkService.getLinkData(c.extended.urlId);
    // @ the link's own number, which cells written as one link share
    // (terminal's tests number them afresh by where they first appear)
    link = d ? `${d.id === undefined ? '' : d.id};${d.uri}@${c.extended.urlId}` : '?';
  }
  return style === 1 && !ul && !link ? '' : `${style}|${ul}|${link}`;
}

function color(mode, value) {
  return mode ? `${mode.toString(16)}:${value}` : '';
}

// lines dumps buf's lines, each up to cols cells (or its whole length when
// cols is undefined: an alternate line keeps cells past a narrower screen).
function lines(t, buf, cols) {
  const out = [];
  for (let y = 0; y < buf.length; y++) {
    const line = buf.getLine(y);
    const cells = [];
    const end = cols === undefined ? line.length : cols;
    for (let x = 0; x < end; x++) {
      const c = line.getCell(x);
      if (!c) break;
      const cell = [c.getChars(), c.getWidth(), color(c.getFgColorMode(), c.getFgColor()),
        color(c.getBgColorMode(), c.getBgColor()), cellFlags(c)];
      const e = extended(t, c);
      if (e) cell.push(e);
      cells.push(cell);
    }
    // Trailing default blanks are what a fresh line holds: drop them.
    while (cells.length && cells[cells.length - 1].length === 5 && cells[cells.length - 1][0] === '' && cells[cells.length - 1][1] === 1 &&
      cells[cells.length - 1][2] === '' && cells[cells.length - 1][3] === '' && cells[cells.length - 1][4] === 0) {
      cells.pop();
    }
    out.push(cells);
  }
  return out;
}

function wrapped(buf) {
  const out = [];
  for (let y = 0; y < buf.length; y++) {
    if (buf.getLine(y).isWrapped) out.push(y);
  }
  return out;
}

// extra is what else a viewer keeps that a program sets: the cursor's
// shape and blinking (DECSCUSR, and the cursorBlink option mode 12 sets),
// the mouse encoding, the tab stops within the screen, the character sets
// designated and the level invoked, and the colours set.
function extra(t) {
  const core = t._core;
  const m = core.coreService.decPrivateModes;
  const tabs = [];
  for (let x = 0; x < t.cols; x++) {
    if (core.buffer.tabs[x]) tabs.push(x);
  }
  const sets = core._charsetService._charsets || [];
  const charsets = [0, 1, 2, 3].map((g) => (sets[g] ? hash(JSON.stringify(sets[g])) : 'B'));
  return {
    cursorStyle: m.cursorStyle === undefined ? null : m.cursorStyle,
    cursorBlink: m.cursorBlink === undefined ? null : m.cursorBlink,
    blinkOption: core.optionsService.rawOptions.cursorBlink, // mode 12 sets it
    mouseEncoding: core.coreMouseService.activeEncoding,
    tabs, charsets, glevel: core._charsetService.glevel,
    palette: Object.keys(t._palette).map(Number).sort((a, b) => a - b).map((i) => `${i}=${t._palette[i]}`),
  };
}

function hash(s) {
  let h = 0;
  for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
  return h.toString(16);
}

function state(t) {
  const core = t._core;
  const b = t.buffer.active;
  return {
    size: [t.cols, t.rows],
    wrapped: wrapped(t.buffer.normal),
    altWrapped: b.type === 'alternate' ? wrapped(t.buffer.alternate) : null,
    active: b.type,
    normal: lines(t, t.buffer.normal, t.cols),
    alternate: b.type === 'alternate' ? lines(t, t.buffer.alternate, t.cols) : null,
    alternateFull: b.type === 'alternate' ? lines(t, t.buffer.alternate) : null,
    cursor: [b.cursorX, b.cursorY, b.baseY],
    hidden: core.coreService.isCursorHidden,
    modes: t.modes,
    title: t._title,
    margins: [core.buffer.scrollTop, core.buffer.scrollBottom],
    extra: extra(t),
  };
}

async function dump(cols, rows, stream) {
  const t = newTerm(cols, rows);
  let replies = ''; // what xterm.js answers (the daemon answers for the viewer)
  t.onData((d) => { replies += d; });
  const steps = typeof stream === 'string' ? [{ w: stream }] : stream;
  for (const s of steps) {
    if (s.r) {
      t.resize(s.r[0], s.r[1]);
    } else {
      write(t, Buffer.from(s.w, 'base64'));
    }
  }
  const before = state(t);
  const answered = replies;
  write(t, 'Xy');
  const after = state(t);
  t.dispose();
  return { before, after, replies: answered };
}

async function main() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const cases = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  const out = [];
  for (const c of cases) {
    const dumps = [];
    for (const s of c.streams) {
      try {
        dumps.push(await dump(c.cols, c.rows, s));
      } catch (e) {
        dumps.push({ error: String(e && e.message).slice(0, 300) });
      }
    }
    out.push(dumps);
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
