import test from 'node:test';
import assert from 'node:assert/strict';
import { parseOutput, inputFrame, binaryBytes, fitSize, statusOf, lasting, maxInput, sizeText, inputRefusal, MAX_INPUT, FRAME_OUTPUT, FRAME_SNAPSHOT, FRAME_INPUT, CLOSE_SIGNED_OUT, CLOSE_TOO_MANY_VIEWERS } from '../static/lib/frames.js';

// frame builds a server frame as the relay writes it: type, 8-byte offset, [cols, rows,] bytes.
function frame(type, offset, bytes, size) {
  const head = size ? 13 : 9;
  const buf = new ArrayBuffer(head + bytes.length);
  const v = new DataView(buf);
  v.setUint8(0, type);
  v.setBigUint64(1, BigInt(offset));
  if (size) {
    v.setUint16(9, size[0]);
    v.setUint16(11, size[1]);
  }
  new Uint8Array(buf).set(bytes, head);
  return buf;
}
const text = (s) => new TextEncoder().encode(s);
const str = (b) => new TextDecoder().decode(b);

test('the wire constants are those of docs/PROTOCOL-terminals.md', () => {
  assert.deepEqual([FRAME_OUTPUT, FRAME_SNAPSHOT, FRAME_INPUT, CLOSE_SIGNED_OUT, CLOSE_TOO_MANY_VIEWERS], [0x01, 0x02, 0x10, 4004, 4008]);
});

test('output and snapshot frames decode; anything else is ignored', () => {
  const out = parseOutput(frame(FRAME_OUTPUT, 42, text('hi\r\n')));
  assert.equal(out.snapshot, false);
  assert.equal(str(out.data), 'hi\r\n');
  const snap = parseOutput(frame(FRAME_SNAPSHOT, 7, text('\x1b[2J'), [132, 43]));
  assert.deepEqual([snap.snapshot, snap.cols, snap.rows, str(snap.data)], [true, 132, 43, '\x1b[2J']);
  assert.equal(parseOutput(frame(FRAME_OUTPUT, 0, text(''))).data.length, 0, 'an empty output frame is still one');
  assert.equal(parseOutput(new ArrayBuffer(8)), null, 'shorter than a header');
  assert.equal(parseOutput(frame(FRAME_SNAPSHOT, 0, text('abc'))), null, 'a snapshot without its size');
  assert.equal(parseOutput(frame(FRAME_INPUT, 0, text('x'))), null, 'not a frame the server sends');
  assert.equal(parseOutput(frame(0x7f, 0, text('x'))), null);
});

test('input is one frame holding exactly the bytes; legacy mouse reports are one byte a character', () => {
  assert.deepEqual([...inputFrame(text('\x1b[A'))], [FRAME_INPUT, 0x1b, 0x5b, 0x41]);
  assert.deepEqual([...inputFrame(new Uint8Array(0))], [FRAME_INPUT]);
  assert.deepEqual([...binaryBytes('\x1b[M !\u00ff\u0100')], [0x1b, 0x5b, 0x4d, 0x20, 0x21, 0xff, 0x00]);
});

test('the size asked for is the fit within 1–1000 × 1–500, or nothing before a fit', () => {
  assert.deepEqual(fitSize({ cols: 80, rows: 24 }), { cols: 80, rows: 24 });
  assert.deepEqual(fitSize({ cols: 5000, rows: 0 }), { cols: 1000, rows: 1 });
  assert.deepEqual(fitSize({ cols: 0, rows: 900 }), { cols: 1, rows: 500 });
  assert.equal(fitSize(undefined), null);
  assert.equal(fitSize({ cols: NaN, rows: 24 }), null);
  assert.equal(fitSize({ cols: 80, rows: Infinity }), null);
});

test('exit statuses and refusals', () => {
  assert.deepEqual([statusOf(3), statusOf(0), statusOf(undefined), statusOf('1')], [3, 0, 0, 0]);
  assert.deepEqual([400, 403, 404, 409, 499].map(lasting), [true, true, true, true, true]);
  assert.deepEqual([408, 429, 500, 503, 302].map(lasting), [false, false, false, false, false]);
});

test('the input limit is the server\'s, or relay/wire\'s MaxInput when the page has none', () => {
  assert.equal(MAX_INPUT, 1 << 20);
  assert.equal(maxInput('2048'), 2048);
  for (const bad of [null, '', '0', '-5', '1.5', 'lots', '1e400']) assert.equal(maxInput(bad), MAX_INPUT, String(bad));
});

test('a refused paste is told with its size and the limit, in exact bytes too', () => {
  assert.equal(sizeText(1000), '1000 bytes');
  assert.equal(sizeText(1536), '1.5 KiB');
  assert.equal(sizeText(MAX_INPUT), '1 MiB');
  assert.equal(sizeText(MAX_INPUT + 1), '1 MiB');
  const msg = inputRefusal(MAX_INPUT + 1, MAX_INPUT);
  assert.match(msg, /not sent/);
  assert.match(msg, /1048577 bytes/);
  assert.match(msg, /1048576 bytes/);
});
