// widths.js prints the cell width @xterm/addon-unicode11 gives every code
// point, as ranges [first, last, width] of the code points that are not 1
// wide: terminal/widths_table.go is generated from it (go generate) and
// TestWidthsMatchXterm checks the two agree.
'use strict';
const { Terminal } = require('@xterm/headless');
const { Unicode11Addon } = require('@xterm/addon-unicode11');

const t = new Terminal({ allowProposedApi: true });
t.loadAddon(new Unicode11Addon());
t.unicode.activeVersion = '11';
const u = t._core.unicodeService;
const out = [];
let start = 0, width = u.wcwidth(0);
for (let cp = 1; cp <= 0x110000; cp++) {
  const w = cp < 0x110000 ? u.wcwidth(cp) : -1;
  if (w !== width) {
    if (width !== 1) out.push([start, cp - 1, width]);
    start = cp;
    width = w;
  }
}
process.stdout.write(JSON.stringify(out));
