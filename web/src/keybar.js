// The key bar above the soft keyboard (docs/web-client.md#terminals): the keys a
// phone's keyboard lacks (Esc, Tab, Ctrl, the arrows, ^C ^D ^Z ^L, | ~ / -) and Paste,
// each a labelled button at least 44 px tall. Tapping one does not take the focus
// from the terminal, so the soft keyboard stays up. Ctrl is sticky: tapped, it
// applies to the next character typed (on the keyboard or the bar), then lets go;
// tapped again before that, it lets go.

import { h } from './dom.js';
import { KEYS, arrowSequence, withCtrl } from './terminal-keys.js';

/**
 * Builds the bar. `hooks`: `send(text)`, `applicationCursor()` (the program asked for
 * application cursor keys), `paste(text)`, `focus()`, `focused()`.
 * Returns `{el, modify(text), reset(), setEnabled(on)}`: `modify` applies a pending
 * Ctrl to text typed on the keyboard.
 */
export function buildKeybar(hooks) {
  let ctrl = false;
  const buttons = new Map();
  const setCtrl = (on) => {
    ctrl = on;
    const b = buttons.get('ctrl');
    b.setAttribute('aria-pressed', on ? 'true' : 'false');
    b.classList.toggle('armed', on);
  };
  const modify = (text) => {
    if (!ctrl || !text) return text;
    setCtrl(false);
    return withCtrl(text);
  };
  const press = async (key, refocus) => {
    if (key.send === 'ctrl') {
      setCtrl(!ctrl);
    } else if (key.send === 'paste') {
      await paste(hooks);
    } else if (typeof key.send === 'object') {
      setCtrl(false);
      hooks.send(arrowSequence(key.send.arrow, hooks.applicationCursor()));
    } else {
      hooks.send(modify(key.send));
    }
    if (refocus) hooks.focus();
  };
  const el = h('div', { class: 'keybar', role: 'toolbar', 'aria-label': 'Terminal keys', testid: 'keybar' });
  for (const key of KEYS) {
    let refocus = false;
    const b = h(
      'button',
      {
        type: 'button',
        class: `key key-${key.id}`,
        testid: `key-${key.id}`,
        'aria-label': key.aria,
        // Keep the focus (and the soft keyboard) where it is.
        onpointerdown: (e) => {
          refocus = hooks.focused();
          e.preventDefault();
        },
        onmousedown: (e) => e.preventDefault(),
        onclick: () => press(key, refocus),
      },
      key.label,
    );
    if (key.send === 'ctrl') b.setAttribute('aria-pressed', 'false');
    buttons.set(key.id, b);
    el.append(b);
  }
  return {
    el,
    modify,
    reset: () => {
      setCtrl(false);
      for (const b of buttons.values()) b.disabled = false;
    },
    setEnabled: (on) => {
      if (!on) setCtrl(false);
      for (const b of buttons.values()) b.disabled = !on;
    },
  };
}

/**
 * Pastes the clipboard's text. The Clipboard API exists only in secure contexts (not a
 * LAN page over http), and may be refused: then a box opens to paste into by hand
 * (the phone's own long-press Paste), whose text is sent when confirmed.
 */
async function paste(hooks) {
  if (window.isSecureContext && navigator.clipboard?.readText) {
    try {
      const text = await navigator.clipboard.readText();
      if (text) hooks.paste(text);
      return;
    } catch {
      /* refused: paste by hand below */
    }
  }
  pasteBox(hooks);
}

function pasteBox(hooks) {
  const area = h('textarea', { class: 'paste-area', testid: 'paste-area', rows: 4, 'aria-label': 'Text to paste into the terminal', autocapitalize: 'off', autocorrect: 'off', spellcheck: 'false', placeholder: 'Long-press here and choose Paste' });
  const close = () => box.remove();
  const box = h(
    'div',
    { class: 'paste-box', role: 'dialog', 'aria-label': 'Paste into the terminal', testid: 'paste-box' },
    area,
    h(
      'div',
      { class: 'paste-actions' },
      h('button', { type: 'button', class: 'link-btn tap', onclick: close }, 'Cancel'),
      h(
        'button',
        {
          type: 'button',
          class: 'primary tap',
          testid: 'paste-send',
          onclick: () => {
            const text = area.value;
            close();
            if (text) hooks.paste(text);
            hooks.focus();
          },
        },
        'Paste',
      ),
    ),
  );
  document.body.append(box);
  area.focus();
}
