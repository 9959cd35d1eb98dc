// The session view: opening a session (from the list, after starting or attaching
// one, or on reload), its title, and each block arriving on the link for any
// session held.

import { app, activeCtx, CURRENT_KEY } from './state.js';
import { h, clear } from './dom.js';
import { showView } from './views.js';
import { sessionFor, loadSession, attach, resync } from './sessions.js';
import { renderInto, renderNote, refreshPermissionCards, isAtEnd, scrollToEnd } from './blocks.js';
import { updateComposer, flushQueue } from './composer.js';
import { setRoute } from './route.js';
import { renderSwitcher } from './switcher.js';
import { showTab } from './session-tabs.js';

/** Opens a session of the list: loads what was saved and resumes it on the link. */
export async function openSession(id, listing) {
  const s = await loadSession(id);
  if (listing) {
    s.agentId ??= listing.agent_id ?? null;
    s.cwd ??= listing.cwd ?? null;
  }
  s.followed = true;
  openSessionView(s);
  if (app.link && s.attachedOn !== app.link) attach(s);
}

export function openSessionView(s) {
  app.current = s.id;
  try {
    sessionStorage.setItem(CURRENT_KEY, s.id);
  } catch {
    /* storage off */
  }
  setRoute(s.ctx?.id ?? app.activeId, s.id);
  if (s.unseen) {
    s.unseen = false;
    renderSwitcher();
  }
  showView('session');
  const ui = app.ui;
  ui.title.textContent = titleOf(s);
  // One container per session, kept while the page lives.
  clear(ui.transcript);
  if (!s.container) {
    s.container = h('div', { class: 'blocks', dataset: { sessionId: s.id } });
    s.elByKey = new Map();
    // A streamed message once, at its first chunk, with the text its chunks rebuild.
    for (const b of s.transcript.blocks()) {
      if (s.transcript.isFirstOfStream(b)) renderInto(s, s.transcript.shown(b), b.seq);
    }
    for (const note of s.notes) renderNote(s, note);
  }
  ui.transcript.append(s.container);
  showTab('chat');
  updateComposer(s);
  scrollToEnd(true);
}

function titleOf(s) {
  // The list's title (the user's, the agent's or the first prompt's) when the bridge listed one.
  const listed = s.ctx?.listings?.find((l) => l.session_id === s.id)?.title;
  if (typeof listed === 'string' && listed.trim()) return listed;
  const info = s.agentInfo;
  const agent = info?.name ?? s.agentId ?? 'session';
  const dir = s.cwd ? s.cwd.split('/').filter(Boolean).pop() : '';
  return dir ? `${agent} · ${dir}` : agent;
}

// The composer reads the whole transcript (is a turn running? who drives?): once per
// frame, not once per block of a replay (a 2,000-block session made that quadratic).
let composerFrame = null;
function composerSoon(s) {
  if (composerFrame !== null) return;
  composerFrame = requestAnimationFrame(() => {
    composerFrame = null;
    if (app.current === s.id && app.view === 'session') updateComposer(s);
  });
}

/** One block from bridge `ctx`'s link (live or replayed) for session `sid`: held, saved, rendered if shown. */
export function onBlock(sid, block, replay, ctx = activeCtx()) {
  const s = sessionFor(sid, undefined, ctx);
  const shown = ctx === activeCtx() && app.current === sid && app.view === 'session';
  const applied = s.transcript.applyBlock(block);
  if (applied.status === 'duplicate') return; // a seq already held: nothing to do
  // A piece of a streamed message is missing: keep what is shown, fetch the message again.
  if (applied.status === 'gap') resync(s, applied.since_seq);
  if (block.type === 'user_message' && s.awaiting > 0) s.awaiting -= 1;
  s.persist();
  if (s.container) {
    const atEnd = isAtEnd();
    renderInto(s, s.transcript.shown(block));
    if (block.type === 'session_end') refreshPermissionCards(s);
    if (shown && atEnd) scrollToEnd(true);
  }
  if (block.type === 'session_end' && !replay && !shown) s.unseen = true;
  if (block.type === 'permission_request' || block.type === 'session_end') renderSwitcher();
  if (shown) {
    if (block.type === 'agent_info') app.ui.title.textContent = titleOf(s);
    composerSoon(s);
  }
  if (block.type === 'session_end' || block.type === 'session_state') flushQueue(s);
}
