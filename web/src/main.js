// The terminull phone app: pairs from the QR link, keeps an end-to-end encrypted
// link to the bridge (same origin: the bridge's LAN server or a relay), lists and
// starts sessions, renders their blocks, answers permission requests, interrupts,
// and resumes by seq after a sleep, a dropped socket or a reload.

import * as c from './crypto.js';
import { openLink, ControlError } from './link.js';
import { Transcript, displayKey, replaceKey } from './transcript.js';
import { Store } from './store.js';
import { h, clear, $ } from './dom.js';
import { renderBlock, copyableCommand } from './render.js';

/** The bridge's universal slash commands (protocol/src/commands.rs), used when the agent lists none. */
const BUILTIN_COMMANDS = [
  { name: 'help', description: 'List the commands this session understands', source: 'bridge' },
  { name: 'status', description: "Show the session's agent, model, cost and token usage", source: 'bridge' },
  { name: 'model', description: 'List the models this agent offers', source: 'bridge' },
  { name: 'usage', description: "Show the session's token and cost totals", source: 'bridge' },
  { name: 'stop', description: 'Interrupt the running turn', source: 'bridge' },
  { name: 'new', description: 'End this session and start a fresh one with the same agent and directory', source: 'bridge' },
];
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 5000;
const PERSIST_DELAY_MS = 150;
const CURRENT_KEY = 'terminull.current';

const app = {
  store: null,
  identity: null,
  bridge: null,
  serverKind: null,
  link: null,
  connState: 'offline',
  bridgeOnline: true,
  agents: [],
  sessions: new Map(),
  listings: [],
  external: { state: 'unknown', items: [] },
  current: null,
  view: 'home',
  rejected: 0,
  reasons: [],
  backoff: BACKOFF_MIN_MS,
  reconnectTimer: null,
  connecting: false,
  pushLast: 0n,
  shortCode: null,
  ui: {},
};

// ---------------------------------------------------------------------------
// Shell

function buildShell() {
  const ui = app.ui;
  ui.back = h('button', { type: 'button', class: 'icon-btn back', 'aria-label': 'Back', hidden: true, onclick: () => showView('home') }, '‹');
  ui.title = h('div', { class: 'title' }, 'terminull');
  ui.path = h('span', { class: 'badge path', testid: 'path', title: 'How this page reaches the bridge' });
  ui.conn = h('span', { class: 'conn', testid: 'connection-status', dataset: { state: 'offline' } }, 'offline');
  ui.rejected = h('button', { type: 'button', class: 'badge rejected', testid: 'rejected', hidden: true, onclick: showRejected });
  const header = h('header', { class: 'topbar' }, ui.back, ui.title, h('div', { class: 'status' }, ui.path, ui.conn, ui.rejected));

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
  ui.viewHome = h(
    'section',
    { class: 'view view-home', hidden: true },
    ui.banner,
    h('button', { type: 'button', class: 'primary wide', testid: 'new-session', onclick: () => showNewSession() }, '+ New session'),
    h('div', { class: 'list-head' }, h('h2', null, 'Sessions'), h('button', { type: 'button', class: 'link-btn', onclick: () => refreshLists() }, 'Refresh')),
    ui.sessionList,
    h('h2', null, 'From your terminal'),
    ui.externalList,
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
    h('div', { class: 'session-bar' }, ui.parkedBanner, h('div', { class: 'session-actions' }, ui.continueBtn), ui.terminalCard),
    ui.transcript,
    h('footer', { class: 'composer-bar' }, ui.queueInfo, ui.palette, h('div', { class: 'composer-row' }, ui.composer, ui.stop, ui.send)),
  );

  ui.toast = h('div', { class: 'toast', role: 'status', hidden: true });
  const root = $('#app') ?? document.body.appendChild(h('div', { id: 'app' }));
  clear(root);
  root.append(header, h('main', null, ui.viewPair, ui.viewHome, ui.viewNew, ui.viewSession), ui.toast);
}

function showView(view) {
  app.view = view;
  const ui = app.ui;
  ui.viewPair.hidden = view !== 'pair';
  ui.viewHome.hidden = view !== 'home';
  ui.viewNew.hidden = view !== 'new';
  ui.viewSession.hidden = view !== 'session';
  ui.back.hidden = !(view === 'new' || view === 'session');
  document.body.dataset.view = view;
  if (view === 'home') {
    app.current = null;
    try {
      sessionStorage.removeItem(CURRENT_KEY);
    } catch {
      /* storage off */
    }
    ui.title.textContent = 'terminull';
    renderLists();
    if (app.link) refreshLists();
  } else if (view === 'new') {
    ui.title.textContent = 'New session';
  }
}

