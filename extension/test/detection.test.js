import test from 'node:test';
import assert from 'node:assert/strict';
import { SCRIPTS, plan, registrationMatches } from '../lib/detection.js';

test('the bridge id sorts before the observer id, so it runs first', () => {
  const ids = SCRIPTS.map((s) => s.id);
  assert.deepEqual([...ids].sort(), ids);
  assert.match(SCRIPTS[0].js.at(-1), /bridge\.js$/);
  assert.equal(SCRIPTS[0].world, 'ISOLATED');
  assert.equal(SCRIPTS[1].world, 'MAIN');
  for (const s of SCRIPTS) {
    assert.equal(s.runAt, 'document_start');
    assert.equal(s.allFrames, false);
  }
});

test('detection is on only when wanted and permitted', () => {
  const all = SCRIPTS.map((s) => ({ ...s }));
  assert.equal(plan({ wanted: true, permitted: true, registered: [] }), 'register');
  assert.equal(plan({ wanted: true, permitted: true, registered: all }), 'keep');
  assert.equal(plan({ wanted: true, permitted: false, registered: all }), 'unregister');
  assert.equal(plan({ wanted: false, permitted: true, registered: all }), 'unregister');
  assert.equal(plan({ wanted: false, permitted: false, registered: [] }), 'keep');
});

test('a partial or changed registration is registered again', () => {
  const all = SCRIPTS.map((s) => ({ ...s }));
  assert.equal(registrationMatches(all.slice(1)), false);
  assert.equal(registrationMatches([all[0], { ...all[1], world: 'ISOLATED' }]), false);
  assert.equal(registrationMatches([{ ...all[0], allFrames: true }, all[1]]), false);
  assert.equal(plan({ wanted: true, permitted: true, registered: all.slice(0, 1) }), 'register');
});
