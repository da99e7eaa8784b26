import test from 'node:test';
import assert from 'node:assert/strict';
import { Backoff, delayFor, MAX_MS } from '../lib/backoff.js';

test('the first retry waits 0.5 to 1 s', () => {
  assert.equal(delayFor(0, () => 0), 500);
  assert.equal(delayFor(0, () => 0.999999), 1000);
});

test('waits double up to 30 s and never exceed it', () => {
  const highs = [0, 1, 2, 3, 4, 5, 6, 40].map((n) => delayFor(n, () => 0.999999));
  assert.deepEqual(highs, [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  for (let n = 0; n < 100; n++) {
    const d = delayFor(n);
    assert.ok(d >= 500 && d <= MAX_MS, `attempt ${n} waited ${d}`);
  }
});

test('half of each wait is jitter', () => {
  assert.equal(delayFor(3, () => 0), 4000);
  assert.equal(delayFor(3, () => 0.5), 6000);
});

test('reset starts over after a working connection', () => {
  const b = new Backoff(() => 0.999999);
  assert.deepEqual([b.next(), b.next(), b.next()], [1000, 2000, 4000]);
  b.reset();
  assert.equal(b.next(), 1000);
});
