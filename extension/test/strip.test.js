import test from 'node:test';
import assert from 'node:assert/strict';

import { describeTab } from '../lib/strip.js';

test('a blank tab says so in words, never "No site · 0 tools", and offers no Share', () => {
  for (const url of ['chrome://newtab/', 'about:blank', undefined, '']) {
    const d = describeTab(url, null, true);
    assert.equal(d.site, 'New tab', url);
    assert.equal(d.canShare, false);
    assert.doesNotMatch(d.count, /0 tools/);
    assert.equal(d.countN, null);
  }
  assert.equal(describeTab('chrome://settings/', null, true).site, 'A browser page');
});

test("a site's tools are named before Share", () => {
  const d = describeTab('https://notes.example/a', { tools: ['createNote', 'listNotes'] }, true);
  assert.equal(d.site, 'https://notes.example');
  assert.equal(d.count, '2 tools');
  assert.deepEqual(d.tools, ['createNote', 'listNotes']);
  assert.equal(d.canShare, true);
  assert.equal(describeTab('https://notes.example/', { tools: ['one'] }, true).count, '1 tool');
});

test('a site without tools, with detection off, or loaded before detection', () => {
  assert.equal(describeTab('https://x.example/', null, true).count, 'No WebMCP tools on this page');
  assert.equal(describeTab('https://x.example/', null, true).countN, 0);
  assert.equal(describeTab('https://x.example/', null, false).count, 'Tool detection is off');
  const r = describeTab('https://x.example/', { needsReload: true }, true);
  assert.equal(r.reload, true);
  assert.equal(r.canShare, true);
});
