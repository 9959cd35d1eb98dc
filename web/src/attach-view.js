// The attachments' DOM in the composer: the attach menu (camera, photos, files), its
// hidden pickers, and the tray of removable thumbnails before sending.

import { app, currentSession } from './state.js';
import { h, clear } from './dom.js';
import { toast } from './status.js';
import { acceptedKinds, refusal, readAttachment, isImage, formatBytes, MAX_TOTAL_BYTES, MAX_ATTACHMENTS } from './attach.js';
import { extBadge } from './attachments-shown.js';

/** The composer's attach button, its menu and hidden pickers, and the tray; kept in app.ui. */
export function buildAttachControls() {
  const ui = app.ui;
  const picker = (testid, attrs) =>
    h('input', { type: 'file', hidden: true, testid, ...attrs, onchange: (e) => picked(e.target) });
  ui.pickCamera = picker('pick-camera', { accept: 'image/*', capture: 'environment' });
  ui.pickPhotos = picker('pick-photos', { accept: 'image/*', multiple: true });
  ui.pickFiles = picker('pick-files', { multiple: true });
  const item = (label, testid, input) =>
    h('button', { type: 'button', class: 'attach-item', testid, onclick: () => { ui.attachMenu.hidden = true; input.click(); } }, label);
  ui.attachCamera = item('Camera', 'attach-camera', ui.pickCamera);
  ui.attachPhotos = item('Photos', 'attach-photos', ui.pickPhotos);
  ui.attachFiles = item('Files', 'attach-files', ui.pickFiles);
  ui.attachMenu = h('div', { class: 'attach-menu', testid: 'attach-menu', hidden: true }, ui.attachCamera, ui.attachPhotos, ui.attachFiles);
  ui.attachBtn = h(
    'button',
    {
      type: 'button',
      class: 'attach-btn icon-btn',
      testid: 'attach',
      'aria-label': 'Attach',
      hidden: true,
      onclick: () => {
        ui.attachMenu.hidden = !ui.attachMenu.hidden;
      },
    },
    '+',
  );
  ui.tray = h('div', { class: 'attach-tray', testid: 'attach-tray', hidden: true });
  return { button: ui.attachBtn, menu: h('div', null, ui.attachMenu, ui.pickCamera, ui.pickPhotos, ui.pickFiles), tray: ui.tray };
}

/** The draft's attachments of `s` (made empty if new). */
export function draftOf(s) {
  s.draft ??= [];
  return s.draft;
}

/** Picks are read one after the other, in the order picked, each within what is left. */
let reading = Promise.resolve();
let unread = 0;

/** Whether picked files are still being read (the message waits for them). */
export function stillReading() {
  return unread > 0;
}

function picked(input) {
  const s = currentSession();
  const files = [...(input.files ?? [])];
  input.value = '';
  app.ui.attachMenu.hidden = true;
  if (!s) return reading;
  unread += 1;
  reading = reading.then(() => readAll(s, files)).finally(() => {
    unread -= 1;
  });
  return reading;
}

async function readAll(s, files) {
  const kinds = acceptedKinds(s.agentInfo);
  for (const file of files) {
    const held = draftOf(s);
    const why = refusal(held, file, kinds);
    if (why) {
      toast(why, 'warn');
      continue;
    }
    const used = held.reduce((sum, a) => sum + a.size, 0);
    try {
      held.push(await readAttachment(file, MAX_TOTAL_BYTES - used));
    } catch (e) {
      toast(e.message ?? String(e), 'warn');
    }
    renderTray(s);
  }
}

/** The tray of `s`'s draft attachments, each removable. */
export function renderTray(s) {
  const ui = app.ui;
  if (!s || app.current !== s.id) return;
  const held = draftOf(s);
  const sig = JSON.stringify([s.id, held.map((a) => [a.name, a.size])]);
  if (ui.tray.dataset.sig === sig) return;
  ui.tray.dataset.sig = sig;
  clear(ui.tray);
  ui.tray.hidden = held.length === 0;
  held.forEach((a, i) => {
    const face = isImage(a.mime_type)
      ? h('img', { class: 'att-thumb', src: `data:${a.mime_type};base64,${a.data}`, alt: a.name })
      : h('span', { class: 'att-file' }, extBadge(a.name), a.name);
    ui.tray.append(
      h(
        'div',
        { class: 'tray-item', testid: 'tray-item', title: `${a.name} · ${formatBytes(a.size)}` },
        face,
        h('span', { class: 'tray-size' }, formatBytes(a.size)),
        h(
          'button',
          {
            type: 'button',
            class: 'tray-remove',
            testid: 'tray-remove',
            'aria-label': `Remove ${a.name}`,
            onclick: () => {
              held.splice(i, 1);
              renderTray(s);
            },
          },
          h('span', { 'aria-hidden': 'true' }, '×'),
        ),
      ),
    );
  });
  if (held.length) {
    const used = held.reduce((sum, a) => sum + a.size, 0);
    ui.tray.append(h('span', { class: 'tray-budget', testid: 'tray-budget' }, `${held.length}/${MAX_ATTACHMENTS} · ${formatBytes(used)} of ${formatBytes(MAX_TOTAL_BYTES)}`));
  }
}

/** Shows the attach button and its menu's items as `s`'s agent allows. */
export function updateAttachControls(s) {
  const ui = app.ui;
  const kinds = acceptedKinds(s?.agentInfo);
  ui.attachBtn.hidden = !(kinds.images || kinds.documents);
  if (ui.attachBtn.hidden) ui.attachMenu.hidden = true;
  ui.attachCamera.hidden = !kinds.images;
  ui.attachPhotos.hidden = !kinds.images;
  ui.attachFiles.hidden = !kinds.documents;
  renderTray(s);
}
