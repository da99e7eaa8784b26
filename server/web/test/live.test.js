import test from 'node:test';
import assert from 'node:assert/strict';
import { liveTypes, isField, swapAction, countdown } from '../static/lib/live.js';

test('a page listens for every type its regions name, once', () => {
  assert.deepEqual([...liveTypes(['approval.created  approval.settled', 'approval.settled', '', null, ' site.shared '])],
    ['approval.created', 'approval.settled', 'site.shared']);
});

test('fields are what the person types or chooses in; buttons are not', () => {
  for (const el of [{ tagName: 'TEXTAREA' }, { tagName: 'SELECT' }, { tagName: 'INPUT', type: 'text' }, { tagName: 'INPUT', type: 'checkbox' }, { tagName: 'INPUT', type: 'search' }]) {
    assert.equal(isField(el), true, JSON.stringify(el));
  }
  for (const el of [null, { tagName: 'BUTTON' }, { tagName: 'A' }, ...['hidden', 'submit', 'button', 'reset', 'image'].map((type) => ({ tagName: 'INPUT', type }))]) {
    assert.equal(isField(el), false, JSON.stringify(el));
  }
});

test('a fresh copy swaps a region unless it says the same or the person is typing in it', () => {
  const base = { fresh: {}, same: false, focusInside: false, focusOnField: false, waiting: false };
  assert.equal(swapAction(base), 'swap');
  assert.equal(swapAction({ ...base, fresh: null }), 'keep', 'the region is not in the fresh page');
  assert.equal(swapAction({ ...base, same: true, focusInside: true, focusOnField: true }), 'keep', 'nothing changed');
  assert.equal(swapAction({ ...base, focusInside: true, focusOnField: true }), 'defer', 'typing in it');
  assert.equal(swapAction({ ...base, focusInside: true }), 'swap', 'focus on a button only: swapped, focus restored by id');
  assert.equal(swapAction({ ...base, focusInside: true, waiting: true }), 'defer', 'once waiting, it waits while focus stays');
  assert.equal(swapAction({ ...base, focusOnField: true, waiting: true }), 'swap', 'focus left the region');
});

test('the countdown to a request expiry', () => {
  const at = Date.parse('2026-01-01T00:00:00Z');
  const left = (s) => countdown(new Date(at + s * 1000).toISOString(), at);
  assert.deepEqual(left(299), { text: 'expires in 4:59', soon: false });
  assert.deepEqual(left(60), { text: 'expires in 1:00', soon: false });
  assert.deepEqual(left(59), { text: 'expires in 0:59', soon: true });
  assert.deepEqual(left(5.4), { text: 'expires in 0:05', soon: true });
  assert.deepEqual(left(0), { text: 'expired', soon: true });
  assert.deepEqual(left(-30), { text: 'expired', soon: true });
  assert.equal(countdown('not a time', at), null);
  assert.equal(countdown(null, at), null);
});
