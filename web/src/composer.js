// The session view's composer: sending a message with its attachments (or queueing
// it while a turn runs or a terminal drives), the slash palette and slash commands,
// stop (asking about the queue), ending the session, and the state of the controls
// around it.

import { app, currentSession } from './state.js';
import { h, clear } from './dom.js';
import { toast } from './status.js';
import { addNote, scrollToEnd } from './blocks.js';
import { updateHandoff } from './handoff.js';
import { draftOf, renderTray, updateAttachControls, stillReading } from './attach-view.js';
import { renderQueue, choose, queued, MAX_QUEUED } from './queue.js';

/** The bridge's universal slash commands (protocol/src/commands.rs), used when the agent lists none. */
const BUILTIN_COMMANDS = [
  { name: 'help', description: 'List the commands this session understands', source: 'bridge' },
  { name: 'status', description: "Show the session's agent, model, cost and token usage", source: 'bridge' },
  { name: 'model', description: 'List the models this agent offers', source: 'bridge' },
  { name: 'usage', description: "Show the session's token and cost totals", source: 'bridge' },
  { name: 'stop', description: 'Interrupt the running turn', source: 'bridge' },
  { name: 'new', description: 'End this session and start a fresh one with the same agent and directory', source: 'bridge' },
];

function commandsOf(s) {
  const list = s?.agentInfo?.slash_commands;
  const valid = Array.isArray(list) ? list.filter((cmd) => cmd && typeof cmd.name === 'string') : [];
  return valid.length ? valid : BUILTIN_COMMANDS;
}

export function composerChanged() {
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

export function sendComposer() {
  const s = currentSession();
  const ui = app.ui;
  const text = ui.composer.value.trim();
  const attachments = s ? draftOf(s) : [];
  if (!s || (!text && !attachments.length)) return;
  if (stillReading()) {
    toast('The attachments are still being prepared: send again in a moment.', 'warn');
    return;
  }
  const slash = /^\/(\S+)(?:\s+([\s\S]*))?$/.exec(text);
  if (slash && !attachments.length && commandsOf(s).some((cmd) => cmd.name === slash[1])) {
    clearComposer(s);
    runSlash(s, slash[1], (slash[2] ?? '').trim());
    return;
  }
  const item = queued(text, attachments.slice());
  if (s.parked) {
    // The bridge queues it until the terminal is idle.
    clearComposer(s);
    sendMessage(s, item);
    return;
  }
  const inputDuringTurn = s.agentInfo?.cap_input_during_turn === true;
  if (s.running && !inputDuringTurn) {
    if (s.queue.length >= MAX_QUEUED) {
      toast(`${MAX_QUEUED} messages are queued already; send more once they are delivered.`, 'warn');
      return;
    }
    clearComposer(s);
    s.queue.push(item);
    updateComposer(s);
    return;
  }
  clearComposer(s);
  sendMessage(s, item);
}

function clearComposer(s) {
  app.ui.composer.value = '';
  app.ui.attachMenu.hidden = true;
  s.draft = [];
  renderTray(s);
  composerChanged();
  scrollToEnd(true);
}

async function sendMessage(s, item) {
  if (!s.ctx?.link) {
    s.queue.unshift(item);
    updateComposer(s);
    toast('Not connected: the message is queued.', 'warn');
    return;
  }
  s.awaiting += 1;
  updateComposer(s);
  const msg = { type: 'user_message', session_id: s.id, text: item.text };
  if (item.attachments?.length) msg.attachments = item.attachments.map(({ name, mime_type, data }) => ({ name, mime_type, data }));
  try {
    await s.ctx.link.request(msg);
  } catch (e) {
    s.awaiting = Math.max(0, s.awaiting - 1);
    updateComposer(s);
    toast(e.code === 'link' ? 'The connection dropped: the message may not have been sent.' : `Not sent: ${e.message}`, 'warn');
  }
}

export function flushQueue(s) {
  if (s.parked && s.ctx?.link) {
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
  const line = args ? `/${command} ${args}` : `/${command}`;
  try {
    const r = await app.link.request(msg);
    if (r && r.kind === 'command_output' && typeof r.text === 'string') addNote(s, r.text, 'note', line);
  } catch (e) {
    addNote(s, e.message, 'note error', line);
  }
}

/** Stop: interrupts the turn; with messages queued, first asks whether to drop them. */
export async function interrupt() {
  const s = currentSession();
  if (!s || !app.link) return;
  if (s.queue.length) {
    const n = s.queue.length;
    const choice = await choose('Stop this turn?', `${n} message${n > 1 ? 's are' : ' is'} queued to be sent when the turn ends.`, [
      { label: `Stop and drop the queue`, value: 'drop', testid: 'stop-drop', kind: 'danger' },
      { label: `Stop, then send the queue`, value: 'keep', testid: 'stop-keep', kind: 'primary' },
    ]);
    if (!choice) return;
    if (choice === 'drop') {
      s.queue.length = 0;
      updateComposer(s);
    }
  }
  app.ui.stop.disabled = true;
  try {
    await app.link.request({ type: 'interrupt', session_id: s.id });
  } catch (e) {
    toast(`Could not interrupt: ${e.message}`, 'warn');
  } finally {
    app.ui.stop.disabled = false;
  }
}

/** End session: `stop_session` after asking; the queue is dropped with it. */
export async function endSession() {
  const s = currentSession();
  if (!s || !s.ctx?.link) return toast('Not connected.', 'warn');
  const choice = await choose(
    'End this session?',
    'The agent is stopped. The conversation stays in the list; a new message there starts the agent again.',
    [{ label: 'End session', value: 'end', testid: 'end-confirm', kind: 'danger' }],
  );
  if (!choice) return;
  s.queue.length = 0;
  updateComposer(s);
  try {
    await s.ctx.link.request({ type: 'stop_session', session_id: s.id });
    addNote(s, 'Session ended.', 'note', null);
  } catch (e) {
    toast(`Could not end the session: ${e.message}`, 'warn');
  }
}

/** Other controls of the session view that follow its state (session-options.js registers one). */
const watchers = [];
export function onComposerUpdate(fn) {
  watchers.push(fn);
}

/** Sets the session view's controls (stop, queue, Send/Queue, the handoff controls) from `s`, if shown. */
export function updateComposer(s) {
  if (!s || app.current !== s.id) return;
  const ui = app.ui;
  const info = s.agentInfo;
  const running = s.running;
  ui.stop.hidden = !(running && info?.cap_interrupt === true);
  ui.viewSession.dataset.turn = running ? 'running' : 'idle';
  renderQueue(s, () => updateComposer(s));
  updateAttachControls(s);
  for (const fn of watchers) fn(s);
  const parked = s.parked;
  ui.send.textContent = parked || (running && info?.cap_input_during_turn !== true) ? 'Queue' : 'Send';
  ui.composer.placeholder = parked ? 'Queued until the terminal is idle…' : 'Message…';
  updateHandoff(s);
}
