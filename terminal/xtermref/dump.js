// dump.js feeds streams to @xterm/headless, with the Unicode 11 add-on the
// viewer loads, and prints what each terminal shows. Input (stdin): a JSON
// array of cases {cols, rows, streams: [base64, ...]}; each stream goes to
// its own fresh terminal of that size. Output (stdout): for each case, one
// dump per stream: every line of the normal buffer (scrollback included)
// and of the alternate one, each cell as [chars, width, fg, bg, flags],
// the cursor, modes, title, and the same after a probe ("Xy") that shows
// the pen, the character set, insert mode and a pending wrap.
'use strict';
const { Terminal } = require('@xterm/headless');
const { Unicode11Addon } = require('@xterm/addon-unicode11');

function newTerm(cols, rows) {
  const t = new Terminal({ cols, rows, scrollback: 1000, allowProposedApi: true });
  t.loadAddon(new Unicode11Addon());
  t.unicode.activeVersion = '11';
  t._title = '';
  t.onTitleChange((s) => { t._title = s; });
  return t;
}

// pending rejects the write in progress when xterm.js throws from inside
// its write loop (a timer, so no try/catch around write sees it).
let pending = null;
process.on('uncaughtException', (e) => {
  if (!pending) throw e;
  const reject = pending;
  pending = null;
  reject(e);
});

function write(t, data) {
  return new Promise((resolve, reject) => {
    pending = reject;
    t.write(data, () => { pending = null; resolve(); });
  });
}

function cellFlags(c) {
  return (c.isBold() ? 1 : 0) | (c.isDim() ? 2 : 0) | (c.isItalic() ? 4 : 0) |
    (c.isUnderline() ? 8 : 0) | (c.isBlink() ? 16 : 0) | (c.isInverse() ? 32 : 0) |
    (c.isInvisible() ? 64 : 0) | (c.isStrikethrough() ? 128 : 0) | (c.isOverline() ? 256 : 0);
}

function color(mode, value) {
  return mode ? `${mode.toString(16)}:${value}` : '';
}

function lines(buf, cols) {
  const out = [];
  for (let y = 0; y < buf.length; y++) {
    const line = buf.getLine(y);
    const cells = [];
    for (let x = 0; x < cols; x++) {
      const c = line.getCell(x);
      if (!c) break;
      cells.push([c.getChars(), c.getWidth(), color(c.getFgColorMode(), c.getFgColor()),
        color(c.getBgColorMode(), c.getBgColor()), cellFlags(c)]);
    }
    // Trailing default blanks are what a fresh line holds: drop them.
    while (cells.length && cells[cells.length - 1][0] === '' && cells[cells.length - 1][1] === 1 &&
      cells[cells.length - 1][2] === '' && cells[cells.length - 1][3] === '' && cells[cells.length - 1][4] === 0) {
      cells.pop();
    }
    out.push(cells);
  }
  return out;
}

function state(t) {
  const core = t._core;
  const b = t.buffer.active;
  return {
    active: b.type,
    normal: lines(t.buffer.normal, t.cols),
    alternate: b.type === 'alternate' ? lines(t.buffer.alternate, t.cols) : null,
    cursor: [b.cursorX, b.cursorY, b.baseY],
    hidden: core.coreService.isCursorHidden,
    modes: t.modes,
    title: t._title,
    margins: [core.buffer.scrollTop, core.buffer.scrollBottom],
  };
}

async function dump(cols, rows, data) {
  const t = newTerm(cols, rows);
  await write(t, data);
  const before = state(t);
  await write(t, 'Xy');
  const after = state(t);
  t.dispose();
  return { before, after };
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
        dumps.push(await dump(c.cols, c.rows, Buffer.from(s, 'base64')));
      } catch (e) {
        dumps.push({ error: String(e && e.message).slice(0, 300) });
      }
    }
    out.push(dumps);
  }
  process.stdout.write(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
