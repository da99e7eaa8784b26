import test from 'node:test';
import assert from 'node:assert/strict';
import { cleanPaste, pasteNotice } from '../static/lib/paste.js';

test('a pasted end-of-paste marker loses its Esc, so it cannot end the paste', () => {
  const got = cleanPaste('echo safe\x1b[201~rm -rf ~\r');
  assert.deepEqual(got, { text: 'echo safe[201~rm -rf ~\r', removed: 1 });
});

test('tab, line feed and carriage return stay; every other C0, DEL and C1 goes', () => {
  assert.deepEqual(cleanPaste('a\tb\nc\r\nd'), { text: 'a\tb\nc\r\nd', removed: 0 });
  let all = '';
  for (let c = 0; c < 0x20; c++) if (c !== 9 && c !== 10 && c !== 13) all += String.fromCharCode(c);
  all += '\x7f';
  for (let c = 0x80; c < 0xa0; c++) all += String.fromCharCode(c);
  assert.deepEqual(cleanPaste('x' + all + 'y'), { text: 'xy', removed: all.length });
});

test('text that is not a control passes whole, wide and astral characters included', () => {
  const s = 'déjà vu, 日本語, 😀, \u00a0non-breaking, \u200bzero width';
  assert.deepEqual(cleanPaste(s), { text: s, removed: 0 });
});

test('the notice counts what was removed', () => {
  assert.match(pasteNotice(1), /1 control character \(/);
  assert.match(pasteNotice(3), /3 control characters/);
});
