import test from 'node:test';
import assert from 'node:assert/strict';
import { linkPrompt, MAX_SHOWN, WORDS } from '../static/lib/links.js';

test('the question names the site the browser will reach, on its own line', () => {
  const p = linkPrompt('https://example.com/docs?q=1');
  assert.equal(p.href, 'https://example.com/docs?q=1');
  assert.equal(p.site, 'example.com');
  assert.equal(p.address, 'https://example.com/docs?q=1');
  assert.equal(p.title, 'Open a link the program in this terminal wrote?');
  assert.equal(p.warning, 'The text on screen can say anything: check the site.');
  assert.equal(p.message, undefined, 'the parts are shown apart, not as one text');
});

test('the site keeps its port: it is part of where the browser goes', () => {
  const p = linkPrompt('http://127.0.0.1:8080/x');
  assert.equal(p.site, '127.0.0.1:8080');
});

test('the wording has one source', () => {
  assert.ok(Object.isFrozen(WORDS));
  const p = linkPrompt('https://example.com/');
  assert.equal(p.title, WORDS.title);
  assert.equal(p.warning, WORDS.warning);
  for (const k of ['site', 'address', 'open', 'cancel']) assert.equal(typeof WORDS[k], 'string', k);
});

test('a host in look-alike letters shows in its ASCII form', () => {
  const p = linkPrompt('https://\u0430ccounts.google.com/'); // Cyrillic а
  assert.ok(p.href.startsWith('https://xn--'), p.href);
  assert.match(p.site, /^xn--ccounts-\S*\.google\.com$/);
  assert.ok(p.address.startsWith('https://xn--'), p.address);
  assert.ok(!(p.site + p.address).includes('\u0430'));
});

test('invisible and right-to-left characters in the path are shown encoded', () => {
  const p = linkPrompt('https://evil.example/\u202egoogle.com');
  assert.ok(!(p.site + p.address).includes('\u202e'));
  assert.match(p.address, /%E2%80%AEgoogle\.com$/);
  assert.equal(p.site, 'evil.example');
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
  assert.ok(p.address.length < MAX_SHOWN + 40, String(p.address.length));
  assert.equal(p.site, host);
  assert.match(p.address, /… \(5\d{3} characters\)$/);
  assert.equal(p.href.length, 8 + host.length + 1 + 5000);
});

test('an address shows no markup characters: the parser encodes them', () => {
  const p = linkPrompt('https://example.com/<img src="x" onerror=alert(1)>?q="<b>"#<i title="t">');
  assert.ok(!/[<>"]/.test(p.address), p.address);
  assert.equal(p.site, 'example.com');
});
