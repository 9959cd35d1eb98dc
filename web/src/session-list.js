// The session list (docs/web-client.md, "The session list"): every paired computer's
// sessions in one list, most recently active first, each row its title, the newest
// message in a few words, how long ago, and a badge when it waits for an answer;
// search (titles and previews here, messages by `search_sessions` on each computer),
// filters by computer and agent, archived sessions behind their own filter, and per
// row rename, archive and delete (a second tap confirms). Sessions started by
// `terminull chat` (`origin: terminal`) are listed under "From your terminal".

import { app } from './state.js';
import { h, clear } from './dom.js';
import { toast } from './status.js';
import { displayName } from './bridges.js';
import { waitingInListing } from './attention.js';

/** Delay before a typed query is sent to the computers, ms. */
const SEARCH_DELAY_MS = 250;
/** The longest query the bridge takes (`MAX_QUERY_CHARS`). */
const MAX_QUERY = 200;

const filters = { query: '', computer: 'active', agent: 'all', archived: false };
/** bridge id → Map(session id → snippet) answered by `search_sessions` for `searched`. */
let found = new Map();
let searched = '';
let searchTimer = null;
/** `${bridgeId}/${sessionId}` of the row whose actions are open. */
let openActions = null;
let rerender = () => {};
let opener = () => {};
let switchComputer = () => {};

/** "just now", "5 min", "3 h", "2 d", or a date, from Unix seconds. */
export function ago(unix, now = Date.now() / 1000) {
  if (!Number.isFinite(unix)) return '';
  const s = Math.max(0, now - unix);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  if (s < 7 * 86400) return `${Math.floor(s / 86400)} d`;
  return new Date(unix * 1000).toLocaleDateString();
}

/** The last path component of a directory, for a row's subtitle. */
function base(cwd) {
  const parts = String(cwd ?? '').split('/').filter(Boolean);
  return parts.length ? parts[parts.length - 1] : String(cwd ?? '');
}

/** What a row is called: its title, else its agent and directory. */
export function rowTitle(s) {
  return typeof s.title === 'string' && s.title.trim() ? s.title : `${s.agent_id ?? 'session'} in ${base(s.cwd)}`;
}

/** Every paired computer's listings as `{ctx, s}`, newest activity first. */
export function allRows() {
  const rows = [];
  for (const ctx of app.bridges.values()) {
    for (const s of ctx.listings ?? []) if (s && typeof s.session_id === 'string') rows.push({ ctx, s });
  }
  const at = (r) => (Number.isFinite(r.s.last_activity) ? r.s.last_activity : 0);
  rows.sort((a, b) => at(b) - at(a));
  return rows;
}

/** Whether a row passes the filters (the query matched here or by its computer). */
export function passes(row, f = filters, matches = found) {
  const { ctx, s } = row;
  const computer = f.computer === 'active' ? app.activeId : f.computer;
  if (computer !== 'all' && ctx.id !== computer) return false;
  if (f.agent !== 'all' && s.agent_id !== f.agent) return false;
  const q = f.query.trim().toLowerCase();
  if (!q) return f.archived === (s.archived === true);
  // A search looks through archived sessions too.
  const text = [s.title, s.preview, s.cwd, s.agent_id].filter((x) => typeof x === 'string').join('\n').toLowerCase();
  return text.includes(q) || matches.get(ctx.id)?.has(s.session_id) === true;
}

/** The toolbar above the list: search, the filters, and the archived switch. */
export function buildListTools(onRender, onOpen, onSwitch) {
  rerender = onRender;
  opener = onOpen;
  switchComputer = onSwitch;
  const ui = app.ui;
  ui.listSearch = h('input', {
    type: 'search',
    testid: 'session-search',
    placeholder: 'Search sessions',
    'aria-label': 'Search sessions',
    maxlength: String(MAX_QUERY),
    autocapitalize: 'off',
    autocomplete: 'off',
    spellcheck: 'false',
    oninput: () => {
      filters.query = ui.listSearch.value;
      rerender();
      scheduleSearch();
    },
  });
  ui.computerFilter = h('select', {
    testid: 'computer-filter',
    'aria-label': 'Computer',
    onchange: () => {
      const v = ui.computerFilter.value;
      filters.computer = v;
      // One computer is the one shown: the page switches to it.
      if (v !== 'all' && v !== app.activeId) switchComputer(v);
      else rerender();
    },
  });
  ui.agentFilter = h('select', { testid: 'agent-filter', 'aria-label': 'Agent', onchange: () => ((filters.agent = ui.agentFilter.value), rerender()) });
  ui.archivedToggle = h(
    'button',
    {
      type: 'button',
      class: 'chip',
      testid: 'archived-filter',
      'aria-pressed': 'false',
      onclick: () => {
        filters.archived = !filters.archived;
        ui.archivedToggle.setAttribute('aria-pressed', String(filters.archived));
        rerender();
      },
    },
    'Archived',
  );
  return h('div', { class: 'list-tools' }, ui.listSearch, h('div', { class: 'filters' }, ui.computerFilter, ui.agentFilter, ui.archivedToggle));
}

