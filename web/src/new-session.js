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

export function fillAgents() {
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
export async function agentChanged() {
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
