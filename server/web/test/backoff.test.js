import test from 'node:test';
import assert from 'node:assert/strict';
import { Backoff } from '../static/lib/backoff.js';

test('waits double from the first to the most, and start over on reset', () => {
  const b = new Backoff(1000, 30000);
  assert.deepEqual(Array.from({ length: 8 }, () => b.next()), [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  b.reset();
  assert.equal(b.next(), 1000);
});

test('a fixed wait (the event stream) stays fixed', () => {
  const b = new Backoff(5000, 5000);
  assert.deepEqual([b.next(), b.next(), b.next()], [5000, 5000, 5000]);
});
