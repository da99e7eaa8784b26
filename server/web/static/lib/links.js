// links.js decides what clicking a hyperlink in the terminal does. The
// program in the terminal writes its links (OSC 8), both the text shown and
// the target, and the program is not trusted: text that reads
// "https://accounts.google.com" can lead to any site. xterm.js's own
// handler asks `Do you want to navigate to <uri>?` with the URI exactly as
// the program wrote it, so the person reads the program's spelling of it:
// "https://accounts.google.com@evil.example/" (the site is evil.example;
// what precedes the @ is a user name), a host in look-alike letters
// ("аccounts.google.com" with a Cyrillic а), or a path holding a
// right-to-left override that shows the end of the address backwards.
//
// So the question names the site as the browser will reach it (the host
// from the URL parser, in its ASCII form: look-alike letters show as
// "xn--…"), then the whole address as the parser writes it (non-ASCII and
// invisible characters percent-encoded), and says the program chose it.
// Only http and https are opened, a link with a user name or password in it
// is not opened at all (it exists to mislead), and the tab opens without
// an opener or a referrer.

// MAX_SHOWN is how much of an address the question shows; the site is
// always shown whole, on its own line.
export const MAX_SHOWN = 300;

// linkPrompt returns { href, message } for a link that may be opened once
// the person agrees to message, or { refused } saying why it is not opened.
export function linkPrompt(uri) {
  let u;
  try {
    u = new URL(String(uri));
  } catch (e) {
    return { refused: 'This link is not a web address, so it was not opened.' };
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    return { refused: 'Only http and https links are opened; this one is ' + u.protocol + ' and was not opened.' };
  }
  if (u.username || u.password) {
    return { refused: 'This link hides its site behind a user name (' + u.host + ' is the real site), so it was not opened.' };
  }
  let shown = u.href;
  if (shown.length > MAX_SHOWN) shown = shown.slice(0, MAX_SHOWN) + '… (' + u.href.length + ' characters)';
  return {
    href: u.href,
    message: 'Open a link the program in this terminal wrote?\n\nSite: ' + u.host + '\n\nAddress: ' + shown +
      '\n\nThe text on screen can say anything: check the site.'
  };
}
