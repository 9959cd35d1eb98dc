// The home view: the bridge's sessions (a parked one marked) and the sessions started
// in a terminal on the computer (`scan_external_sessions`), tapping one of which
// attaches terminull to it (`attach_external`).

import { app, activeCtx } from './state.js';
import { h, clear } from './dom.js';
import { toast } from './status.js';
import { carryLink } from './carry.js';
import { showView } from './views.js';
import { sessionFor } from './sessions.js';
import { openSession, openSessionView } from './session-view.js';
import { renderSessionRows, _filters } from './session-list.js';
import { renderSwitcher, activate } from './switcher.js';

/** Shows the home view with the lists as held, then asks the bridge for fresh ones. */
export function showHome() {
  showView('home');
  renderLists();
  if (app.link) refreshLists();
}

export async function refreshLists() {
  // The lists of the bridge shown when asked: kept on that bridge, shown if it still is.
  const ctx = activeCtx();
  const link = ctx?.link;
  if (!link) return;
  app.terminals?.refresh();
  try {
    const r = await link.request({ type: 'list_sessions' });
    ctx.listings = Array.isArray(r.sessions) ? r.sessions.filter((s) => s && typeof s.session_id === 'string') : [];
  } catch (e) {
    console.warn(`list_sessions: ${e.message}`);
  }
  try {
    const r = await link.request({ type: 'scan_external_sessions' });
    const items = Array.isArray(r.sessions) ? r.sessions : [];
    ctx.external = { state: 'ok', items };
  } catch (e) {
    ctx.external = { state: e.code === 'not_supported' ? 'unsupported' : 'error', items: [], message: e.message };
  }
  renderSwitcher();
  if (ctx === activeCtx() && app.view === 'home') renderLists();
}

/**
 * On the bridge's LAN page, when its pairing named a relay: the link that takes this
 * pairing to the relay's page (installable, notifications, works away from home).
 */
function renderCarry() {
  const ui = app.ui;
  const ctx = activeCtx();
  const href = app.serverKind === 'lan' && ctx ? carryLink(app.identity, ctx.bridge) : null;
  ui.carry.hidden = !href;
  // The lists render often: the link stays the same element while it says the same.
  if ((ui.carry.dataset.href ?? '') === (href ?? '')) return;
  ui.carry.dataset.href = href ?? '';
  clear(ui.carry);
  if (!href) return;
  ui.carry.append(
    'Away from home, to install the app or to get notifications, use the relay’s page. It keeps this pairing:',
    h('a', { href, testid: 'carry-link', rel: 'noreferrer' }, `Open on ${new URL(href).host} ›`),
  );
}

export function renderLists() {
  const ui = app.ui;
  renderCarry();
  clear(ui.sessionList);
  clear(ui.externalList);
  const counts = renderSessionRows(ui.sessionList, ui.externalList);
  if (!counts.app) {
    const ctx = activeCtx();
    const why = counts.filtered
      ? filteredWhy()
      : ctx && !ctx.reachable
        ? `This computer is ${ctx.unreachable}.`
        : app.link
          ? 'No sessions yet. Start one.'
          : 'Connecting to the bridge…';
    ui.sessionList.append(h('li', { class: 'empty', testid: 'sessions-empty' }, why));
  }
  if (counts.terminal && !app.external.items.length) return;
  if (!app.external.items.length) {
    const why =
      app.external.state === 'unsupported'
        ? 'No sessions started in a terminal here. (This computer’s agents cannot list the sessions their own CLIs started.)'
        : app.external.state === 'error'
          ? `Could not list terminal sessions: ${app.external.message ?? ''}`
          : 'No sessions started in a terminal.';
    ui.externalList.append(h('li', { class: 'empty', testid: 'external-empty' }, why));
  }
  for (const x of app.external.items) {
    if (!x || typeof x !== 'object') continue;
    const agent = String(x.agent_id ?? '');
    const sid = String(x.agent_session_id ?? '');
    const cwd = typeof x.cwd === 'string' ? x.cwd : '';
    const title = typeof x.title === 'string' && x.title.trim() ? x.title : '';
    const bits = [relativeTime(x.updated_at)];
    if (Number.isSafeInteger(x.message_count)) bits.push(`${x.message_count} message${x.message_count === 1 ? '' : 's'}`);
    ui.externalList.append(
      h(
        'li',
        null,
        h(
          'button',
          {
            type: 'button',
            class: 'session-item external-item',
            testid: 'external-item',
            dataset: { agentId: agent, agentSessionId: sid },
            onclick: () => attachExternal(agent, sid, cwd),
          },
          h('div', { class: 'row1' }, h('span', { class: 'agent' }, agent), h('span', { class: 'state' }, bits.filter(Boolean).join(' · '))),
          h('div', { class: 'row2' }, title || cwd || sid),
          title && cwd ? h('div', { class: 'row3' }, cwd) : null,
        ),
      ),
    );
  }
}

function filteredWhy() {
  const f = _filters();
  if (f.query.trim()) return `No session matches “${f.query.trim()}”.`;
  if (f.archived) return 'No archived sessions.';
  return 'No session matches these filters.';
}

/** Opens a row of the list, on its own computer. */
export function openListed(ctx, s) {
  if (ctx !== activeCtx()) activate(ctx.id, false);
  openSession(s.session_id, s);
}

/** "5 min ago" from Unix seconds. */
function relativeTime(unix) {
  if (!Number.isFinite(unix)) return '';
  const ago = Math.max(0, Date.now() / 1000 - unix);
  if (ago < 60) return 'just now';
  if (ago < 3600) return `${Math.floor(ago / 60)} min ago`;
  if (ago < 86400) return `${Math.floor(ago / 3600)} h ago`;
  if (ago < 7 * 86400) return `${Math.floor(ago / 86400)} d ago`;
  return new Date(unix * 1000).toLocaleDateString();
}

async function attachExternal(agent, agentSessionId, cwd) {
  if (!app.link) return;
  try {
    const r = await app.link.request({ type: 'attach_external', agent, agent_session_id: agentSessionId, cwd });
    const s = sessionFor(r.session_id, { agentId: agent, cwd });
    s.followed = true;
    s.attachedOn = app.link;
    openSessionView(s);
  } catch (e) {
    toast(`Could not attach: ${e.message}`, 'warn');
  }
}
