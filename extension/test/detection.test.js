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

test('reconciles asked for together run one after another, so the scripts are registered once', async () => {
  // A fake of what reconcile touches, with Chrome's answers arriving a turn later and its refusal
  // of a script id that is already registered.
  const registered = new Map();
  let registers = 0;
  const later = (f) => new Promise((resolve, reject) => setTimeout(() => {
    try {
      resolve(f());
    } catch (e) {
      reject(e);
    }
  }, 1));
  globalThis.chrome = {
    storage: { local: { get: () => later(() => ({ detection: true })) } },
    permissions: { contains: () => later(() => true) },
    scripting: {
      getRegisteredContentScripts: ({ ids }) => later(() => ids.filter((id) => registered.has(id)).map((id) => registered.get(id))),
      registerContentScripts: (scripts) => later(() => {
        registers++;
        for (const s of scripts) if (registered.has(s.id)) throw new Error(`Duplicate script ID '${s.id}'`);
        for (const s of scripts) registered.set(s.id, s);
      }),
      unregisterContentScripts: ({ ids }) => later(() => ids.forEach((id) => registered.delete(id))),
    },
  };
  const { reconcile } = await import('../lib/detection.js');
  await Promise.all([reconcile(), reconcile(), reconcile()]);
  assert.equal(registers, 1);
  assert.deepEqual([...registered.keys()], SCRIPTS.map((s) => s.id));
  // One that fails does not stop the next.
  chrome.scripting.getRegisteredContentScripts = () => later(() => { throw new Error('gone'); });
  await assert.rejects(reconcile(), /gone/);
  chrome.scripting.getRegisteredContentScripts = ({ ids }) => later(() => ids.map((id) => registered.get(id)));
  await reconcile();
  assert.equal(registers, 1);
});
