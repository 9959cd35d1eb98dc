// The switcher between paired bridges (docs/web-client.md, "Several bridges"): a
// header control naming the bridge shown, with a count of what waits on the others,
// and a sheet listing every paired bridge — its name, whether it is online, the
// permission requests waiting and the sessions with a finished turn not seen — where
// one is shown, renamed (on this page only) or forgotten, and another is paired.

import { app, activeCtx } from './state.js';
import { h, clear } from './dom.js';
import { setConn, toast } from './status.js';
import { showView } from './views.js';
import { showHome } from './lists.js';
import { connect, disconnect } from './connection.js';
import { showBanner } from './pairing.js';
import { attentionOf } from './attention.js';
import { syncPins } from './integrity.js';
import { bridgeForgotten } from './notifications.js';
import { displayName, forgetBridge, renameBridge, setActiveBridge, shortId, MAX_BRIDGES } from './bridges.js';

/** The header control and the sheet (built by the shell). */
export function buildSwitcher() {
  const ui = app.ui;
  ui.switchName = h('span', { class: 'bs-name', testid: 'switcher-name' });
  ui.switchBadge = h('span', { class: 'bs-badge', testid: 'switcher-attention', hidden: true });
  ui.switcher = h(
    'button',
    { type: 'button', class: 'bridge-switch', testid: 'switcher', hidden: true, 'aria-haspopup': 'true', 'aria-expanded': 'false', onclick: () => toggleSheet() },
    h('span', { class: 'bs-icon', 'aria-hidden': 'true' }, '▣'),
    ui.switchName,
    ui.switchBadge,
    h('span', { class: 'bs-caret', 'aria-hidden': 'true' }, '▾'),
  );
  ui.bridgeList = h('ul', { class: 'bridge-list', testid: 'bridge-list' });
  ui.sheet = h(
    'div',
    { class: 'bridge-sheet', testid: 'bridge-sheet', hidden: true, onclick: (e) => e.target === ui.sheet && closeSheet() },
    h(
      'div',
      { class: 'sheet-panel', role: 'dialog', 'aria-label': 'Computers' },
      h('div', { class: 'list-head' }, h('h2', null, 'Computers'), h('button', { type: 'button', class: 'link-btn', onclick: () => closeSheet() }, 'Close')),
      ui.bridgeList,
      h('button', { type: 'button', class: 'wide', testid: 'pair-another', onclick: () => pairAnother() }, '+ Pair another computer'),
      h('p', { class: 'small muted' }, `Up to ${MAX_BRIDGES} computers. “Online” means the link to that computer is open and it answers.`),
    ),
  );
  return { control: ui.switcher, sheet: ui.sheet };
}

function total(a) {
  return a.permissions + a.unseen;
}

function stateText(ctx) {
  if (!ctx.reachable) return ctx.unreachable;
  if (ctx.connState === 'connected') return app.serverKind === 'lan' ? 'online · LAN' : 'online';
  if (ctx.connState === 'bridge-offline') return 'offline (not connected to the relay)';
  return ctx.connLabel || ctx.connState;
}

/** Refreshes the header control and, when open, the sheet. Cheap: called on every change. */
export function renderSwitcher() {
  const ui = app.ui;
  if (!ui.switcher) return;
  const active = activeCtx();
  ui.switcher.hidden = !active;
  if (!active) return closeSheet();
  ui.switchName.textContent = displayName(active.bridge);
  let others = 0;
  for (const ctx of app.bridges.values()) if (ctx !== active) others += total(attentionOf(ctx));
  ui.switchBadge.hidden = others === 0;
  ui.switchBadge.textContent = String(others);
  ui.switcher.title = others ? `${others} waiting on your other computers` : 'Your computers';
  ui.switcher.dataset.attention = String(others);
  if (!ui.sheet.hidden) renderList();
}

