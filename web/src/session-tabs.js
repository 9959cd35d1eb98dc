// The session view's tabs: Chat (the transcript and the composer), Files (the
// session directory, files-view.js) and Changes (its git working tree,
// changes-view.js). A session opens on Chat; the tab bar sits under the header.

import { app } from './state.js';
import { h } from './dom.js';
import { buildFilesPanel, showFiles } from './files-view.js';
import { buildChangesPanel, showChanges } from './changes-view.js';

const TABS = [
  ['chat', 'Chat'],
  ['files', 'Files'],
  ['changes', 'Changes'],
];

/** Builds the tab bar and the two panels (kept in `app.ui`); returns the tab bar. */
export function buildSessionTabs() {
  const ui = app.ui;
  ui.filesPanel = buildFilesPanel();
  ui.changesPanel = buildChangesPanel();
  ui.tabButtons = new Map();
  const bar = h('div', { class: 'session-tabs', role: 'tablist', 'aria-label': 'Session views', testid: 'session-tabs' });
  for (const [name, label] of TABS) {
    const b = h('button', { type: 'button', role: 'tab', class: 'session-tab', testid: `tab-${name}`, dataset: { tab: name }, 'aria-selected': 'false', onclick: () => showTab(name) }, label);
    ui.tabButtons.set(name, b);
    bar.append(b);
  }
  return bar;
}

/** Shows tab `name` of the session view (`chat`, `files` or `changes`). */
export function showTab(name) {
  const ui = app.ui;
  app.tab = name;
  for (const [n, b] of ui.tabButtons) b.setAttribute('aria-selected', String(n === name));
  document.body.dataset.tab = name;
  ui.transcript.hidden = name !== 'chat';
  ui.composerBar.hidden = name !== 'chat';
  if (ui.sessionTools) ui.sessionTools.hidden = name !== 'chat';
  ui.filesPanel.hidden = name !== 'files';
  ui.changesPanel.hidden = name !== 'changes';
  if (name === 'files') showFiles();
  else if (name === 'changes') showChanges();
  window.scrollTo(0, 0);
}
