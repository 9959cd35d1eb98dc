// The session's Files tab (docs/web-client.md, "Files and Changes"): the session
// directory's listing (folders first, sizes, times), a breadcrumb to go back up, a
// text file with syntax highlighting and line numbers, an image, and the bridge's
// refusal (binary, too large, outside the directory) in its own words. A text file
// can be edited and saved; the save carries the hash the file had when read, so a
// file changed on disk meanwhile is not overwritten (the `files` control,
// docs/files-and-git.md).

import { app, currentSession } from './state.js';
import { h, clear, append } from './dom.js';
import { ago } from './session-list.js';
import { highlightLines, languageFor } from './highlight.js';
import { toast } from './status.js';

const IMAGE = /\.(png|jpe?g|gif|webp|svg)$/i;

/** Per session: the directory shown and the file open in it. */
const where = new Map();
/** Bumped on every navigation: a reply for an older one is dropped. */
let generation = 0;

/** "0 B", "812 B", "4.2 KiB", "3.1 MiB". */
export function humanSize(n) {
  if (!Number.isFinite(n) || n < 0) return '';
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** The `files` control for session `sid` (rejects with the bridge's ControlError). */
function ask(sid, op, fields) {
  if (!app.link) return Promise.reject(new Error('This phone is not connected to the computer right now.'));
  return app.link.request({ type: 'files', session_id: sid, op, ...fields });
}

/** An error as the user reads it: the bridge's sentence, prefixed with what failed. */
export function problem(what, e, testid = 'files-error') {
  const text = e?.message ? String(e.message) : String(e);
  return h('div', { class: 'panel-error', role: 'alert', testid, dataset: { code: e?.code ?? null } }, h('div', { class: 'pe-head' }, what), h('pre', { class: 'pe-body' }, text));
}

export function buildFilesPanel() {
  return h('div', { class: 'tab-panel files-panel', testid: 'files-panel', hidden: true });
}

function state(sid) {
  if (!where.has(sid)) where.set(sid, { dir: '', file: null });
  return where.get(sid);
}

/** Shows the Files tab of the current session (where it was left). */
export function showFiles() {
  const s = currentSession();
  if (!s) return;
  const st = state(s.id);
  if (st.file) openFile(s.id, st.file);
  else openDir(s.id, st.dir);
}

function join(dir, name) {
  return dir ? `${dir}/${name}` : name;
}

function crumbs(sid, path, last) {
  const parts = path ? path.split('/') : [];
  const nav = h('nav', { class: 'crumbs', 'aria-label': 'Folder path', testid: 'breadcrumb' });
  const s = currentSession();
  const cwd = s?.cwd ?? s?.ctx?.listings?.find((l) => l.session_id === s.id)?.cwd;
  const rootName = (typeof cwd === 'string' && cwd.split('/').filter(Boolean).pop()) || 'Files';
  const items = [{ name: rootName, path: '' }, ...parts.map((p, i) => ({ name: p, path: parts.slice(0, i + 1).join('/') }))];
  items.forEach((it, i) => {
    if (i > 0) nav.append(h('span', { class: 'crumb-sep', 'aria-hidden': 'true' }, '/'));
    const isLast = i === items.length - 1 && last;
    nav.append(
      h(
        'button',
        { type: 'button', class: 'crumb', testid: 'crumb', dataset: { path: it.path }, 'aria-current': isLast ? 'page' : null, disabled: isLast, onclick: () => openDir(sid, it.path) },
        it.name,
      ),
    );
  });
  return nav;
}

function panel() {
  return app.ui.filesPanel;
}

function loading(sid, path, what) {
  clear(panel()).append(crumbs(sid, path, false), h('p', { class: 'panel-note' }, what));
}

/** Lists directory `path` of session `sid`. */
export async function openDir(sid, path) {
  const st = state(sid);
  st.dir = path;
  st.file = null;
  const mine = ++generation;
  loading(sid, path, 'Loading…');
  let r;
  try {
    r = await ask(sid, 'list', { path });
  } catch (e) {
    if (mine !== generation) return;
    clear(panel()).append(crumbs(sid, path, true), problem(`Could not list ${path || 'the session’s folder'}`, e));
    return;
  }
  if (mine !== generation) return;
  const entries = Array.isArray(r?.entries) ? r.entries : [];
  const now = Date.now() / 1000;
  const list = h(
    'ul',
    { class: 'file-list', testid: 'file-list' },
    entries.map((e) => entryRow(sid, path, e, now)),
  );
  append(clear(panel()), [
    crumbs(sid, path, true),
    entries.length ? list : h('p', { class: 'panel-note', testid: 'files-empty' }, 'This folder is empty.'),
    r?.truncated ? h('p', { class: 'panel-note', testid: 'files-truncated' }, `Showing the first ${entries.length} entries; the folder has more.`) : null,
  ]);
}

function entryRow(sid, dir, e, now) {
  const name = typeof e?.name === 'string' ? e.name : '?';
  const kind = ['file', 'dir', 'symlink', 'special'].includes(e?.kind) ? e.kind : 'special';
  // Folder and file are drawn by the style sheet (no emoji font needed).
  const icon = { dir: '', file: '', symlink: '↗', special: '⚙' }[kind];
  const when = Number.isFinite(e?.mtime_ms) ? ago(e.mtime_ms / 1000, now) : '';
  const meta = [kind === 'dir' ? 'folder' : kind === 'file' ? humanSize(e.size) : kind === 'symlink' ? 'link' : 'special file', when].filter(Boolean).join(' · ');
  const openable = kind !== 'special' && e?.utf8 !== false;
  const path = join(dir, name);
  const go = () => {
    if (kind === 'dir') openDir(sid, path);
    else if (kind === 'symlink') openLink(sid, path);
    else openFile(sid, path);
  };
  return h(
    'li',
    null,
    h(
      'button',
      { type: 'button', class: `file-row kind-${kind}`, testid: 'file-entry', dataset: { name, kind }, disabled: !openable, onclick: go },
      h('span', { class: `fr-icon icon-${kind}`, 'aria-hidden': 'true' }, icon),
      h('span', { class: 'fr-name' }, name),
      h('span', { class: 'fr-meta' }, e?.utf8 === false ? 'name is not UTF-8: cannot be opened' : kind === 'special' ? 'never opened' : meta),
      kind === 'dir' ? h('span', { class: 'fr-chev', 'aria-hidden': 'true' }, '›') : null,
    ),
  );
}

/** A symlink: a folder when listing it works, else a file. */
async function openLink(sid, path) {
  const mine = ++generation;
  try {
    await ask(sid, 'list', { path, limit: 1 });
  } catch {
    if (mine === generation) openFile(sid, path);
    return;
  }
  if (mine === generation) openDir(sid, path);
}

function parentOf(path) {
  const i = path.lastIndexOf('/');
  return i < 0 ? '' : path.slice(0, i);
}

/** Opens file `path` of session `sid`: an image, or text. */
export async function openFile(sid, path) {
  const st = state(sid);
  st.file = path;
  st.dir = parentOf(path);
  const mine = ++generation;
  loading(sid, path, 'Opening…');
  const image = IMAGE.test(path);
  let r;
  try {
    r = await ask(sid, image ? 'read_image' : 'read_text', { path });
  } catch (e) {
    if (mine !== generation) return;
    clear(panel()).append(crumbs(sid, path, true), problem(`Can’t show ${path.split('/').pop()}`, e));
    return;
  }
  if (mine !== generation) return;
  if (image) showImage(sid, path, r);
  else showText(sid, path, r);
}

function fileHead(name, bits, ...actions) {
  return h('div', { class: 'file-head' }, h('div', { class: 'fh-text' }, h('div', { class: 'fh-name', testid: 'file-name' }, name), h('div', { class: 'fh-meta' }, bits.filter(Boolean).join(' · '))), ...actions);
}

function showImage(sid, path, r) {
  const mime = typeof r?.mime_type === 'string' && /^image\/[a-z0-9.+-]+$/.test(r.mime_type) ? r.mime_type : 'application/octet-stream';
  const data = typeof r?.data === 'string' ? r.data : '';
  clear(panel()).append(
    crumbs(sid, path, true),
    fileHead(path.split('/').pop(), [humanSize(r?.size), mime]),
    h('div', { class: 'image-view' }, h('img', { src: `data:${mime};base64,${data}`, alt: path, testid: 'file-image' })),
  );
}

function showText(sid, path, r) {
  const text = typeof r?.text === 'string' ? r.text : '';
  const lang = languageFor(path);
  const { lines, highlighted } = highlightLines(text, lang);
  const code = h('code', { class: highlighted ? 'hljs' : null }, lines);
  const view = h('pre', { class: 'code-view', testid: 'file-text', dataset: { language: highlighted ? lang : 'plain' } }, code);
  const when = Number.isFinite(r?.mtime_ms) ? ago(r.mtime_ms / 1000) : '';
  const edit = h('button', { type: 'button', class: 'small-btn', testid: 'file-edit', onclick: () => editText(sid, path, r) }, 'Edit');
  clear(panel()).append(crumbs(sid, path, true), fileHead(path.split('/').pop(), [humanSize(r?.size), `${lines.length} line${lines.length === 1 ? '' : 's'}`, highlighted ? lang : null, when], edit), view);
}

function editText(sid, path, r) {
  const area = h('textarea', { class: 'file-editor', testid: 'file-editor', spellcheck: 'false', autocapitalize: 'off', autocomplete: 'off', 'aria-label': `Contents of ${path}` });
  area.value = typeof r?.text === 'string' ? r.text : '';
  const status = h('div', { class: 'edit-status' });
  const save = h('button', { type: 'button', class: 'small-btn primary', testid: 'file-save' }, 'Save');
  const cancel = h('button', { type: 'button', class: 'small-btn', testid: 'file-cancel', onclick: () => showText(sid, path, r) }, 'Cancel');
  save.addEventListener('click', async () => {
    save.disabled = true;
    clear(status);
    try {
      const w = await ask(sid, 'write_text', { path, text: area.value, expected_sha256: r.sha256 });
      toast(`Saved ${path.split('/').pop()}.`);
      showText(sid, path, { ...r, text: area.value, size: w?.size ?? r.size, sha256: w?.sha256 ?? r.sha256, mtime_ms: Date.now() });
    } catch (e) {
      save.disabled = false;
      const reload = e?.code === 'conflict' ? h('button', { type: 'button', class: 'small-btn', testid: 'file-reload', onclick: () => openFile(sid, path) }, 'Load the file from disk (drops your edits)') : null;
      append(status, [problem(e?.code === 'conflict' ? 'Not saved: the file changed on the computer' : 'Not saved', e, 'save-error'), reload]);
    }
  });
  clear(panel()).append(crumbs(sid, path, true), fileHead(path.split('/').pop(), ['editing'], cancel, save), status, area);
  area.focus();
}