function fillSelect(sel, all, options, value) {
  const want = options.some(([v]) => v === value) ? value : 'all';
  clear(sel).append(h('option', { value: 'all' }, all), ...options.map(([v, label]) => h('option', { value: v }, label)));
  sel.value = want;
  return want;
}

/** Refreshes the filters' choices from what is listed. */
function fillFilters(rows) {
  const ui = app.ui;
  const computers = [...app.bridges.values()].map((ctx) => [ctx.id, displayName(ctx.bridge)]);
  // Unless "All computers" is chosen, the list is the computer shown's.
  if (filters.computer !== 'all') filters.computer = app.activeId ?? 'all';
  filters.computer = fillSelect(ui.computerFilter, 'All computers', computers, filters.computer);
  ui.computerFilter.hidden = computers.length < 2;
  const agents = [...new Set(rows.map((r) => String(r.s.agent_id ?? '')))].filter(Boolean).sort();
  filters.agent = fillSelect(ui.agentFilter, 'All agents', agents.map((a) => [a, a]), filters.agent);
  ui.agentFilter.hidden = agents.length < 2;
}

function scheduleSearch() {
  clearTimeout(searchTimer);
  const q = filters.query.trim().slice(0, MAX_QUERY);
  if (!q) {
    found = new Map();
    searched = '';
    return;
  }
  searchTimer = setTimeout(() => searchComputers(q), SEARCH_DELAY_MS);
}

/** Asks every linked computer for the sessions whose messages match `q`. */
async function searchComputers(q) {
  searched = q;
  const next = new Map();
  await Promise.all(
    [...app.bridges.values()].map(async (ctx) => {
      if (!ctx.link) return;
      try {
        const r = await ctx.link.request({ type: 'search_sessions', query: q });
        const m = new Map();
        for (const x of Array.isArray(r.matches) ? r.matches : []) {
          if (x && typeof x.session_id === 'string') m.set(x.session_id, typeof x.snippet === 'string' ? x.snippet : '');
        }
        next.set(ctx.id, m);
      } catch (e) {
        // An older bridge has no search: its titles and previews are still searched here.
        if (e.code !== 'link') console.warn(`search_sessions: ${e.message}`);
      }
    }),
  );
  if (searched !== q) return;
  found = next;
  rerender();
}

/** Renders the bridge sessions into `list` and the terminal ones into `terminal`; returns how many of each. */
export function renderSessionRows(list, terminal) {
  const rows = allRows();
  fillFilters(rows);
  const shown = rows.filter((r) => passes(r));
  const several = app.bridges.size > 1 && filters.computer === 'all';
  let counts = { app: 0, terminal: 0 };
  for (const row of shown) {
    const fromTerminal = row.s.origin === 'terminal';
    (fromTerminal ? terminal : list).append(renderRow(row, several));
    counts[fromTerminal ? 'terminal' : 'app'] += 1;
  }
  return { ...counts, total: rows.length, filtered: filters.query.trim() !== '' || filters.archived || filters.agent !== 'all' };
}

function attentionBadge(row) {
  const { ctx, s } = row;
  const waiting = waitingInListing(ctx, s);
  if (s.attention === 'question') return h('span', { class: 'count warn', testid: 'session-waiting' }, 'Question');
  if (s.attention === 'permission' || waiting) return h('span', { class: 'count warn', testid: 'session-waiting' }, waiting > 1 ? `${waiting} waiting` : 'Needs you');
  if (ctx.sessions.get(s.session_id)?.unseen) return h('span', { class: 'count', testid: 'session-unseen' }, 'finished');
  return null;
}

function stateLabel(s) {
  if (s.state === 'parked') return 'parked · terminal drives';
  if (s.state === 'running') return 'running';
  if (s.state === 'stopped') return 'stopped';
  return null;
}

