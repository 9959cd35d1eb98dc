// The terminal view (docs/web-client.md#terminals): one of the bridge's terminals
// (docs/terminals.md) rendered by xterm.js, with the key bar (keybar.js) above the
// soft keyboard. Opening one (`terminal_open`, in a session's directory or the
// bridge's home) or attaching to one (`terminal_attach`, the scrollback first) makes
// the link follow it; its sealed output arrives through link.js's `onTerminal`. The
// window is fitted to the view and every change of size (rotation, the soft keyboard)
// is sent as `terminal_resize`. The URL names it (`#b=…&t=…`) so a reload reattaches;
// a new link (after a drop) reattaches from the last chunk shown.

import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { app, activeCtx } from './state.js';
import { h, clear } from './dom.js';
import { showView } from './views.js';
import { setTerminalRoute } from './route.js';
import { toast } from './status.js';
import * as c from './crypto.js';
import { adoptXtermCss, mirrorStyles } from './xterm-style.js';
import { TerminalFeed, chunks } from './terminal-keys.js';
import { buildKeybar } from './keybar.js';

/** Input sent, kept for the tests' view (`window.terminull.terminal()`): the latest characters. */
const SENT_KEPT = 4096;
/** How long a burst of size changes is gathered before one `terminal_resize`. */
const RESIZE_DEBOUNCE_MS = 120;

/** The terminal shown, or null: `{ctx, id, term, fit, feed, link, exited, ...}`. */
let shown = null;

/** The view's section, built once by shell.js. */
export function buildTerminalView() {
  const ui = app.ui;
  ui.termTitle = h('div', { class: 'term-title', testid: 'terminal-title' });
  ui.termClose = h('button', { type: 'button', class: 'link-btn tap', testid: 'terminal-close', 'aria-label': 'Close this terminal', onclick: () => closeShown() }, 'Close');
  ui.termNotice = h('div', { class: 'term-notice', testid: 'terminal-notice', role: 'status', hidden: true });
  ui.termScreen = h('div', { class: 'term-screen', testid: 'terminal-screen' });
  ui.keybar = buildKeybar({
    send: (text) => sendText(text),
    applicationCursor: () => shown?.term?.modes?.applicationCursorKeysMode === true,
    paste: (text) => shown?.term?.paste(text),
    focus: () => shown?.term?.focus(),
    focused: () => !!shown?.term?.textarea && document.activeElement === shown.term.textarea,
  });
  ui.viewTerminal = h(
    'section',
    { class: 'view view-terminal', hidden: true },
    h('div', { class: 'term-bar' }, ui.termTitle, ui.termClose),
    ui.termNotice,
    ui.termScreen,
    ui.keybar.el,
  );
  return ui.viewTerminal;
}

/** Opens a new terminal on the bridge shown: in session `sessionId`'s directory, or the bridge's home. */
export async function openTerminal({ sessionId = null } = {}) {
  const ctx = activeCtx();
  const view = show(ctx, null, sessionId ? 'Terminal · session' : 'Terminal · home');
  const link = ctx?.link;
  if (!link) return notice('Not connected to the bridge: a terminal opens once the link is up.', 'warn');
  const { cols, rows } = view.term;
  const message = { type: 'terminal_open', cols, rows };
  if (sessionId) message.session_id = sessionId;
  try {
    const r = await link.request(message);
    if (shown !== view) return undefined;
    adopt(view, r?.terminal, link);
  } catch (e) {
    if (shown === view) refused(e);
  }
  return undefined;
}

/** Shows terminal `id` of the bridge shown and follows it (its scrollback first). */
export function attachTerminal(id, title = null) {
  const ctx = activeCtx();
  const view = show(ctx, id, title ?? 'Terminal');
  setTerminalRoute(ctx?.id, id);
  if (ctx?.link) follow(view, ctx.link);
  else notice('Connecting to the bridge…');
}

/** A new link to bridge `ctx` (connection.js): the terminal shown on it follows again, from its last chunk. */
export function reattachTerminal(ctx, link) {
  if (!shown || shown.ctx !== ctx || !shown.id || shown.exited || shown.link === link) return;
  follow(shown, link);
}

/** Leaves the terminal (the view changed): the terminal goes on running on the bridge. */
export function leaveTerminal() {
  if (!shown) return;
  const view = shown;
  shown = null;
  clearTimeout(view.resizeTimer);
  view.observer?.disconnect();
  view.stopStyles?.();
  view.term.dispose();
  clear(app.ui.termScreen);
}

