import test from 'node:test';
import assert from 'node:assert/strict';
import { SettleGate, SETTLE_MS } from '../static/lib/settle.js';

test('a window opened under the person\'s typing takes no answer key at first (keyjacking)', () => {
  const g = new SettleGate(true, 0); // opened with focus, as window.open gives it
  g.shown(['r1'], 0);
  assert.equal(g.allows('r1', 50), false);
  assert.equal(g.allows('r1', SETTLE_MS - 1), false);
  assert.equal(g.allows('r1', SETTLE_MS), true);
});

test('focus lost and regained starts the wait again', () => {
  const g = new SettleGate(false, 0);
  g.shown(['r1'], 0);
  assert.equal(g.allows('r1', 5000), false, 'never focused');
  g.focus(5000);
  assert.equal(g.allows('r1', 5500), false);
  assert.equal(g.allows('r1', 6000), true);
  g.blur();
  assert.equal(g.allows('r1', 7000), false);
  g.focus(8000);
  g.focus(8900); // a second focus event does not restart the wait
  assert.equal(g.allows('r1', 9000), true);
});

test('a request that has just appeared takes no key; a re-rendered one keeps its time', () => {
  const g = new SettleGate(true, 0);
  g.shown(['r1'], 0);
  g.shown(['r1', 'r2'], 5000); // r2 arrives by a live update while the person types
  assert.equal(g.allows('r1', 5001), true);
  assert.equal(g.allows('r2', 5001), false);
  assert.equal(g.allows('r2', 5000 + SETTLE_MS), true);
  assert.equal(g.allows('r3', 9000), false, 'a card not yet noted counts as new');
  g.shown(['r2'], 9000);
  g.shown(['r1', 'r2'], 9100); // r1 gone and back: new again
  assert.equal(g.allows('r1', 9200), false);
});

test('settled is the window\'s own wait, for pages with no request on them (the consent page)', () => {
  const g = new SettleGate(true, 100);
  assert.equal(g.settled(100 + SETTLE_MS - 1), false);
  assert.equal(g.settled(100 + SETTLE_MS), true);
  g.blur();
  assert.equal(g.settled(100 + 5 * SETTLE_MS), false);
});

test('focused follows focus and blur, for the page to know whether waiting cards will become ready by themselves', () => {
  const g = new SettleGate(false, 0);
  assert.equal(g.focused, false);
  g.focus(10);
  assert.equal(g.focused, true);
  g.blur();
  assert.equal(g.focused, false);
});

test('a card that moved takes no key and no click until it has held its place (a request above it withdrawn)', () => {
  const g = new SettleGate(true, 0);
  g.shown(['r1', 'r2'], 0);
  assert.equal(g.allows('r2', 5000), true);
  assert.equal(g.clickable('r2', 5000), true, 'a card that never moved takes clicks');
  g.shown(['r2'], 5000); // r1 withdrawn: r2 slides up into its place
  g.moved('r2', 5000);
  assert.equal(g.allows('r2', 5001), false);
  assert.equal(g.clickable('r2', 5001), false);
  assert.equal(g.clickable('r2', 5000 + SETTLE_MS - 1), false);
  assert.equal(g.clickable('r2', 5000 + SETTLE_MS), true);
  assert.equal(g.allows('r2', 5000 + SETTLE_MS), true);
  g.shown([], 9000);
  g.shown(['r2'], 9100); // gone and back: new for keys; its move is forgotten
  assert.equal(g.clickable('r2', 9100), true);
  assert.equal(g.allows('r2', 9100), false);
});

test('a card that arrived by a live update takes no click until it has been on screen a moment; shown names the new ones', () => {
  const g = new SettleGate(true, 0);
  assert.deepEqual(g.shown(['r1'], 0), ['r1'], 'the page loaded with r1');
  assert.equal(g.clickable('r1', 0), true, 'a card the page loaded with takes the first click');
  assert.equal(g.heldWhy('r1', 0), null);
  assert.deepEqual(g.shown(['r1', 'r2'], 5000), ['r2'], 'r2 arrives; r1 re-rendered is not new');
  g.arrived('r2', 5000);
  assert.equal(g.clickable('r2', 5001), false);
  assert.equal(g.heldWhy('r2', 5001), 'arrived');
  assert.equal(g.allows('r2', 5001), false);
  assert.equal(g.clickable('r2', 5000 + SETTLE_MS - 1), false);
  assert.equal(g.clickable('r2', 5000 + SETTLE_MS), true);
  assert.equal(g.heldWhy('r2', 5000 + SETTLE_MS), null);
  g.moved('r2', 7000); // it then slides up: held again, for the new reason
  assert.equal(g.heldWhy('r2', 7001), 'moved');
  assert.equal(g.clickable('r1', 7001), true, 'another card is not held by it');
});
