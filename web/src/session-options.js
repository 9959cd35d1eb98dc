// Changing a session's permission mode and model mid-session (`set_session_options`),
// where its agent allows: the button above the conversation opens a sheet with the
// agent's modes and models; the bridge restarts the agent between turns, resuming the
// same conversation, and a new "Session started" line names the model.

import { app, currentSession } from './state.js';
import { h } from './dom.js';
import { toast } from './status.js';
import { addNote } from './blocks.js';
import { PERMISSION_MODES, modelLabel } from './new-session.js';
import { onComposerUpdate } from './composer.js';

/** The agent summary (list_agents) of `s`'s agent, if listed. */
function summaryOf(s) {
  const id = s?.agentInfo?.agent_id ?? s?.agentId;
  return (s?.ctx?.agents ?? app.agents ?? []).find((a) => a.agent_id === id) ?? null;
}

/** What can change for `s`: `{modes, models}` (null when that cannot). */
export function changeable(s) {
  const a = summaryOf(s);
  if (!a) return { modes: null, models: false };
  return { modes: a.takes_permission_mode ? (PERMISSION_MODES[a.agent_id] ?? null) : null, models: a.provides_models === true };
}

/** Shows the button when the agent allows a change. */
function updateOptionsButton(s) {
  const c = changeable(s);
  app.ui.optionsBtn.hidden = !(c.modes || c.models);
}

export function buildOptionsButton() {
  onComposerUpdate(updateOptionsButton);
  app.ui.optionsBtn = h('button', { type: 'button', class: 'link-btn tap', testid: 'session-options', hidden: true, onclick: () => openOptions() }, 'Mode & model');
  return app.ui.optionsBtn;
}

async function openOptions() {
  const s = currentSession();
  const link = s?.ctx?.link;
  if (!s || !link) return toast('Not connected.', 'warn');
  if (s.running) return toast('A turn is running: change the mode or model once it ends.', 'warn');
  const c = changeable(s);
  const mode = h('select', { testid: 'options-mode' }, h('option', { value: '' }, 'Keep as it is'));
  for (const m of c.modes ?? []) mode.append(h('option', { value: m }, m === 'default' ? 'default (the agent’s)' : m));
  const model = h('select', { testid: 'options-model', disabled: true }, h('option', { value: '' }, c.models ? 'Loading models…' : 'Keep as it is'));
  const sheet = h(
    'div',
    { class: 'choice-backdrop', testid: 'options-sheet', onclick: (e) => e.target === sheet && sheet.remove() },
    h(
      'div',
      { class: 'choice-sheet', role: 'dialog', 'aria-modal': 'true', 'aria-label': 'Mode and model' },
      h('h2', null, 'Mode and model'),
      h('p', { class: 'muted' }, `Now: ${s.agentInfo?.model ? `model ${s.agentInfo.model}` : 'the agent’s default model'}. The agent restarts between turns and continues this conversation.`),
      c.modes ? h('label', { class: 'field' }, h('span', null, 'Permission mode'), mode) : null,
      c.models ? h('label', { class: 'field' }, h('span', null, 'Model'), model) : null,
      h('button', { type: 'button', class: 'wide primary', testid: 'options-apply', onclick: () => apply() }, 'Apply'),
      h('button', { type: 'button', class: 'wide', testid: 'choice-cancel', onclick: () => sheet.remove() }, 'Cancel'),
    ),
  );
  document.body.append(sheet);
  if (c.models) {
    try {
      const r = await link.request({ type: 'list_models', agent: summaryOf(s).agent_id });
      model.firstChild.textContent = 'Keep as it is';
      for (const m of Array.isArray(r.models) ? r.models : []) {
        if (m && typeof m.id === 'string') model.append(h('option', { value: m.id }, modelLabel(m)));
      }
      model.disabled = false;
    } catch (e) {
      model.firstChild.textContent = `Keep as it is (${e.message})`;
    }
  }

  async function apply() {
    const msg = { type: 'set_session_options', session_id: s.id };
    if (mode.value) msg.permission_mode = mode.value === 'default' ? '' : mode.value;
    if (model.value) msg.model = model.value;
    sheet.remove();
    if (!msg.permission_mode && msg.permission_mode !== '' && !msg.model) return;
    try {
      await link.request(msg);
      const said = [msg.permission_mode != null ? `permission mode ${msg.permission_mode || 'default'}` : null, msg.model ? `model ${msg.model}` : null].filter(Boolean);
      addNote(s, `From the next turn: ${said.join(', ')}.`);
    } catch (e) {
      toast(`Not changed: ${e.message}`, 'warn');
    }
  }
}
