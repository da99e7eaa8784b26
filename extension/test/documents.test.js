import test from 'node:test';
import assert from 'node:assert/strict';
import { announce, emptyRecord, forget, forgetTab, touchTab, documentsOf, callsOf, MAX_ADDRESSES } from '../lib/documents.js';
import { chooseDocument, candidates } from '../lib/tabs.js';

const tool = (name) => ({ name, description: name, inputSchema: { type: 'object' }, annotations: { readOnlyHint: false } });

function record() {
  const rec = emptyRecord();
  announce(rec, { documentId: 'A', tabId: 1, origin: 'https://a.test', url: 'https://a.test/1', title: 'one', tools: [tool('search'), tool('add')], now: 10 });
  announce(rec, { documentId: 'B', tabId: 2, origin: 'https://a.test', url: 'https://a.test/2', title: 'two', tools: [tool('search')], now: 20 });
  announce(rec, { documentId: 'C', tabId: 3, origin: 'https://b.test', url: 'https://b.test/', title: 'b', tools: [tool('search')], now: 30 });
  return rec;
}

test('the most recently used tab of the origin offering the tool wins', () => {
  const rec = record();
  touchTab(rec, 1, 100);
  touchTab(rec, 2, 50);
  assert.equal(chooseDocument(rec, 'https://a.test', 'search').documentId, 'A');
  touchTab(rec, 2, 200);
  assert.equal(chooseDocument(rec, 'https://a.test', 'search').documentId, 'B');
});

test('a late stamp of an older use never outranks a newer one', () => {
  const rec = record();
  touchTab(rec, 2, 300); // the person activates tab 2
  touchTab(rec, 1, 250); // a window-focus stamp from before, delivered after
  assert.equal(chooseDocument(rec, 'https://a.test', 'search').documentId, 'B');
  touchTab(rec, 2, 100);
  assert.equal(rec.tabUsed[2], 300);
});

test('a tab that does not offer the tool is passed over, even if used last', () => {
  const rec = record();
  touchTab(rec, 2, 500);
  assert.equal(chooseDocument(rec, 'https://a.test', 'add').documentId, 'A');
});

test('another origin never answers', () => {
  const rec = record();
  touchTab(rec, 3, 1000);
  assert.deepEqual(candidates(rec, 'https://a.test', 'search').map((d) => d.documentId), ['B', 'A']);
  assert.equal(chooseDocument(rec, 'https://c.test', 'search'), null);
});

test('within one tab the newest document wins while the old one unloads', () => {
  const rec = record();
  announce(rec, { documentId: 'A2', tabId: 1, origin: 'https://a.test', url: 'https://a.test/3', title: 'new', tools: [tool('search')], now: 40 });
  touchTab(rec, 1, 100);
  assert.equal(chooseDocument(rec, 'https://a.test', 'search').documentId, 'A2');
  assert.deepEqual(documentsOf(rec, 1).map((d) => d.documentId).sort(), ['A', 'A2']);
});

test('forgetting a document keeps the site address for reopening', () => {
  const rec = record();
  forget(rec, 'A');
  forget(rec, 'B');
  assert.equal(chooseDocument(rec, 'https://a.test', 'search'), null);
  assert.equal(rec.addresses['https://a.test'].url, 'https://a.test/2');
});

test('an empty announcement withdraws every tool but keeps the last address', () => {
  const rec = record();
  announce(rec, { documentId: 'B', tabId: 2, origin: 'https://a.test', url: 'https://a.test/empty', title: '', tools: [], now: 50 });
  assert.equal(chooseDocument(rec, 'https://a.test', 'search').documentId, 'A');
  assert.equal(rec.addresses['https://a.test'].url, 'https://a.test/2');
});

test('closing a tab forgets its documents', () => {
  const rec = record();
  forgetTab(rec, 1);
  assert.deepEqual(Object.keys(rec.docs).sort(), ['B', 'C']);
  assert.equal(rec.tabUsed[1], undefined);
});

test('the record survives JSON, as chrome.storage.session keeps it', () => {
  const rec = JSON.parse(JSON.stringify(record()));
  touchTab(rec, 2, 99);
  assert.equal(chooseDocument(rec, 'https://a.test', 'search').documentId, 'B');
});

test('calls are found by document, not by tab', () => {
  const calls = new Map([['c1', { documentId: 'A' }], ['c2', { documentId: 'A2' }], ['c3', { documentId: 'A' }]]);
  assert.deepEqual(callsOf(calls, 'A'), ['c1', 'c3']);
  assert.deepEqual(callsOf(calls, 'A2'), ['c2']);
});

// The addresses are keyed by origin, which a page chooses: a hostile site that sends its tab
// through thousands of subdomains, each registering a tool with an 8 KB address, would otherwise
// grow the record without end. It is written whole to chrome.storage.session (10 MB in all) on
// every change, so it would also fill that, and every save after would fail.
test('the site addresses kept are bounded; the least recently announced go first', () => {
  const rec = record();
  for (let i = 0; i < 5000; i++) {
    const origin = `https://n${i}.evil.test`;
    announce(rec, { documentId: `E${i}`, tabId: 9, origin, url: `${origin}/?${'x'.repeat(100)}`, title: '', tools: [tool('t')], now: 1000 + i });
    forget(rec, `E${i}`);
    if (i === 4950) announce(rec, { documentId: 'B', tabId: 2, origin: 'https://a.test', url: 'https://a.test/again', title: 'two', tools: [tool('search')], now: 1000 + i });
  }
  const kept = Object.keys(rec.addresses).length;
  assert.ok(MAX_ADDRESSES >= 100 && kept === MAX_ADDRESSES, `${kept} addresses kept`);
  assert.ok(rec.addresses['https://n4999.evil.test'], 'the newest is kept');
  assert.equal(rec.addresses['https://a.test'].url, 'https://a.test/again', 'a site announced lately is kept');
  assert.equal(rec.addresses['https://b.test'], undefined, 'the least recently announced went');
});