/** A sealed `terminal_output` / `terminal_exit` from bridge `ctx`'s link. */
export function onTerminal(ctx, terminalId, m) {
  const view = shown;
  if (!view || view.ctx !== ctx) return;
  if (!view.id) {
    // Opened, reply not yet read: kept until it names the terminal.
    if (view.early.length < 256) view.early.push([terminalId, m]);
    return;
  }
  if (terminalId !== view.id) return;
  if (m.type === 'terminal_output') {
    if (!view.feed.take(m)) return;
    let bytes;
    try {
      bytes = c.fromB64(m.data, 'data');
    } catch (e) {
      console.warn(`terminal output refused: ${e.message}`);
      return;
    }
    view.term.write(bytes);
  } else if (m.type === 'terminal_exit') {
    ended(view, m);
  }
}

function show(ctx, id, title) {
  leaveTerminal();
  showView('terminal');
  const ui = app.ui;
  ui.title.textContent = title;
  ui.termTitle.textContent = '';
  notice(null);
  ui.termClose.disabled = true;
  adoptXtermCss();
  const term = new Terminal({
    fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, 'Liberation Mono', 'DejaVu Sans Mono', monospace",
    fontSize: 13,
    lineHeight: 1.15,
    scrollback: 5000,
    cursorBlink: false,
    convertEol: false,
    allowProposedApi: false,
    theme: { background: '#0b0d11', foreground: '#e6e8ee', cursor: '#6aa9ff', selectionBackground: '#2b4a7a' },
  });
  const fit = new FitAddon();
  term.loadAddon(fit);
  const view = { ctx, id, term, fit, feed: new TerminalFeed(id), link: null, exited: false, early: [], sent: '', resizeTimer: null, sentSize: null };
  shown = view;
  view.stopStyles = mirrorStyles(ui.termScreen);
  term.open(ui.termScreen);
  softKeyboardFriendly(term.textarea);
  fitNow(view);
  view.observer = new ResizeObserver(() => fitNow(view));
  view.observer.observe(ui.termScreen);
  term.onData((data) => sendText(ui.keybar.modify(data)));
  term.onBinary((data) => sendBytes(Uint8Array.from(data, (ch) => ch.charCodeAt(0) & 0xff)));
  term.onResize(() => scheduleResize(view));
  ui.keybar.reset();
  return view;
}

/** The soft keyboard: no autocorrect, capitals, spelling or suggestions on the terminal's input. */
function softKeyboardFriendly(textarea) {
  if (!textarea) return;
  for (const [k, v] of [['autocorrect', 'off'], ['autocapitalize', 'off'], ['spellcheck', 'false'], ['autocomplete', 'off'], ['enterkeyhint', 'send'], ['aria-label', 'Terminal input']]) {
    textarea.setAttribute(k, v);
  }
}

function fitNow(view) {
  if (shown !== view || app.ui.termScreen.clientWidth === 0) return;
  try {
    view.fit.fit();
  } catch (e) {
    console.warn(`fit: ${e.message}`);
  }
}

function scheduleResize(view) {
  clearTimeout(view.resizeTimer);
  view.resizeTimer = setTimeout(() => sendResize(view), RESIZE_DEBOUNCE_MS);
}

function sendResize(view) {
  const { cols, rows } = view.term;
  if (shown !== view || !view.id || view.exited || !view.link || view.link.closed) return;
  if (view.sentSize && view.sentSize[0] === cols && view.sentSize[1] === rows) return;
  view.sentSize = [cols, rows];
  view.link.request({ type: 'terminal_resize', terminal_id: view.id, cols, rows }).catch((e) => console.warn(`terminal_resize: ${e.message}`));
}

/** The bridge's answer to open: the terminal's listing; output that came first is written now. */
function adopt(view, listing, link) {
  if (!listing || typeof listing.terminal_id !== 'string') return notice('The bridge answered without a terminal.', 'warn');
  view.id = listing.terminal_id;
  view.feed = new TerminalFeed(view.id);
  view.link = link;
  view.sentSize = [listing.cols, listing.rows];
  describe(listing);
  setTerminalRoute(view.ctx?.id, view.id);
  const early = view.early;
  view.early = [];
  for (const [id, m] of early) onTerminal(view.ctx, id, m);
  scheduleResize(view);
  return undefined;
}

