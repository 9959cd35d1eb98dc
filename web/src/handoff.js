// The session view's handoff controls (docs/session-handoff.md): the parked banner
// while a terminal drives the conversation, and Continue in Terminal with the card
// showing the bridge's command (or why it refused).

import { app, currentSession } from './state.js';
import { h, clear } from './dom.js';
import { copyableCommand } from './render.js';

/** Shows the parked banner, the Continue in Terminal button's state and the terminal card for `s`, if shown. */
export function updateHandoff(s) {
  if (!s || app.current !== s.id) return;
  const ui = app.ui;
  const running = s.running;
  const parked = s.parked;
  ui.viewSession.dataset.parked = parked ? 'true' : 'false';
  ui.parkedBanner.hidden = !parked;
  if (parked) {
    const st = s.transcript.sessionState();
    const queued = Number.isSafeInteger(st.queued) && st.queued > 0 ? st.queued : 0;
    ui.parkedBanner.textContent = `⌨ A terminal is driving this conversation · terminull observes · ${queued} queued`;
    ui.parkedBanner.dataset.queued = String(queued);
  }
  // Offered only for an agent that can hand its conversation to a terminal
  // (`list_agents` says `continues_in_terminal`); echo, for one, cannot.
  const agent = app.agents.find((a) => a.agent_id === s.agentId);
  ui.continueBtn.hidden = agent?.continues_in_terminal !== true;
  ui.continueBtn.disabled = parked || running || !app.link;
  ui.continueBtn.title = parked ? 'A terminal already drives this conversation' : running ? 'Wait for the turn to end' : 'Hand this conversation to a terminal on your computer';
  renderTerminalCard(s);
}

/** Asks the bridge for the command that continues the current session in a terminal; the card shows it. */
export async function continueInTerminal() {
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
  updateHandoff(s);
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
