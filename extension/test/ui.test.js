import test from 'node:test';
import assert from 'node:assert/strict';

// Fakes for what the detection switch touches: the worker's answers and the permission prompt.
let detecting = false;
globalThis.chrome = {
  runtime: {
    sendMessage: async (m) => {
      if (m.type === 'setDetection') detecting = m.on;
      return { ok: true, value: { on: detecting } };
    },
  },
  permissions: { request: async () => true },
};

const { wireDetection } = await import('../lib/ui.js');

function checkbox() {
  const listeners = {};
  return {
    checked: false,
    dataset: {},
    addEventListener: (type, f) => (listeners[type] = f),
    click() {
      this.checked = !this.checked;
      listeners.change();
    },
  };
}

test('turning detection on or off tells the page, so the popup looks at its tab again', async () => {
  const box = checkbox();
  const note = { textContent: '' };
  const changes = [];
  let changed;
  await wireDetection(box, note, (s) => {
    changes.push(s.on);
    changed();
  });
  assert.equal(box.dataset.state, 'off');
  let next = new Promise((r) => (changed = r));
  box.click();
  await next;
  assert.deepEqual(changes, [true]);
  assert.equal(box.dataset.state, 'on');
  next = new Promise((r) => (changed = r));
  box.click();
  await next;
  assert.deepEqual(changes, [true, false]);
});

test('a click before the first state arrives is not undone by it', async () => {
  detecting = false;
  const send = chrome.runtime.sendMessage;
  let release;
  const gate = new Promise((r) => (release = r));
  // The first 'detection' answer is read now (off) and arrives only after the click has been handled.
  chrome.runtime.sendMessage = async (m) => {
    if (m.type !== 'detection') return send(m);
    const value = { on: detecting };
    await gate;
    return { ok: true, value };
  };
  try {
    const box = checkbox();
    const note = { textContent: '' };
    let changed;
    const on = new Promise((r) => (changed = r));
    const wired = wireDetection(box, note, () => changed());
    box.click();
    await on;
    release();
    await wired;
    assert.equal(box.dataset.state, 'on');
    assert.equal(box.checked, true);
  } finally {
    chrome.runtime.sendMessage = send;
  }
});