let toastTimer = null;
function toast(text, kind = 'info') {
  const t = app.ui.toast;
  t.textContent = text;
  t.dataset.kind = kind;
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => (t.hidden = true), 4000);
}

function setConn(state, label) {
  app.connState = state;
  const el = app.ui.conn;
  el.dataset.state = state;
  el.textContent = label ?? state;
  el.title = state === 'connected' ? 'End-to-end encrypted link to the bridge' : '';
}

function setPath(kind) {
  app.serverKind = kind;
  app.ui.path.textContent = kind === 'lan' ? 'LAN' : kind === 'relay' ? 'relay' : '';
  app.ui.path.dataset.kind = kind ?? '';
}

function noteRejected(reason) {
  app.rejected += 1;
  app.reasons.push(reason);
  if (app.reasons.length > 50) app.reasons.shift();
  const b = app.ui.rejected;
  b.hidden = false;
  b.textContent = `⚠ ${app.rejected}`;
  b.title = `${app.rejected} message(s) from the network refused (failed to verify or open)`;
  console.warn(reason);
}

function showRejected() {
  toast(`${app.rejected} refused: ${app.reasons.slice(-3).join(' | ')}`, 'warn');
}

// ---------------------------------------------------------------------------
// Pairing

function pairingFragment() {
  const f = location.hash.slice(1);
  return /(^|&)v=/.test(f) && /(^|&)s=/.test(f) ? f : null;
}

function clearFragment() {
  history.replaceState(null, '', '/');
}

function deviceName() {
  const ua = navigator.userAgent || '';
  const m = /(iPhone|iPad|Android|Windows|Macintosh|Linux)/.exec(ua);
  return `Web app${m ? ` (${m[1]})` : ''}`;
}

async function pairWith(linkText) {
  showView('pair');
  const ui = app.ui;
  ui.pairMsg.textContent = 'Pairing…';
  let link;
  try {
    link = c.parsePairingLink(linkText);
  } catch (e) {
    clearFragment();
    ui.pairMsg.textContent = `This pairing link is not valid: ${e.message}`;
    return;
  }
  clearFragment();
  if (link.expiresAt < Date.now() / 1000) {
    ui.pairMsg.textContent = 'This pairing link has expired. Run `terminull pair` again and scan the new code.';
    return;
  }
  try {
    const { request, pending } = c.pairRequest(link, app.identity, deviceName());
    const res = await fetch(`${location.origin}/v1/bridges/${encodeURIComponent(link.bridgeId)}/pair`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(request),
      cache: 'no-store',
    });
    const text = await res.text();
    let body = null;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    if (res.status !== 200) {
      const why = body && typeof body.error === 'string' ? body.error : text.slice(0, 200);
      throw new Error(`the bridge refused (${res.status}): ${why}`);
    }
    const paired = c.finishPairing(pending, body);
    app.bridge = {
      bridgeId: paired.bridgeId,
      keys: paired.keys,
      relay: paired.relay,
      lan: paired.lan,
      shortCode: paired.shortCode,
      pairedAt: Math.floor(Date.now() / 1000),
    };
    await app.store.set('bridge', app.bridge);
    app.shortCode = paired.shortCode;
    showBanner();
    showView('home');
    connect();
  } catch (e) {
    ui.pairMsg.textContent = `Pairing failed: ${e.message ?? e}`;
  }
}

function showBanner() {
  const ui = app.ui;
  clear(ui.banner);
  if (!app.shortCode) {
    ui.banner.hidden = true;
    return;
  }
  ui.banner.hidden = false;
  ui.banner.append(
    h('div', null, 'Paired. Check that your computer shows the same code:'),
    h('div', { class: 'short-code', testid: 'short-code' }, app.shortCode),
    h('div', { class: 'small' }, `Bridge ${app.bridge?.bridgeId ?? ''}. If the codes differ, revoke this device on the computer.`),
    h(
      'button',
      {
        type: 'button',
        class: 'link-btn',
        onclick: () => {
          app.shortCode = null;
          showBanner();
        },
      },
      'Dismiss',
    ),
  );
}

// ---------------------------------------------------------------------------
// The link

async function detectServer() {
  try {
    const res = await fetch('/v1/server', { cache: 'no-store' });
    if (res.ok) {
      const v = await res.json();
      if (v && (v.kind === 'lan' || v.kind === 'relay')) return v.kind;
    }
  } catch {
    /* fall through */
  }
  // Without the endpoint: the LAN if the pairing named this origin as the LAN server.
  try {
    if (app.bridge?.lan && new URL(app.bridge.lan.replace(/^ws/, 'http')).host === location.host) return 'lan';
  } catch {
    /* not a URL */
  }
  return 'relay';
}