async function follow(view, link) {
  view.link = link;
  const message = { type: 'terminal_attach', terminal_id: view.id };
  if (view.feed.lastSeq > 0) message.since_seq = view.feed.lastSeq;
  try {
    const r = await link.request(message);
    if (shown !== view) return;
    notice(null);
    describe(r?.terminal);
    view.sentSize = null;
    scheduleResize(view);
  } catch (e) {
    if (shown !== view) return;
    view.link = null;
    if (e.code === 'unknown_terminal') {
      view.exited = true;
      notice('This terminal has ended: it is no longer on the bridge.', 'warn');
      app.ui.keybar.setEnabled(false);
    } else {
      refused(e);
    }
  }
}

function describe(listing) {
  if (!listing) return;
  const ui = app.ui;
  ui.termClose.disabled = false;
  const cwd = typeof listing.cwd === 'string' ? listing.cwd : '';
  const shell = typeof listing.shell === 'string' ? listing.shell.split('/').pop() : '';
  ui.termTitle.textContent = [shell, cwd].filter(Boolean).join(' · ');
  ui.title.textContent = `Terminal · ${cwd.split('/').filter(Boolean).pop() ?? '/'}`;
}

function ended(view, m) {
  if (view.exited) return;
  view.exited = true;
  const how = m.reason === 'exited' ? (Number.isSafeInteger(m.exit_code) ? `the shell exited with status ${m.exit_code}` : m.signal ? `the shell ended by ${m.signal}` : 'the shell exited') : m.reason === 'closed' ? 'it was closed' : m.reason === 'idle' ? 'it was idle too long' : 'the bridge stopped';
  notice(`This terminal has ended: ${how}.`, 'info');
  app.ui.keybar.setEnabled(false);
  app.ui.termClose.disabled = true;
}

/** A refused open or attach, in the bridge's own words (terminals off: its reason). */
function refused(e) {
  const off = e.code === 'not_supported';
  notice(off ? `Terminals are off on this computer. The bridge says: ${e.message}` : `The terminal could not start: ${e.message}`, 'warn');
  app.ui.keybar.setEnabled(false);
}

function notice(text, kind = 'info') {
  const el = app.ui.termNotice;
  el.hidden = !text;
  el.textContent = text ?? '';
  el.dataset.kind = kind;
}

function sendText(text) {
  if (!text) return;
  sendBytes(c.utf8(text));
}

function sendBytes(bytes) {
  const view = shown;
  if (!view || !view.id || view.exited) return;
  const link = view.link;
  if (!link || link.closed) {
    toast('Not connected: what you type is not sent.', 'warn');
    return;
  }
  view.sent = (view.sent + c.fromUtf8(bytes)).slice(-SENT_KEPT);
  for (const piece of chunks(bytes)) {
    link.request({ type: 'terminal_input', terminal_id: view.id, data: c.b64(piece) }).catch((e) => {
      if (e.code === 'busy') toast('The shell is not reading what you type (it is busy); that input was dropped.', 'warn');
      else console.warn(`terminal_input: ${e.message}`);
    });
  }
}

async function closeShown() {
  const view = shown;
  if (!view?.id || !view.link) return;
  if (!window.confirm('Close this terminal? Its shell and everything it runs end.')) return;
  try {
    await view.link.request({ type: 'terminal_close', terminal_id: view.id });
  } catch (e) {
    toast(`Could not close it: ${e.message}`, 'warn');
  }
}

/** For tests and debugging: the shown terminal's id, size, screen text and the input sent. */
export function terminalDebug() {
  const view = shown;
  if (!view) return null;
  const buffer = view.term.buffer.active;
  const lines = [];
  for (let i = 0; i < buffer.length; i++) {
    const line = buffer.getLine(i);
    const text = line?.translateToString(true) ?? '';
    // A line the terminal wrapped continues the one before.
    if (line?.isWrapped && lines.length) lines[lines.length - 1] += text;
    else lines.push(text);
  }
  return { id: view.id, cols: view.term.cols, rows: view.term.rows, text: lines.join('\n'), sent: view.sent, lastSeq: view.feed.lastSeq, exited: view.exited, alternate: buffer.type === 'alternate' };
}
