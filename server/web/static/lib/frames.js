// frames.js is the terminal page's half of the viewer socket's wire (docs/PROTOCOL-terminals.md):
// the frame types, the close code, the sizes a viewer may ask for, and decoding the server's
// binary frames. No DOM here, so Node's tests run it (server/web/test).

// Binary frames: one type byte, then (output and snapshot) an 8-byte stream offset, then for a
// snapshot the terminal's size (cols, rows: 2 bytes each, big-endian), then the bytes.
export const FRAME_OUTPUT = 0x01;
export const FRAME_SNAPSHOT = 0x02;
export const FRAME_INPUT = 0x10;
const HEADER = 9; // type and offset
const SNAPSHOT_HEADER = 13; // type, offset, cols and rows

// CLOSE_SIGNED_OUT closes the socket when the sign-in that opened it ended: retrying will not help.
export const CLOSE_SIGNED_OUT = 4004;

// CLOSE_TOO_MANY_VIEWERS refuses a socket whose session already has the most viewers it takes
// (32): the reason says so, and dialling again later may work.
export const CLOSE_TOO_MANY_VIEWERS = 4008;

// MAX_COLS and MAX_ROWS bound the size a viewer asks for (the server refuses larger).
export const MAX_COLS = 1000;
export const MAX_ROWS = 500;

// parseOutput decodes a binary frame from the server: {data} for output, {data, cols, rows} with
// snapshot: true for a snapshot, or null for a frame too short or of another type (ignored).
export function parseOutput(buf) {
  if (buf.byteLength < HEADER) return null;
  const b = new Uint8Array(buf);
  if (b[0] === FRAME_OUTPUT) return { snapshot: false, data: b.subarray(HEADER) };
  if (b[0] !== FRAME_SNAPSHOT || buf.byteLength < SNAPSHOT_HEADER) return null;
  const v = new DataView(buf);
  return { snapshot: true, cols: v.getUint16(9), rows: v.getUint16(11), data: b.subarray(SNAPSHOT_HEADER) };
}

// MAX_INPUT is the most bytes one input frame may carry (relay/wire's MaxInput): a larger paste is
// refused. The page takes the server's own limit from its data-max-input attribute (maxInput) and
// falls back on this.
export const MAX_INPUT = 1048576;

// maxInput reads a data-max-input attribute: a positive whole number of bytes, else MAX_INPUT.
export function maxInput(attr) {
  const n = Number(attr);
  return Number.isSafeInteger(n) && n > 0 ? n : MAX_INPUT;
}

// sizeText says a number of bytes for a person: bytes below 1 KiB, else KiB or MiB with at most one
// decimal, rounded down (a size just over a limit reads as the limit: inputRefusal adds the exact
// counts).
export function sizeText(n) {
  if (n < 1024) return n + ' bytes';
  const [v, unit] = n < 1048576 ? [n / 1024, 'KiB'] : [n / 1048576, 'MiB'];
  return (Math.floor(v * 10) / 10) + ' ' + unit;
}

// inputRefusal is what the page tells the person about input of n bytes it did not send because
// it is over max bytes: nothing of it reached the program.
export function inputRefusal(n, max) {
  return 'Paste not sent: ' + sizeText(n) + ' (' + n + ' bytes) is over the ' + sizeText(max) +
    ' (' + max + ' bytes) a terminal takes at once. Paste it in smaller parts.';
}

// inputFrame is one input frame holding exactly bytes.
export function inputFrame(bytes) {
  const f = new Uint8Array(bytes.length + 1);
  f[0] = FRAME_INPUT;
  f.set(bytes, 1);
  return f;
}

// binaryBytes turns xterm.js's onBinary string (legacy mouse reports) into bytes: one a character.
export function binaryBytes(s) {
  const b = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) b[i] = s.charCodeAt(i) & 255;
  return b;
}

// fitSize is the resize a proposed fit asks for, within the bounds, or null when the fit is not
// known yet (no size, or not finite).
export function fitSize(d) {
  if (!d || !isFinite(d.cols) || !isFinite(d.rows)) return null;
  return { cols: Math.max(1, Math.min(MAX_COLS, d.cols)), rows: Math.max(1, Math.min(MAX_ROWS, d.rows)) };
}

// statusOf reads an exit status; the exit message leaves out a zero status (omitempty), which
// must read 0, not "undefined".
export function statusOf(code) {
  return typeof code === 'number' ? code : 0;
}

// lasting tells a refused ticket that retrying will not fix from one it may (a timeout, rate
// limiting, the server's own trouble).
export function lasting(status) {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}
