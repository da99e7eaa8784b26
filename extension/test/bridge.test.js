// Runs content/bridge.js in a vm context with a fake <html>, window and chrome.runtime port, to
// check what it does with the page's messages before anything reaches the worker.
import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import vm from 'node:vm';

const messages = readFileSync(new URL('../lib/messages.js', import.meta.url), 'utf8');
const source = readFileSync(new URL('../content/bridge.js', import.meta.url), 'utf8');

function bridge() {
  const attrs = {};
  const posted = [];
  const listeners = () => ({ addListener() {} });
  const port = { postMessage: (m) => posted.push(JSON.parse(JSON.stringify(m))), onMessage: listeners(), onDisconnect: listeners() };
  const win = new EventTarget();
  const ctx = vm.createContext({
    window: win, CustomEvent, crypto, TextEncoder, JSON, console, setTimeout, location: { href: 'https://shop.example/' },
    document: { title: 'Shop', documentElement: { setAttribute: (k, v) => (attrs[k] = v) }, addEventListener() {} },
    chrome: { runtime: { id: 'ext', connect: () => port, onMessage: listeners() } },
  });
  vm.runInContext(messages, ctx);
  vm.runInContext(source, ctx);
  const nonce = attrs['data-tabbridge-nonce'];
  const fromObserver = (m) => win.dispatchEvent(new CustomEvent(nonce, { detail: JSON.stringify({ from: 'observer', ...m }) }));
  return { posted, fromObserver };
}

test("a page's answer the bridge refuses fails its call at once, it is not dropped", () => {
  const { posted, fromObserver } = bridge();
  fromObserver({ type: 'tools', tools: [{ name: 't', description: 'd' }] });
  assert.equal(posted.at(-1).type, 'announce');
  fromObserver({ type: 'result', callId: 'c1', ok: 'yes' });
  assert.equal(posted.length, 2, 'the refusal was sent to the worker');
  assert.deepEqual({ ...posted.at(-1), error: undefined }, { type: 'result', callId: 'c1', ok: false, error: undefined });
  assert.match(posted.at(-1).error, /^The extension refused the page's answer: the result is neither ok .*\. This is the site's to fix/);
  fromObserver({ type: 'result', callId: 'bad id!', ok: 'yes' });
  assert.equal(posted.length, 2, 'no call to name, nothing to send');
});