function scheduleReconnect(state = 'offline', label = 'reconnecting…') {
  if (app.reconnectTimer || !app.bridge) return;
  const delay = app.backoff * (0.8 + Math.random() * 0.4);
  app.backoff = Math.min(BACKOFF_MAX_MS, app.backoff * 2);
  setConn(state, label);
  app.reconnectTimer = setTimeout(() => {
    app.reconnectTimer = null;
    connect();
  }, delay);
}

async function connect() {
  if (!app.bridge || app.link || app.connecting) return;
  clearTimeout(app.reconnectTimer);
  app.reconnectTimer = null;
  app.connecting = true;
  setConn('connecting', 'connecting…');
  try {
    if (!app.serverKind) setPath(await detectServer());
    const url = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/v1/client`;
    let link = null;
    link = await openLink({
      url,
      identity: app.identity,
      bridge: { bridgeId: app.bridge.bridgeId, keys: app.bridge.keys },
      direct: app.serverKind === 'lan',
      pushLast: app.pushLast,
      onBlock: (sid, block, replay) => onBlock(sid, block, replay),
      onReplayDone: () => {},
      onStatus: (status) => onStatus(status),
      onPush: (notice, counter) => onPush(notice, counter),
      onReject: (reason) => noteRejected(reason),
      onRelayError: (frame) => {
        if (frame.code !== 'unauthorized') toast(`relay: ${frame.message ?? frame.code}`, 'warn');
      },
      onClose: (reason) => {
        if (app.link === link) {
          app.link = null;
          console.info(`link closed: ${reason}`);
          for (const s of app.sessions.values()) s.attachedOn = null;
          scheduleReconnect();
          updateComposer(currentSession());
        }
      },
    });
    app.link = link;
    app.backoff = BACKOFF_MIN_MS;
    app.connecting = false;
    onStatus(link.status);
    updateComposer(currentSession());
    // Re-attach every followed session, from the newest block held.
    for (const s of app.sessions.values()) if (s.followed) attach(s);
    refreshLists();
  } catch (e) {
    app.connecting = false;
    console.warn(`connect: ${e.message ?? e}`);
    if (/unknown_device/.test(String(e.message))) {
      setConn('offline', 'not paired');
      toast('The bridge does not know this device (revoked?). Pair again.', 'warn');
      return;
    }
    if (/bridge_offline/.test(String(e.message))) scheduleReconnect('bridge-offline', 'bridge offline');
    else scheduleReconnect();
  }
}

function onStatus(status) {
  const wasOnline = app.bridgeOnline;
  app.bridgeOnline = status.bridge_online || app.serverKind === 'lan';
  if (app.link && !wasOnline && app.bridgeOnline) {
    // The bridge reconnected to the relay: it holds no link for this connection any
    // more. Open a fresh one (and resume every followed session on it).
    app.link.close('the bridge came back online');
    return;
  }
  app.agents = status.agents;
  if (app.link) setConn(app.bridgeOnline ? 'connected' : 'bridge-offline', app.bridgeOnline ? 'connected' : 'bridge offline');
  if (app.view === 'new') fillAgents();
}

function onPush(notice, counter) {
  app.pushLast = counter;
  app.store.set(`push:${app.bridge.bridgeId}`, counter.toString()).catch(() => {});
  if (notice && typeof notice.title === 'string' && notice.session_id !== app.current) toast(notice.title);
}

/** Checks a link that may have died while the phone slept; reconnects if so. */
async function checkLink() {
  if (!app.bridge) return;
  if (!app.link) {
    app.backoff = BACKOFF_MIN_MS;
    connect();
    return;
  }
  const link = app.link;
  try {
    await link.request({ type: 'list_sessions' }, 5000);
  } catch (e) {
    if (e instanceof ControlError && (e.code === 'timeout' || e.code === 'link') && app.link === link) {
      link.close('no answer after waking');
    }
  }
}

// ---------------------------------------------------------------------------
// Lists

async function refreshLists() {
  const link = app.link;
  if (!link) return;
  try {
    const r = await link.request({ type: 'list_sessions' });
    app.listings = Array.isArray(r.sessions) ? r.sessions.filter((s) => s && typeof s.session_id === 'string') : [];
  } catch (e) {
    console.warn(`list_sessions: ${e.message}`);
  }
  try {
    const r = await link.request({ type: 'scan_external_sessions' });
    const items = Array.isArray(r.sessions) ? r.sessions : [];
    app.external = { state: 'ok', items };
  } catch (e) {
    app.external = { state: e.code === 'not_supported' ? 'unsupported' : 'error', items: [], message: e.message };
  }
  renderLists();
}

function renderLists() {
  const ui = app.ui;
  clear(ui.sessionList);
  if (!app.listings.length) {
    ui.sessionList.append(h('li', { class: 'empty', testid: 'sessions-empty' }, app.link ? 'No sessions yet. Start one.' : 'Connecting to the bridge…'));
  }
  for (const s of app.listings) {
    ui.sessionList.append(
      h(
        'li',
        null,
        h(
          'button',
          { type: 'button', class: 'session-item', testid: 'session-item', dataset: { sessionId: s.session_id }, onclick: () => openSession(s.session_id, s) },
          h('div', { class: 'row1' }, h('span', { class: 'agent' }, String(s.agent_id ?? '')), h('span', { class: `state state-${s.state}` }, s.state === 'parked' ? 'parked · terminal drives' : String(s.state ?? ''))),
          h('div', { class: 'row2' }, typeof s.title === 'string' ? s.title : String(s.cwd ?? '')),
          typeof s.title === 'string' ? h('div', { class: 'row3' }, String(s.cwd ?? '')) : null,
        ),
      ),
    );
  }
  clear(ui.externalList);
  if (!app.external.items.length) {
    const why =
      app.external.state === 'unsupported'
        ? 'Nothing here: this bridge or its agents cannot list sessions started in a terminal.'
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

// ---------------------------------------------------------------------------
// New session

function showNewSession() {
  showView('new');
  app.ui.newError.hidden = true;
  if (!app.ui.cwd.value) {
    try {
      app.ui.cwd.value = localStorage.getItem('terminull.cwd') ?? '';
    } catch {
      /* storage off */
    }
  }
  fillAgents();
}

function fillAgents() {
  const sel = app.ui.agentPicker;
  const before = sel.value;
  clear(sel);
  for (const a of app.agents) {
    sel.append(h('option', { value: a.agent_id }, `${a.display_name ?? a.agent_id}${a.version ? ` ${a.version}` : ''}`));
  }
  if (!app.agents.length) sel.append(h('option', { value: '', disabled: true }, app.link ? 'No agents installed' : 'Connecting…'));
  if (before && app.agents.some((a) => a.agent_id === before)) sel.value = before;
  agentChanged();
}

let modelsFor = null;
async function agentChanged() {
  const ui = app.ui;
  const agent = app.agents.find((a) => a.agent_id === ui.agentPicker.value);
  if (!agent || !agent.provides_models) {
    ui.modelRow.hidden = true;
    ui.modelPicker.disabled = true;
    clear(ui.modelPicker);
    modelsFor = null;
    return;
  }
  if (modelsFor === agent.agent_id) return;
  if (!app.link) {
    ui.modelRow.hidden = false;
    clear(ui.modelPicker).append(h('option', { value: '' }, 'Default model'));
    return;
  }
  modelsFor = agent.agent_id;
  ui.modelRow.hidden = false;
  ui.modelPicker.disabled = true;
  clear(ui.modelPicker).append(h('option', { value: '' }, 'Loading models…'));
  try {
    const r = await app.link.request({ type: 'list_models', agent: agent.agent_id });
    if (modelsFor !== agent.agent_id) return;
    clear(ui.modelPicker).append(h('option', { value: '' }, 'Default model'));
    for (const m of Array.isArray(r.models) ? r.models : []) {
      if (!m || typeof m.id !== 'string') continue;
      ui.modelPicker.append(h('option', { value: m.id, selected: m.is_default === true }, `${typeof m.name === 'string' ? m.name : m.id}${m.is_default ? ' (default)' : ''}`));
    }
    ui.modelPicker.disabled = false;
  } catch (e) {
    clear(ui.modelPicker).append(h('option', { value: '' }, `Default model (${e.message})`));
    modelsFor = null;
  }
}

async function startSession() {
  const ui = app.ui;
  const agent = ui.agentPicker.value;
  const cwd = ui.cwd.value.trim();
  ui.newError.hidden = true;
  if (!app.link) return formError('Not connected to the bridge yet.');
  if (!agent) return formError('Pick an agent.');
  if (!cwd) return formError('Enter the working directory on the computer.');
  const msg = { type: 'session_request', agent, cwd };
  if (!ui.modelRow.hidden && ui.modelPicker.value) msg.model = ui.modelPicker.value;
  ui.startBtn.disabled = true;
  try {
    const r = await app.link.request(msg);
    try {
      localStorage.setItem('terminull.cwd', cwd);
    } catch {
      /* storage off */
    }
    const s = sessionFor(r.session_id, { agentId: agent, cwd });
    s.followed = true;
    s.attachedOn = app.link;
    openSessionView(s);
  } catch (e) {
    formError(`Could not start: ${e.message}`);
  } finally {
    ui.startBtn.disabled = false;
  }
}

function formError(text) {
  app.ui.newError.textContent = text;
  app.ui.newError.hidden = false;
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

// ---------------------------------------------------------------------------
// Sessions

class SessionState {
  constructor(id, meta = {}) {
    this.id = id;
    this.agentId = meta.agentId ?? null;
    this.cwd = meta.cwd ?? null;
    this.transcript = new Transcript(meta.blocks ?? []);
    /** request_id → option_id chosen here */
    this.answered = new Map(Object.entries(meta.answered ?? {}));
    this.followed = false;
    this.attachedOn = null;
    /** Messages the composer queued while a turn runs. */
    this.queue = [];
    /** A user_message was sent and its block has not arrived yet. */
    this.awaiting = 0;
    this.persistTimer = null;
    this.elByKey = new Map();
    this.rendered = false;
    this.container = null;
    /** The answer to continue_in_terminal shown in this view, or an error. */
    this.terminal = null;
  }

  get agentInfo() {
    return this.transcript.agentInfo();
  }

  get running() {
    return this.awaiting > 0 || this.transcript.turnRunning();
  }

  /** A terminal drives the conversation (the newest session_state is `parked`). */
  get parked() {
    return this.transcript.sessionState()?.state === 'parked';
  }

  persist() {
    if (this.persistTimer || !app.bridge) return;
    this.persistTimer = setTimeout(() => this.flush(), PERSIST_DELAY_MS);
  }

  flush() {
    clearTimeout(this.persistTimer);
    this.persistTimer = null;
    if (!app.bridge) return Promise.resolve();
    // Superseded chunks of a streamed id are dropped: the newest holds the full text.
    return app.store
      .set(`s:${app.bridge.bridgeId}:${this.id}`, {
        id: this.id,
        agentId: this.agentId,
        cwd: this.cwd,
        blocks: this.transcript.entries(replaceKey),
        answered: Object.fromEntries(this.answered),
      })
      .catch((e) => console.warn(`cannot save the session: ${e}`));
  }
}

function sessionFor(id, meta) {
  let s = app.sessions.get(id);
  if (!s) {
    s = new SessionState(id, meta);
    app.sessions.set(id, s);
  } else if (meta) {
    s.agentId ??= meta.agentId ?? null;
    s.cwd ??= meta.cwd ?? null;
  }
  return s;
}

async function loadSession(id) {
  if (app.sessions.has(id)) return app.sessions.get(id);
  let saved = null;
  try {
    saved = await app.store.get(`s:${app.bridge.bridgeId}:${id}`);
  } catch {
    /* nothing saved */
  }
  const blocks = saved && Array.isArray(saved.blocks) ? saved.blocks.filter((b) => b && Number.isSafeInteger(b.seq)) : [];
  return sessionFor(id, { agentId: saved?.agentId, cwd: saved?.cwd, blocks, answered: saved?.answered });
}

async function openSession(id, listing) {
  const s = await loadSession(id);
  if (listing) {
    s.agentId ??= listing.agent_id ?? null;
    s.cwd ??= listing.cwd ?? null;
  }
  s.followed = true;
  openSessionView(s);
  if (app.link && s.attachedOn !== app.link) attach(s);
}

/** session_resume from the newest block held. */
async function attach(s) {
  const link = app.link;
  if (!link) return;
  s.attachedOn = link;
  try {
    await link.request({ type: 'session_resume', session_id: s.id, since_seq: s.transcript.lastSeq });
  } catch (e) {
    if (s.attachedOn === link) s.attachedOn = null;
    if (e.code !== 'link') toast(`Could not resume the session: ${e.message}`, 'warn');
  }
}

function openSessionView(s) {
  app.current = s.id;
  try {
    sessionStorage.setItem(CURRENT_KEY, s.id);
  } catch {
    /* storage off */
  }
  showView('session');
  const ui = app.ui;
  ui.title.textContent = titleOf(s);
  // One container per session, kept while the page lives.
  clear(ui.transcript);
  if (!s.container) {
    s.container = h('div', { class: 'blocks', dataset: { sessionId: s.id } });
    s.elByKey = new Map();
    for (const b of s.transcript.blocks()) renderInto(s, b);
  }
  ui.transcript.append(s.container);
  updateComposer(s);
  scrollToEnd(true);
}

function titleOf(s) {
  const info = s.agentInfo;
  const agent = info?.name ?? s.agentId ?? 'session';
  const dir = s.cwd ? s.cwd.split('/').filter(Boolean).pop() : '';
  return dir ? `${agent} · ${dir}` : agent;
}

function onBlock(sid, block, _replay) {
  const s = sessionFor(sid);
  if (!s.transcript.apply(block)) return; // a seq already held: nothing to do
  if (block.type === 'user_message' && s.awaiting > 0) s.awaiting -= 1;
  s.persist();
  if (s.container) {
    const atEnd = isAtEnd();
    renderInto(s, block);
    if (block.type === 'session_end') refreshPermissionCards(s);
    if (app.current === sid && atEnd) scrollToEnd(true);
  }
  if (app.current === sid) {
    if (block.type === 'agent_info') app.ui.title.textContent = titleOf(s);
    updateComposer(s);
  }
  if (block.type === 'session_end' || block.type === 'session_state') flushQueue(s);
}

function renderCtx(s) {
  return {
    answered: (rid) => s.answered.get(rid),
    resolved: (b) => {
      const end = s.transcript.lastEnd();
      return end != null && end.seq > b.seq;
    },
    onPermission: (b, optionId) => answerPermission(s, b, optionId),
  };
}

/** Puts one block's element in place: replacing the element of its id, or at its seq. */
function renderInto(s, block) {
  let el;
  try {
    el = renderBlock(block, renderCtx(s));
  } catch (e) {
    noteRejected(`cannot render a ${block.type} block: ${e.message}`);
    return;
  }
  const key = displayKey(block);
  if (block.type === 'tool_result' && typeof block.tool_call_id === 'string') {
    const card = s.elByKey.get(`tool_call\u0000${block.tool_call_id}`);
    const slot = card?.querySelector('.tool-result-slot');
    if (slot) {
      clear(slot).append(el);
      return;
    }
  }
  if (key != null && s.elByKey.has(key)) {
    const old = s.elByKey.get(key);
    if (Number(old.dataset.seq) > block.seq) return; // an older chunk than the one shown
    el.dataset.pos = old.dataset.pos;
    if (block.type === 'tool_call') {
      const oldSlot = old.querySelector('.tool-result-slot');
      const newSlot = el.querySelector('.tool-result-slot');
      if (oldSlot && newSlot) while (oldSlot.firstChild) newSlot.appendChild(oldSlot.firstChild);
      const wasOpen = old.querySelector('details')?.open;
      if (wasOpen) el.querySelector('details').open = true;
    }
    if (block.type === 'thinking' && old.querySelector('details') && !block.done) {
      el.querySelector('details').open = old.querySelector('details').open;
    }
    old.replaceWith(el);
    s.elByKey.set(key, el);
    return;
  }
  el.dataset.pos = String(block.seq);
  insertByPos(s.container, el, block.seq);
  if (key != null) s.elByKey.set(key, el);
}

function insertByPos(container, el, pos) {
  let ref = null;
  for (let child = container.lastElementChild; child; child = child.previousElementSibling) {
    if (Number(child.dataset.pos) > pos) ref = child;
    else break;
  }
  container.insertBefore(el, ref);
}

function refreshPermissionCards(s) {
  for (const b of s.transcript.blocks()) if (b.type === 'permission_request') rerender(s, b);
}

function rerender(s, block) {
  const old = s.container?.querySelector(`[data-testid="block"][data-seq="${block.seq}"]`);
  if (!old) return;
  const el = renderBlock(block, renderCtx(s));
  el.dataset.pos = old.dataset.pos;
  old.replaceWith(el);
}

function addNote(s, text, kind = 'note') {
  if (!s.container) return;
  const el = h('div', { class: `note ${kind}`, testid: 'note' }, h('pre', null, text));
  el.dataset.pos = String(s.transcript.lastSeq + 0.5);
  insertByPos(s.container, el, s.transcript.lastSeq + 0.5);
  if (app.current === s.id) scrollToEnd(true);
}

async function answerPermission(s, block, optionId) {
  if (!app.link) return toast('Not connected: the answer cannot be sent yet.', 'warn');
  s.answered.set(block.request_id, optionId);
  rerender(s, block);
  try {
    await app.link.request({ type: 'permission_response', session_id: s.id, request_id: block.request_id, option_id: optionId });
    s.persist();
  } catch (e) {
    s.answered.delete(block.request_id);
    rerender(s, block);
    toast(`The answer was not taken: ${e.message}`, 'warn');
  }
}

// ---------------------------------------------------------------------------
// Composer

function currentSession() {
  return app.current ? app.sessions.get(app.current) : null;
}

function commandsOf(s) {
  const list = s?.agentInfo?.slash_commands;
  const valid = Array.isArray(list) ? list.filter((c2) => c2 && typeof c2.name === 'string') : [];
  return valid.length ? valid : BUILTIN_COMMANDS;
}

function composerChanged() {
  const ui = app.ui;
  const v = ui.composer.value;
  ui.composer.style.height = 'auto';
  ui.composer.style.height = `${Math.min(160, ui.composer.scrollHeight)}px`;
  const m = /^\/(\S*)$/.exec(v);
  clear(ui.palette);
  if (!m) {
    ui.palette.hidden = true;
    return;
  }
  const items = commandsOf(currentSession()).filter((cmd) => cmd.name.startsWith(m[1]));
  ui.palette.hidden = items.length === 0;
  for (const cmd of items) {
    ui.palette.append(
      h(
        'li',
        null,
        h(
          'button',
          {
            type: 'button',
            class: 'palette-item',
            testid: 'slash-command',
            dataset: { command: cmd.name },
            onclick: () => {
              ui.composer.value = `/${cmd.name} `;
              ui.palette.hidden = true;
              ui.composer.focus();
            },
          },
          h('span', { class: 'cmd' }, `/${cmd.name}`),
          h('span', { class: 'desc' }, String(cmd.description ?? '')),
        ),
      ),
    );
  }
}

function sendComposer() {
  const s = currentSession();
  const ui = app.ui;
  const text = ui.composer.value.trim();
  if (!s || !text) return;
  ui.composer.value = '';
  composerChanged();
  scrollToEnd(true);
  const slash = /^\/(\S+)(?:\s+([\s\S]*))?$/.exec(text);
  if (slash && commandsOf(s).some((cmd) => cmd.name === slash[1])) {
    runSlash(s, slash[1], (slash[2] ?? '').trim());
    return;
  }
  if (s.parked) {
    // The bridge queues it until the terminal is idle.
    sendMessage(s, text);
    return;
  }
  const inputDuringTurn = s.agentInfo?.cap_input_during_turn === true;
  if (s.running && !inputDuringTurn) {
    s.queue.push(text);
    updateComposer(s);
    return;
  }
  sendMessage(s, text);
}

async function sendMessage(s, text) {
  if (!app.link) {
    s.queue.unshift(text);
    updateComposer(s);
    toast('Not connected: the message is queued.', 'warn');
    return;
  }
  s.awaiting += 1;
  updateComposer(s);
  try {
    await app.link.request({ type: 'user_message', session_id: s.id, text });
  } catch (e) {
    s.awaiting = Math.max(0, s.awaiting - 1);
    updateComposer(s);
    toast(e.code === 'link' ? 'The connection dropped: the message may not have been sent.' : `Not sent: ${e.message}`, 'warn');
  }
}

function flushQueue(s) {
  if (s.parked && app.link) {
    // The bridge keeps them while a terminal drives the conversation.
    while (s.queue.length) sendMessage(s, s.queue.shift());
    return;
  }
  if (!s.queue.length || (s.running && s.agentInfo?.cap_input_during_turn !== true)) return;
  const next = s.queue.shift();
  sendMessage(s, next);
}

async function runSlash(s, command, args) {
  if (!app.link) return toast('Not connected.', 'warn');
  const msg = { type: 'slash_command', session_id: s.id, command };
  if (args) msg.args = args;
  try {
    const r = await app.link.request(msg);
    if (r && r.kind === 'command_output' && typeof r.text === 'string') addNote(s, r.text);
  } catch (e) {
    addNote(s, `/${command}: ${e.message}`, 'note error');
  }
}

async function interrupt() {
  const s = currentSession();
  if (!s || !app.link) return;
  app.ui.stop.disabled = true;
  try {
    await app.link.request({ type: 'interrupt', session_id: s.id });
  } catch (e) {
    toast(`Could not interrupt: ${e.message}`, 'warn');
  } finally {
    app.ui.stop.disabled = false;
  }
}

function updateComposer(s) {
  if (!s || app.current !== s.id) return;
  const ui = app.ui;
  const info = s.agentInfo;
  const running = s.running;
  ui.stop.hidden = !(running && info?.cap_interrupt === true);
  ui.viewSession.dataset.turn = running ? 'running' : 'idle';
  ui.queueInfo.hidden = s.queue.length === 0;
  ui.queueInfo.textContent = s.queue.length ? `${s.queue.length} message${s.queue.length > 1 ? 's' : ''} queued until the turn ends` : '';
  const parked = s.parked;
  ui.send.textContent = parked || (running && info?.cap_input_during_turn !== true) ? 'Queue' : 'Send';
  ui.composer.placeholder = parked ? 'Queued until the terminal is idle…' : 'Message…';
  ui.viewSession.dataset.parked = parked ? 'true' : 'false';
  ui.parkedBanner.hidden = !parked;
  if (parked) {
    const st = s.transcript.sessionState();
    const queued = Number.isSafeInteger(st.queued) && st.queued > 0 ? st.queued : 0;
    ui.parkedBanner.textContent = `⌨ A terminal is driving this conversation · terminull observes · ${queued} queued`;
    ui.parkedBanner.dataset.queued = String(queued);
  }
  ui.continueBtn.disabled = parked || running || !app.link;
  ui.continueBtn.title = parked ? 'A terminal already drives this conversation' : running ? 'Wait for the turn to end' : 'Hand this conversation to a terminal on your computer';
  renderTerminalCard(s);
}

// ---------------------------------------------------------------------------
// Continue in Terminal

async function continueInTerminal() {
  const s = currentSession();
  if (!s || !app.link || s.parked || s.running) return;
  app.ui.continueBtn.disabled = true;
  try {
    const r = await app.link.request({ type: 'continue_in_terminal', session_id: s.id });
    if (!r || r.kind !== 'terminal_command' || typeof r.command !== 'string') throw new Error('the bridge answered something other than a terminal command');
    s.terminal = { command: r.command, cwd: typeof r.cwd === 'string' ? r.cwd : null };
  } catch (e) {
    const why = e.code === 'not_supported' ? 'this agent cannot hand its sessions to a terminal' : e.code === 'busy' ? 'a turn is running; try again when it ends' : '';
    s.terminal = { error: `Cannot continue in a terminal: ${e.message}${why ? ` (${why})` : ''}`, code: e.code ?? 'error' };
  }
  updateComposer(s);
}

function renderTerminalCard(s) {
  const card = app.ui.terminalCard;
  const t = s.terminal;
  if (app.ui.terminalShown === t && card.dataset.sessionId === s.id) return; // unchanged: keep its selection
  app.ui.terminalShown = t;
  card.dataset.sessionId = s.id;
  clear(card);
  card.hidden = !t;
  if (!t) return;
  const close = h('button', { type: 'button', class: 'link-btn', onclick: () => ((s.terminal = null), renderTerminalCard(s)) }, t.error ? 'Dismiss' : 'Close');
  if (t.error) {
    card.append(h('p', { class: 'form-error', testid: 'continue-error', dataset: { code: t.code } }, t.error), close);
    return;
  }
  card.append(
    h('div', { class: 'terminal-command', testid: 'terminal-command' },
      h('div', null, 'Run this in a terminal on your computer to continue the conversation there:'),
      copyableCommand(t.command, 'terminal-command-text'),
      h('div', { class: 'small' }, 'terminull observes until the terminal is done; messages you send meanwhile wait for it.'),
    ),
    close,
  );
}

function isAtEnd() {
  const el = document.scrollingElement ?? document.documentElement;
  return el.scrollHeight - el.scrollTop - el.clientHeight < 80;
}

function scrollToEnd(force = false) {
  if (!force && !isAtEnd()) return;
  requestAnimationFrame(() => {
    const el = document.scrollingElement ?? document.documentElement;
    el.scrollTop = el.scrollHeight;
  });
}

// ---------------------------------------------------------------------------
// Start

async function main() {
  buildShell();
  app.store = await Store.open();
  try {
    const secrets = await app.store.get('identity');
    app.identity = secrets ? c.identityFromSecrets(secrets) : null;
  } catch (e) {
    console.warn(`the stored identity is unreadable: ${e.message}`);
  }
  if (!app.identity) {
    app.identity = c.generateIdentity();
    await app.store.set('identity', c.identitySecrets(app.identity));
  }
  app.bridge = (await app.store.get('bridge')) ?? null;
  if (app.bridge) {
    try {
      c.publicKeysFromWire(app.bridge.keys);
      app.pushLast = BigInt((await app.store.get(`push:${app.bridge.bridgeId}`)) ?? 0);
    } catch {
      app.bridge = null;
    }
  }
  window.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') checkLink();
    else for (const s of app.sessions.values()) s.flush();
  });
  window.addEventListener('pagehide', () => {
    for (const s of app.sessions.values()) s.flush();
  });
  window.addEventListener('online', () => checkLink());
  // Exposed for tests and debugging: read-only views of the state.
  window.terminull = {
    get deviceId() {
      return app.identity ? c.deviceIdOf(app.identity.ed25519Public) : null;
    },
    get bridgeId() {
      return app.bridge?.bridgeId ?? null;
    },
    get current() {
      return app.current;
    },
    get rejected() {
      return app.rejected;
    },
    seqs: (sid) => app.sessions.get(sid ?? app.current)?.transcript.seqs() ?? [],
    /** Drops the WebSocket as a network failure would (tests the reconnect and resume). */
    dropConnection: () => app.link?.ws.close(),
    flush: () => Promise.all([...app.sessions.values()].map((s) => s.flush())),
  };

  const fragment = pairingFragment();
  if (fragment) {
    await pairWith(location.href);
    return;
  }
  if (!app.bridge) {
    showView('pair');
    app.ui.pairMsg.textContent = 'Scan the QR code that `terminull pair` shows on your computer, or paste its link.';
    return;
  }
  let current = null;
  try {
    current = sessionStorage.getItem(CURRENT_KEY);
  } catch {
    /* storage off */
  }
  if (current) {
    const s = await loadSession(current);
    s.followed = true;
    openSessionView(s);
  } else {
    showView('home');
  }
  connect();
}

main().catch((e) => {
  console.error(e);
  document.body.append(h('p', { class: 'fatal' }, `The app failed to start: ${e.message ?? e}`));
});
