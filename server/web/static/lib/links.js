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
//
// The parts are shown by terminal.js in a question of the page's own (a
// <dialog>), never window.confirm: in the extension's popup the page is a
// cross-site frame, whose native dialogs Chrome heads "An embedded page
// says", may close the popup over, or does not show at all.

// MAX_SHOWN is how much of an address the question shows; the site is
// always shown whole, on its own line.
export const MAX_SHOWN = 300;

// WORDS is the rest of the question's wording: its labels and buttons.
export const WORDS = Object.freeze({
  title: 'Open a link the program in this terminal wrote?',
  site: 'Site',
  address: 'Address',
  warning: 'The text on screen can say anything: check the site.',
  open: 'Open',
  cancel: 'Cancel'
});

// linkPrompt returns, for a link that may be opened once the person agrees,
// { href, title, site, address, warning }: the question's parts, each shown
// as plain text (the program chose them), the site on its own line; or
// { refused } saying why the link is not opened.
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
  return { href: u.href, title: WORDS.title, site: u.host, address: shown, warning: WORDS.warning };
}
