// The composer's queue: messages written while a turn runs wait here, visible, each
// editable and cancellable, until the turn ends (composer.js sends the next one).
// Also the small in-page choice sheet Stop and End session ask through.

import { app } from './state.js';
import { h, clear } from './dom.js';

/** Most messages the page queues for one session (the bridge's own bound is the same). */
export const MAX_QUEUED = 32;

/** A queued message: `{text, attachments}`. */
export function queued(text, attachments = []) {
  return { text, attachments };
}

/** The queue of `s` shown above the composer: each item's text, Edit and Cancel. */
export function renderQueue(s, onChange) {
  const box = app.ui.queueInfo;
  // Only when it changed: a block arriving must not close an edit under way.
  const sig = JSON.stringify([s.id, s.queue.map((q) => [q.text, q.attachments?.length ?? 0])]);
  if (box.dataset.sig === sig) return;
  box.dataset.sig = sig;
  clear(box);
  box.hidden = s.queue.length === 0;
  if (!s.queue.length) return;
  const count = s.queue.length;
  box.append(h('div', { class: 'queue-head' }, `${count} message${count > 1 ? 's' : ''} queued until the turn ends`));
  s.queue.forEach((item, i) => {
    const n = item.attachments?.length ?? 0;
    const atts = n ? h('span', { class: 'queue-atts' }, ` (+${n} attachment${n > 1 ? 's' : ''})`) : null;
    const row = h('div', { class: 'queue-item', testid: 'queue-item', dataset: { index: i } });
    const view = () => {
      clear(row).append(
        h('div', { class: 'queue-text', testid: 'queue-text' }, item.text || '(attachments only)', atts),
        h(
          'div',
          { class: 'queue-actions' },
          h('button', { type: 'button', class: 'link-btn tap', testid: 'queue-edit', 'aria-label': `Edit queued message ${i + 1}`, onclick: edit }, 'Edit'),
          h(
            'button',
            {
              type: 'button',
              class: 'link-btn tap danger',
              testid: 'queue-cancel',
              'aria-label': `Cancel queued message ${i + 1}`,
              onclick: () => {
                const at = s.queue.indexOf(item);
                if (at >= 0) s.queue.splice(at, 1);
                onChange();
              },
            },
            'Cancel',
          ),
        ),
      );
    };
    const edit = () => {
      const area = h('textarea', { class: 'queue-editor', testid: 'queue-editor', rows: 2, value: item.text });
      clear(row).append(
        area,
        h(
          'div',
          { class: 'queue-actions' },
          h(
            'button',
            {
              type: 'button',
              class: 'link-btn tap',
              testid: 'queue-save',
              onclick: () => {
                const text = area.value.trim();
                if (!text && !item.attachments?.length) {
                  const at = s.queue.indexOf(item);
                  if (at >= 0) s.queue.splice(at, 1);
                } else item.text = text;
                onChange();
              },
            },
            'Save',
          ),
          h('button', { type: 'button', class: 'link-btn tap', testid: 'queue-discard', onclick: view }, 'Keep as it was'),
        ),
      );
      area.focus();
    };
    view();
    box.append(row);
  });
}

/**
 * Asks a question in a sheet over the session view; resolves to the chosen action's
 * `value` (null when dismissed). `actions`: `[{label, value, testid, kind}]`.
 */
export function choose(title, body, actions) {
  return new Promise((resolve) => {
    const done = (v) => {
      sheet.remove();
      resolve(v);
    };
    const sheet = h(
      'div',
      { class: 'choice-backdrop', testid: 'choice', onclick: (e) => e.target === sheet && done(null) },
      h(
        'div',
        { class: 'choice-sheet', role: 'dialog', 'aria-modal': 'true', 'aria-label': title },
        h('h2', null, title),
        body ? h('p', { class: 'muted' }, body) : null,
        actions.map((a) => h('button', { type: 'button', class: `wide ${a.kind ?? ''}`, testid: a.testid, onclick: () => done(a.value) }, a.label)),
        h('button', { type: 'button', class: 'wide', testid: 'choice-cancel', onclick: () => done(null) }, 'Cancel'),
      ),
    );
    document.body.append(sheet);
    sheet.querySelector('button')?.focus();
  });
}
