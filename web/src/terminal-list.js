// The bridge's terminals on its home screen (docs/web-client.md#terminals): "+ Terminal"
// opens one in the bridge's home directory; the open ones (`list_terminals`, oldest
// first) are listed with their directory and age, tapping one reattaches to it
// (its screen and scrollback shown), and each has a Close. With terminals off in the
// bridge's config the section says so in the bridge's words.

import { app, activeCtx } from './state.js';
import { h, clear } from './dom.js';
import { toast } from './status.js';
import { openTerminal, attachTerminal } from './terminal-view.js';

/** The section, built once by shell.js. */
export function buildTerminalSection() {
  const ui = app.ui;
  ui.terminalList = h('ul', { class: 'terminal-list', testid: 'terminal-list' });
  ui.terminalOff = h('p', { class: 'terminal-off', testid: 'terminals-off', hidden: true });
  ui.terminalNew = h('button', { type: 'button', class: 'wide', testid: 'new-terminal', onclick: () => openTerminal() }, '+ Terminal');
  return h('div', { class: 'terminals' }, h('div', { class: 'list-head' }, h('h2', null, 'Terminals')), ui.terminalOff, ui.terminalNew, ui.terminalList);
}

/** Asks the bridge shown for its open terminals and lists them. */
export async function refreshTerminals() {
  const ctx = activeCtx();
  const link = ctx?.link;
  if (!link) return;
  let listed = [];
  let off = null;
  try {
    const r = await link.request({ type: 'list_terminals' });
    listed = Array.isArray(r?.terminals) ? r.terminals.filter((t) => t && typeof t.terminal_id === 'string') : [];
  } catch (e) {
    if (e.code === 'not_supported') off = e.message;
    else console.warn(`list_terminals: ${e.message}`);
  }
  if (ctx !== activeCtx()) return;
  renderTerminals(listed, off);
}

function renderTerminals(listed, off) {
  const ui = app.ui;
  clear(ui.terminalList);
  ui.terminalOff.hidden = !off;
  ui.terminalOff.textContent = off ? `Terminals are off on this computer. The bridge says: ${off}` : '';
  ui.terminalNew.disabled = !!off;
  for (const t of listed) {
    const cwd = typeof t.cwd === 'string' ? t.cwd : '';
    const shell = typeof t.shell === 'string' ? t.shell.split('/').pop() : '';
    const bits = [shell, t.attached > 0 ? `${t.attached} attached` : 'detached'].filter(Boolean);
    ui.terminalList.append(
      h(
        'li',
        { class: 'terminal-row', dataset: { terminalId: t.terminal_id } },
        h(
          'button',
          { type: 'button', class: 'session-item terminal-item', testid: 'terminal-item', 'aria-label': `Reattach to the terminal in ${cwd}`, onclick: () => attachTerminal(t.terminal_id) },
          h('div', { class: 'row1' }, h('span', { class: 'agent' }, cwd.split('/').filter(Boolean).pop() ?? '/'), h('span', { class: 'state' }, age(t.started_ts))),
          h('div', { class: 'row2' }, cwd),
          h('div', { class: 'row3' }, bits.join(' · ')),
        ),
        h('button', { type: 'button', class: 'link-btn tap', testid: 'terminal-item-close', 'aria-label': `Close the terminal in ${cwd}`, onclick: () => closeListed(t) }, 'Close'),
      ),
    );
  }
}

async function closeListed(t) {
  const link = app.link;
  if (!link) return;
  if (!window.confirm(`Close the terminal in ${t.cwd}? Its shell and everything it runs end.`)) return;
  try {
    await link.request({ type: 'terminal_close', terminal_id: t.terminal_id });
  } catch (e) {
    toast(`Could not close it: ${e.message}`, 'warn');
  }
  refreshTerminals();
}

function age(ts) {
  if (!Number.isFinite(ts)) return '';
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86400)} d`;
}
