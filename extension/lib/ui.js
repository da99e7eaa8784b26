// ui.js is what the popup and the options page share: asking the worker, and the detection
// switch. chrome.permissions.request must be called inside the click's user gesture, before any
// await, so the switch asks for the permission itself and then tells the worker.

import { ALL_URLS } from './detection.js';

// ask sends the worker a question and returns its answer's value, or throws its error.
export async function ask(type, fields = {}) {
  const answer = await chrome.runtime.sendMessage({ type, ...fields });
  if (!answer) throw new Error('The extension did not answer.');
  if (!answer.ok) throw new Error(answer.error);
  return answer.value;
}

// wireDetection makes a checkbox turn detection on and off and show its state; note shows what
// happened, for a person; onChange runs after the worker took a change.
export async function wireDetection(box, note, onChange = () => {}) {
  const show = (s) => {
    box.checked = s.on;
    box.dataset.state = s.on ? 'on' : 'off';
  };
  // The first state is asked for below; a click that comes before its answer wins over it (the answer
  // was read before the click, so showing it would turn the switch back).
  let changed = false;
  box.addEventListener('change', () => {
    changed = true;
    if (!box.checked) {
      ask('setDetection', { on: false }).then((s) => {
        show(s);
        onChange(s);
      }, (e) => (note.textContent = e.message));
      return;
    }
    chrome.permissions.request({ origins: [ALL_URLS] }).then(async (granted) => {
      if (!granted) {
        box.checked = false;
        note.textContent = 'Detection needs permission to read sites; it stays off.';
        return;
      }
      const s = await ask('setDetection', { on: true });
      show(s);
      note.textContent = 'Detection is on. Nothing is sent anywhere until you share a site.';
      onChange(s);
    }).catch((e) => {
      box.checked = false;
      note.textContent = e.message;
    });
  });
  const first = await ask('detection');
  if (!changed) show(first);
}
