// paste.js cleans what the person pastes into a terminal before xterm.js
// sends it. xterm.js 6.0.0 wraps a paste in the bracketed-paste markers
// (ESC [200~ … ESC [201~) when the program asked for them, and sends the
// text between as it is: a pasted ESC [201~ ends the paste early, and
// whatever follows it reaches the program as typed keys (a shell runs it
// at the next CR), which is what bracketed paste exists to prevent. What
// a person copies comes from anywhere (a web page can put text in the
// clipboard that is not the text it shows), so every control character
// but tab, line feed and carriage return is taken out, as xterm does
// unless allowPasteControls is set: C0 (ESC, ^C, ^U, …), DEL, and the C1
// controls U+0080–U+009F (CSI among them).

// PASTE_CONTROLS matches one character a paste may not carry.
const PASTE_CONTROLS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;

// cleanPaste returns text without the control characters a paste may not
// carry, and how many it took out.
export function cleanPaste(text) {
  let removed = 0;
  const clean = String(text).replace(PASTE_CONTROLS, function () { removed++; return ''; });
  return { text: clean, removed: removed };
}

// pasteNotice is what the person is told when a paste lost characters.
export function pasteNotice(removed) {
  return 'Pasted without ' + removed + ' control character' + (removed === 1 ? '' : 's') +
    ' (such as Esc): pasted text could otherwise end the paste early and type commands.';
}
