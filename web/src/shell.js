// The page's DOM, built once: the header (back, the bridges' switcher, title, path,
// connection state, refused count), the four views (pair, home, new session, session) and the toast,
// with each control wired to the module that acts on it. The nodes later code
// updates are kept in `app.ui`.

import { app } from './state.js';
import { h, clear, $ } from './dom.js';
import { showRejected } from './status.js';
import { pairWith } from './pairing.js';
import { showHome, refreshLists, renderLists, openListed } from './lists.js';
import { buildListTools } from './session-list.js';
import { showNewSession, agentChanged, startSession } from './new-session.js';
import { composerChanged, sendComposer, interrupt, endSession } from './composer.js';
import { buildAttachControls } from './attach-view.js';
import { buildOptionsButton } from './session-options.js';
import { continueInTerminal } from './handoff.js';
import { buildSwitcher, switchTo } from './switcher.js';
import { buildSessionTabs } from './session-tabs.js';
import { buildTerminalView, openTerminal } from './terminal-view.js';
import { buildTerminalSection } from './terminal-list.js';

export function buildShell() {
  const ui = app.ui;
  ui.back = h('button', { type: 'button', class: 'icon-btn back', 'aria-label': 'Back', hidden: true, onclick: () => showHome() }, '‹');
  ui.title = h('h1', { class: 'title' }, 'terminull');
  ui.path = h('span', { class: 'badge path', testid: 'path', title: 'How this page reaches the bridge' });
  ui.conn = h('span', { class: 'conn', testid: 'connection-status', dataset: { state: 'offline' } }, 'offline');
  ui.rejected = h('button', { type: 'button', class: 'badge rejected', testid: 'rejected', hidden: true, onclick: showRejected });
  const switcher = buildSwitcher();
  const header = h('header', { class: 'topbar' }, ui.back, switcher.control, ui.title, h('div', { class: 'status' }, ui.path, ui.conn, ui.rejected));

  // Not paired / pairing.
  ui.pairMsg = h('p', { class: 'pair-msg' });
  ui.pasteInput = h('input', { type: 'url', class: 'paste', placeholder: 'or paste the pairing link', autocomplete: 'off' });
  ui.viewPair = h(
    'section',
    { class: 'view view-pair', hidden: true },
    h('h1', null, 'Pair this phone'),
    ui.pairMsg,
    h(
      'form',
      {
        class: 'paste-form',
        onsubmit: (e) => {
          e.preventDefault();
          const v = ui.pasteInput.value.trim();
          if (v) pairWith(v);
        },
      },
      ui.pasteInput,
      h('button', { type: 'submit' }, 'Pair'),
    ),
  );

  // Home.
  ui.banner = h('div', { class: 'banner', hidden: true });
  ui.sessionList = h('ul', { class: 'session-list' });
  ui.externalList = h('ul', { class: 'session-list external' });
  ui.carry = h('p', { class: 'app-note carry', testid: 'carry', hidden: true });
  ui.viewHome = h(
    'section',
    { class: 'view view-home', hidden: true },
    ui.banner,
    ui.carry,
    h('button', { type: 'button', class: 'primary wide', testid: 'new-session', onclick: () => showNewSession() }, '+ New session'),
    h('div', { class: 'list-head' }, h('h2', null, 'Sessions'), h('button', { type: 'button', class: 'link-btn tap', testid: 'session-refresh', onclick: () => refreshLists() }, 'Refresh')),
    buildListTools(renderLists, openListed, switchTo),
    ui.sessionList,
    h('h2', null, 'From your terminal'),
    ui.externalList,
    buildTerminalSection(),
  );

  // New session.
  ui.agentPicker = h('select', { testid: 'agent-picker', onchange: () => agentChanged() });
  ui.cwd = h('input', { type: 'text', testid: 'cwd', placeholder: '/home/you/project', autocapitalize: 'off', autocomplete: 'off', spellcheck: 'false' });
  ui.modelPicker = h('select', { testid: 'model-picker', disabled: true });
  ui.modelRow = h('label', { class: 'field', hidden: true }, h('span', null, 'Model'), ui.modelPicker);
  ui.newError = h('p', { class: 'form-error', hidden: true });
  ui.startBtn = h('button', { type: 'submit', class: 'primary wide', testid: 'start-session' }, 'Start');
  ui.viewNew = h(
    'section',
    { class: 'view view-new', hidden: true },
    h('h1', null, 'New session'),
    h(
      'form',
      {
        onsubmit: (e) => {
          e.preventDefault();
          startSession();
        },
      },
      h('label', { class: 'field' }, h('span', null, 'Agent'), ui.agentPicker),
      h('label', { class: 'field' }, h('span', null, 'Working directory'), ui.cwd),
      ui.modelRow,
      ui.newError,
      ui.startBtn,
    ),
  );

  // Session.
  ui.transcript = h('div', { class: 'transcript', testid: 'transcript' });
  ui.queueInfo = h('div', { class: 'queue-info', testid: 'queued', hidden: true });
  ui.palette = h('ul', { class: 'palette', testid: 'slash-palette', hidden: true });
  ui.composer = h('textarea', {
    testid: 'composer',
    rows: 1,
    placeholder: 'Message…',
    oninput: () => composerChanged(),
    onkeydown: (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && window.matchMedia('(pointer: fine)').matches) {
        e.preventDefault();
        sendComposer();
      }
    },
  });
  ui.stop = h('button', { type: 'button', class: 'stop', testid: 'stop', hidden: true, onclick: () => interrupt() }, '■ Stop');
  ui.send = h('button', { type: 'button', class: 'send primary', testid: 'send', onclick: () => sendComposer() }, 'Send');
  const attach = buildAttachControls();
  ui.endSession = h('button', { type: 'button', class: 'link-btn tap end-session', testid: 'end-session', onclick: () => endSession() }, 'End session');
  ui.parkedBanner = h('div', { class: 'parked-banner', testid: 'parked-banner', hidden: true });
  ui.continueBtn = h(
    'button',
    { type: 'button', class: 'link-btn continue-btn', testid: 'continue-in-terminal', disabled: true, onclick: () => continueInTerminal() },
    'Continue in Terminal',
  );
  ui.terminalCard = h('div', { class: 'terminal-card', hidden: true });
  ui.viewSession = h(
    'section',
    { class: 'view view-session', hidden: true },
    h(
      'div',
      { class: 'session-bar' },
      buildSessionTabs(),
      ui.parkedBanner,
      h(
        'div',
        { class: 'session-actions' },
        ui.continueBtn,
        h('button', { type: 'button', class: 'link-btn', testid: 'open-terminal', 'aria-label': 'Terminal here: open a shell in this session’s directory', onclick: () => openTerminal({ sessionId: app.current }) }, 'Terminal here'),
      ),
      ui.terminalCard,
    ),
    // Not sticky: scrolled away with the conversation, there at its top.
    (ui.sessionTools = h('div', { class: 'session-tools' }, buildOptionsButton(), ui.endSession)),
    ui.transcript,
    ui.filesPanel,
    ui.changesPanel,
    (ui.composerBar = h(
      'footer',
      { class: 'composer-bar' },
      ui.queueInfo,
      ui.palette,
      attach.tray,
      attach.menu,
      h('div', { class: 'composer-row' }, attach.button, ui.composer, ui.stop, ui.send),
    )),
  );

  ui.toast = h('div', { class: 'toast', role: 'status', hidden: true });
  const root = $('#app') ?? document.body.appendChild(h('div', { id: 'app' }));
  clear(root);
  root.append(header, h('main', null, ui.viewPair, ui.viewHome, ui.viewNew, ui.viewSession, buildTerminalView()), switcher.sheet, ui.toast);
}
