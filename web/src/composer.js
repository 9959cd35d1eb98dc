// The session view's composer: sending a message (or queueing it while a turn runs
// or a terminal drives), the slash palette and slash commands, stop, and the state
// of the controls around it.

import { app, currentSession } from './state.js';
import { h, clear } from './dom.js';
import { toast } from './status.js';
import { addNote, scrollToEnd } from './blocks.js';
import { updateHandoff } from './handoff.js';

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
  if (!s.ctx?.link) {
    s.queue.unshift(text);
    updateComposer(s);
    toast('Not connected: the message is queued.', 'warn');
    return;
  }
  s.awaiting += 1;
  updateComposer(s);
  try {
    await s.ctx.link.request({ type: 'user_message', session_id: s.id, text });
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
  try {
    const r = await app.link.request(msg);
    if (r && r.kind === 'command_output' && typeof r.text === 'string') addNote(s, r.text);
  } catch (e) {
    addNote(s, `/${command}: ${e.message}`, 'note error');
  }
}

export async function interrupt() {
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

/** Sets the session view's controls (stop, queue, Send/Queue, the handoff controls) from `s`, if shown. */
export function updateComposer(s) {
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
  updateHandoff(s);
}
