import test from 'node:test';
import assert from 'node:assert/strict';
import { linkPrompt, MAX_SHOWN } from '../static/lib/links.js';

test('the question names the site the browser will reach, on its own line', () => {
  const p = linkPrompt('https://example.com/docs?q=1');
  assert.equal(p.href, 'https://example.com/docs?q=1');
  assert.match(p.message, /\nSite: example\.com\n/);
  assert.match(p.message, /Address: https:\/\/example\.com\/docs\?q=1/);
});

test('a host in look-alike letters shows in its ASCII form', () => {
  const p = linkPrompt('https://\u0430ccounts.google.com/'); // Cyrillic а
  assert.ok(p.href.startsWith('https://xn--'), p.href);
  assert.match(p.message, /Site: xn--ccounts-\S*\.google\.com\n/);
  assert.ok(!p.message.includes('\u0430'));
});

test('invisible and right-to-left characters in the path are shown encoded', () => {
  const p = linkPrompt('https://evil.example/\u202egoogle.com');
  assert.ok(!p.message.includes('\u202e'));
  assert.match(p.message, /%E2%80%AEgoogle\.com/);
  assert.match(p.message, /Site: evil\.example\n/);
});

test('a user name in front of the site is refused, naming the real site', () => {
  const p = linkPrompt('https://accounts.google.com@evil.example/login');
  assert.equal(p.href, undefined);
  assert.match(p.refused, /evil\.example is the real site/);
  assert.ok(linkPrompt('https://u:p@example.com/').refused);
});

test('only http and https are opened', () => {
  for (const uri of ['javascript:alert(1)', 'data:text/html,<b>x</b>', 'file:///etc/passwd', 'chrome://settings', 'ftp://example.com/']) {
    const p = linkPrompt(uri);
    assert.equal(p.href, undefined, uri);
    assert.match(p.refused, /Only http and https/, uri);
  }
  assert.match(linkPrompt('not a url').refused, /not a web address/);
  assert.match(linkPrompt('').refused, /not a web address/);
});

test('a very long address is cut in the question, the site never', () => {
  const host = 'a'.repeat(60) + '.example';
  const p = linkPrompt('https://' + host + '/' + 'x'.repeat(5000));
  assert.ok(p.message.length < MAX_SHOWN + 400, String(p.message.length));
  assert.match(p.message, new RegExp('Site: ' + host + '\n'));
  assert.match(p.message, /5\d{3} characters\)/);
  assert.equal(p.href.length, 8 + host.length + 1 + 5000);
});