function renderRow(row, several) {
  const { ctx, s } = row;
  const key = `${ctx.id}/${s.session_id}`;
  const snippet = found.get(ctx.id)?.get(s.session_id);
  const preview = filters.query.trim() && snippet ? snippet : typeof s.preview === 'string' ? s.preview : '';
  const state = stateLabel(s);
  const meta = [String(s.agent_id ?? ''), base(s.cwd), several ? displayName(ctx.bridge) : null].filter(Boolean).join(' · ');
  const li = h(
    'li',
    { class: 'session-row', dataset: { sessionId: s.session_id } },
    h(
      'button',
      { type: 'button', class: 'session-item', testid: 'session-item', dataset: { sessionId: s.session_id, bridgeId: ctx.id }, onclick: () => opener(ctx, s) },
      h('div', { class: 'row1' }, h('span', { class: 'title', testid: 'session-title' }, rowTitle(s)), h('span', { class: 'when', testid: 'session-when' }, ago(s.last_activity))),
      preview ? h('div', { class: 'row2', testid: 'session-preview' }, preview) : null,
      h(
        'div',
        { class: 'row3' },
        h('span', { class: 'where' }, meta),
        h('span', { class: 'bridge-counts' }, attentionBadge(row), s.archived ? h('span', { class: 'count', testid: 'session-archived' }, 'archived') : null, state ? h('span', { class: `state state-${s.state}` }, state) : null),
      ),
    ),
    h('button', { type: 'button', class: 'row-more', testid: 'session-actions', 'aria-label': `Actions for ${rowTitle(s)}`, 'aria-expanded': String(openActions === key), onclick: () => toggleActions(key) }, '⋯'),
  );
  if (openActions === key) li.append(renderActions(ctx, s));
  return li;
}

function toggleActions(key) {
  openActions = openActions === key ? null : key;
  rerender();
}

function renderActions(ctx, s) {
  const input = h('input', { type: 'text', testid: 'rename-input', value: typeof s.title === 'string' ? s.title : '', maxlength: '200', 'aria-label': 'Title' });
  const del = h('button', { type: 'button', class: 'danger', testid: 'delete-session', onclick: () => remove(ctx, s, del) }, 'Delete');
  return h(
    'div',
    { class: 'row-actions', testid: 'row-actions' },
    h(
      'form',
      {
        class: 'rename-form',
        onsubmit: (e) => {
          e.preventDefault();
          rename(ctx, s, input.value);
        },
      },
      input,
      h('button', { type: 'submit', testid: 'rename-save' }, 'Rename'),
    ),
    h(
      'div',
      { class: 'action-row' },
      h('button', { type: 'button', testid: 'archive-session', onclick: () => archive(ctx, s, !s.archived) }, s.archived ? 'Unarchive' : 'Archive'),
      del,
    ),
  );
}

async function ask(ctx, msg, what) {
  if (!ctx.link) {
    toast(`Not connected to ${displayName(ctx.bridge)}.`, 'warn');
    return false;
  }
  try {
    await ctx.link.request(msg);
    return true;
  } catch (e) {
    toast(`Could not ${what}: ${e.message}`, 'warn');
    return false;
  }
}

/** Applies `fields` to the listing of `id` held now (a refresh may have replaced the one rendered). */
function patch(ctx, id, fields) {
  for (const x of ctx.listings ?? []) if (x.session_id === id) Object.assign(x, fields);
}

async function rename(ctx, s, title) {
  const t = title.replace(/\s+/g, ' ').trim();
  if (!t) return toast('Give the session a title.', 'warn');
  if (await ask(ctx, { type: 'rename_session', session_id: s.session_id, title: t }, 'rename')) {
    patch(ctx, s.session_id, { title: t });
    openActions = null;
    rerender();
  }
}

async function archive(ctx, s, archived) {
  if (await ask(ctx, { type: 'archive_session', session_id: s.session_id, archived }, archived ? 'archive' : 'unarchive')) {
    patch(ctx, s.session_id, { archived });
    openActions = null;
    rerender();
    toast(archived ? 'Archived. Find it under “Archived”.' : 'Back in the list.');
  }
}

/** Deletes a session once the button is tapped a second time. */
async function remove(ctx, s, button) {
  if (button.dataset.confirm !== 'true') {
    button.dataset.confirm = 'true';
    button.textContent = 'Tap again to delete for good';
    return;
  }
  if (await ask(ctx, { type: 'delete_session', session_id: s.session_id }, 'delete')) {
    ctx.listings = (ctx.listings ?? []).filter((x) => x.session_id !== s.session_id);
    ctx.sessions.delete(s.session_id);
    app.store?.delete?.(`s:${ctx.id}:${s.session_id}`)?.catch?.(() => {});
    openActions = null;
    rerender();
    toast('Session deleted.');
  }
}

/** The filters, for tests. */
export function _filters() {
  return filters;
}
