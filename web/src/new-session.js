// The new-session view: the agent picker (from the bridge's status), the working
// directory (remembered), the agent's models when it offers them, and starting it.

import { app } from './state.js';
import { h, clear } from './dom.js';
import { showView } from './views.js';
import { sessionFor } from './sessions.js';
import { openSessionView } from './session-view.js';

export function showNewSession() {
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

/** Permission modes an agent takes at start (`--mode` of `terminull chat`), by agent id. */
export const PERMISSION_MODES = {
  'claude-code': ['default', 'acceptEdits', 'plan', 'bypassPermissions', 'dontAsk', 'auto'],
  gemini: ['default', 'autoEdit', 'yolo', 'plan'],
  hermes: ['default', 'accept_edits', 'dont_ask'],
};

/** Installed agents first (in the bridge's order), then the missing ones. */
export function pickerOrder(agents) {
  const ok = agents.filter((a) => a.installed !== false);
  return [...ok, ...agents.filter((a) => a.installed === false)];
}

/** The permission-mode row and the list of missing agents, made once next to the model row. */
function extras() {
  const ui = app.ui;
  if (!ui.modeRow) {
    ui.modePicker = h('select', { testid: 'mode-picker' });
    ui.modeRow = h('label', { class: 'field', hidden: true }, h('span', null, 'Permission mode'), ui.modePicker);
    ui.agentMissing = h('ul', { class: 'agent-missing', testid: 'missing-agents', hidden: true });
    ui.agentPicker.closest('label')?.after(ui.agentMissing);
    ui.modelRow.after(ui.modeRow);
  }
  return ui;
}

export function fillAgents() {
  const ui = extras();
  const sel = ui.agentPicker;
  const before = sel.value;
  clear(sel);
  const agents = pickerOrder(app.agents);
  for (const a of agents) {
    const name = `${a.display_name ?? a.agent_id}`;
    const missing = a.installed === false;
    const label = missing ? `${name} — not installed` : `${name}${a.version ? ` ${a.version}` : ''}`;
    sel.append(h('option', { value: a.agent_id, disabled: missing, dataset: { installed: String(!missing) } }, label));
  }
  const usable = agents.filter((a) => a.installed !== false);
  if (!usable.length) sel.prepend(h('option', { value: '', disabled: true, selected: true }, app.link ? (agents.length ? 'No agent installed' : 'No agents installed') : 'Connecting…'));
  // Never a missing agent pre-selected: the one chosen before if still usable, else the first installed.
  sel.value = usable.some((a) => a.agent_id === before) ? before : (usable[0]?.agent_id ?? '');
  ui.startBtn.disabled = !usable.length;
  clear(ui.agentMissing);
  const missing = agents.filter((a) => a.installed === false);
  ui.agentMissing.hidden = !missing.length;
  if (missing.length) {
    ui.agentMissing.append(h('li', { class: 'missing-head' }, `Not installed on this computer (${missing.length}):`));
    for (const a of missing) {
      const hint = typeof a.install_hint === 'string' ? a.install_hint : 'install it, then check with `terminull agents`';
      ui.agentMissing.append(h('li', { testid: 'missing-agent', dataset: { agentId: a.agent_id } }, h('b', null, a.display_name ?? a.agent_id), ` — ${hint}`));
    }
  }
  agentChanged();
}

function fillModes(agent) {
  const ui = extras();
  const modes = agent?.takes_permission_mode ? PERMISSION_MODES[agent.agent_id] : null;
  ui.modeRow.hidden = !modes;
  clear(ui.modePicker).append(h('option', { value: '' }, 'Agent’s default'));
  for (const m of modes ?? []) if (m !== 'default') ui.modePicker.append(h('option', { value: m }, m));
}

/** A model's label: its name, with "(default)" only when the name does not say so already. */
export function modelLabel(m) {
  const name = typeof m.name === 'string' ? m.name : m.id;
  return m.is_default && !/default/i.test(name) ? `${name} (default)` : name;
}

let modelsFor = null;
export async function agentChanged() {
  const ui = app.ui;
  const agent = app.agents.find((a) => a.agent_id === ui.agentPicker.value);
  fillModes(agent);
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
      ui.modelPicker.append(h('option', { value: m.id, selected: m.is_default === true }, modelLabel(m)));
    }
    ui.modelPicker.disabled = false;
  } catch (e) {
    clear(ui.modelPicker).append(h('option', { value: '' }, `Default model (${e.message})`));
    modelsFor = null;
  }
}

export async function startSession() {
  const ui = app.ui;
  const agent = ui.agentPicker.value;
  const cwd = ui.cwd.value.trim();
  ui.newError.hidden = true;
  if (!app.link) return formError('Not connected to the bridge yet.');
  if (!agent) return formError('Pick an agent.');
  if (!cwd) return formError('Enter the working directory on the computer.');
  const msg = { type: 'session_request', agent, cwd };
  if (!ui.modelRow.hidden && ui.modelPicker.value) msg.model = ui.modelPicker.value;
  if (ui.modeRow && !ui.modeRow.hidden && ui.modePicker.value) msg.permission_mode = ui.modePicker.value;
  const chosen = app.agents.find((a) => a.agent_id === agent);
  if (chosen?.installed === false) return formError(`${chosen.display_name ?? agent} is not installed on this computer: ${chosen.install_hint ?? 'install it first'}.`);
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
    // The bridge made no session: nothing to clean up here.
    const said = String(e.message ?? e);
    formError(/could not start|is not installed/.test(said) ? said : `Could not start: ${said}`);
  } finally {
    ui.startBtn.disabled = false;
  }
}

function formError(text) {
  app.ui.newError.textContent = text;
  app.ui.newError.hidden = false;
}