function renderList() {
  const ui = app.ui;
  clear(ui.bridgeList);
  for (const ctx of app.bridges.values()) {
    const a = attentionOf(ctx);
    const online = ctx.connState === 'connected';
    const counts = [];
    if (a.permissions) counts.push(h('span', { class: 'count warn', testid: 'bridge-permissions' }, `${a.permissions} waiting`));
    if (a.unseen) counts.push(h('span', { class: 'count', testid: 'bridge-unseen' }, `${a.unseen} finished`));
    ui.bridgeList.append(
      h(
        'li',
        { class: `bridge-row${ctx === activeCtx() ? ' active' : ''}`, testid: 'bridge-item', dataset: { bridgeId: ctx.id, online: String(online), attention: String(total(a)) } },
        h(
          'button',
          { type: 'button', class: 'bridge-main', 'aria-current': ctx === activeCtx() ? 'true' : null, onclick: () => switchTo(ctx.id) },
          h('div', { class: 'row1' }, h('span', { class: 'bridge-name' }, displayName(ctx.bridge)), h('span', { class: 'bridge-counts' }, counts)),
          h('div', { class: 'row2' }, h('span', { class: 'conn', dataset: { state: ctx.reachable ? ctx.connState : 'unreachable' } }, stateText(ctx)), ctx.bridge.name ? h('span', { class: 'bridge-id' }, shortId(ctx.id)) : null),
        ),
        h(
          'div',
          { class: 'bridge-actions' },
          h('button', { type: 'button', class: 'link-btn', testid: 'bridge-rename', onclick: () => rename(ctx.id) }, 'Rename'),
          h('button', { type: 'button', class: 'link-btn danger', testid: 'bridge-forget', onclick: (e) => forget(ctx.id, e.currentTarget) }, 'Forget'),
        ),
      ),
    );
  }
}

export function toggleSheet() {
  if (app.ui.sheet.hidden) openSheet();
  else closeSheet();
}

function openSheet() {
  app.ui.sheet.hidden = false;
  app.ui.switcher.setAttribute('aria-expanded', 'true');
  renderList();
}

export function closeSheet() {
  if (!app.ui.sheet) return;
  app.ui.sheet.hidden = true;
  app.ui.switcher.setAttribute('aria-expanded', 'false');
}

/** Makes bridge `id` the one shown; `home` shows its session list (else the caller opens a view). */
export function activate(id, home = true) {
  const ctx = app.bridges.get(id);
  if (!ctx) return null;
  closeSheet();
  if (app.activeId !== id) {
    app.activeId = id;
    setActiveBridge(app.store, id).catch(() => {});
    setConn(ctx.connState, ctx.connLabel);
  }
  showBanner();
  if (home) showHome();
  if (!ctx.link) connect(ctx);
  renderSwitcher();
  return ctx;
}

export function switchTo(id) {
  activate(id, true);
}

function pairAnother() {
  closeSheet();
  showView('pair');
  app.ui.pairMsg.textContent = 'Run `terminull pair` on the other computer and open its link here (scan the QR code, or paste the link). The computers paired already stay paired.';
}

async function rename(id) {
  const ctx = app.bridges.get(id);
  if (!ctx) return;
  const name = window.prompt('Name this computer (on this phone only):', ctx.bridge.name ?? '');
  if (name == null) return;
  const list = await renameBridge(app.store, id, name);
  const rec = list.find((b) => b.bridgeId === id);
  if (rec && app.bridges.get(id) === ctx) ctx.bridge = rec;
  renderSwitcher();
}

/** Forgets a bridge (a second tap confirms): its link closes, its keys and sessions leave the store, its pushes stop. */
async function forget(id, button) {
  const ctx = app.bridges.get(id);
  if (!ctx) return;
  if (button.dataset.confirm !== 'true') {
    button.dataset.confirm = 'true';
    button.textContent = 'Tap again to forget';
    return;
  }
  bridgeForgotten(ctx);
  disconnect(ctx);
  app.bridges.delete(id);
  const { active } = await forgetBridge(app.store, id);
  // The worker stops taking code signed by a bridge this phone forgot.
  await syncPins();
  toast(`${displayName(ctx.bridge)} forgotten on this phone. To revoke this phone, run \`terminull devices revoke\` on that computer.`);
  if (app.activeId === id) {
    app.activeId = null;
    if (active && app.bridges.has(active)) activate(active, true);
    else {
      setConn('offline', 'not paired');
      pairAnother();
    }
  }
  renderSwitcher();
}
