// A session's blocks in the session view: each block's element put in place (by its
// display id, or at its seq), permission cards answered and re-rendered, notes from
// slash commands, and keeping the view scrolled to the end while it was there.

import { app } from './state.js';
import { h, clear } from './dom.js';
import { renderBlock } from './render.js';
import { displayKey } from './transcript.js';
import { noteRejected, toast } from './status.js';
import { renderSwitcher } from './switcher.js';

/** Notes kept per session (the oldest go first). */
const MAX_NOTES = 50;

/** What render.js asks of a session: the answers given here, whether a request is past its session_end, whether the same agent started before, how to answer. */
function renderCtx(s) {
  return {
    startedBefore: (b) =>
      s.transcript
        .blocks()
        .some((x) => x.type === 'agent_info' && x.seq < b.seq && x.agent_id === b.agent_id && x.version === b.version && x.model === b.model),
    answered: (rid) => s.answered.get(rid),
    resolved: (b) => {
      const end = s.transcript.lastEnd();
      return end != null && end.seq > b.seq;
    },
    onPermission: (b, optionId) => answerPermission(s, b, optionId),
    toolKind: (id) => s.elByKey.get(`tool_call\u0000${id}`)?.dataset.toolKind,
  };
}

/** Puts one block's element in place: replacing the element of its id, or at `pos` (its seq). */
export function renderInto(s, block, pos = block.seq) {
  let el;
  try {
    el = renderBlock(block, renderCtx(s));
  } catch (e) {
    noteRejected(`cannot render a ${block.type} block: ${e.message}`);
    return;
  }
  const key = displayKey(block);
  // A result, and a diff its call made, go inside the call's card.
  if ((block.type === 'tool_result' || block.type === 'diff') && typeof block.tool_call_id === 'string') {
    const card = s.elByKey.get(`tool_call\u0000${block.tool_call_id}`);
    const slot = card && ownSlot(card, block.type === 'diff' ? 'tool-diff-slot' : 'tool-result-slot');
    if (slot) {
      if (block.type === 'diff') {
        if (slot.querySelector(`[data-seq="${block.seq}"]`)) return;
        slot.append(el);
        card.classList.add('has-diff');
      } else clear(slot).append(el);
      return;
    }
  }
  if (key != null && s.elByKey.has(key)) {
    const old = s.elByKey.get(key);
    if (Number(old.dataset.seq) > block.seq) return; // an older chunk than the one shown
    el.dataset.pos = old.dataset.pos;
    if (block.type === 'tool_call') {
      for (const name of ['tool-result-slot', 'tool-diff-slot', 'tool-children']) {
        const oldSlot = ownSlot(old, name);
        const newSlot = ownSlot(el, name);
        if (oldSlot && newSlot) while (oldSlot.firstChild) newSlot.appendChild(oldSlot.firstChild);
      }
      if (old.classList.contains('has-diff')) el.classList.add('has-diff');
      el.querySelector('details').open = old.querySelector('details')?.open ?? false;
    }
    if (block.type === 'thinking' && old.querySelector('details') && !block.done) {
      el.querySelector('details').open = old.querySelector('details').open;
    }
    old.replaceWith(el);
    s.elByKey.set(key, el);
    return;
  }
  el.dataset.pos = String(pos);
  // A sub-agent's own calls go inside its card.
  const parent = block.type === 'tool_call' && typeof block.parent_id === 'string' ? s.elByKey.get(`tool_call\u0000${block.parent_id}`) : null;
  const children = parent && ownSlot(parent, 'tool-children');
  insertByPos(children ?? s.container, el, pos);
  if (key != null) s.elByKey.set(key, el);
}

/** A card's own slot (not one of a card nested in it). */
function ownSlot(card, name) {
  const details = card.querySelector(':scope > details');
  return details?.querySelector(`:scope > .${name}`) ?? null;
}

function insertByPos(container, el, pos) {
  let ref = null;
  for (let child = container.lastElementChild; child; child = child.previousElementSibling) {
    if (Number(child.dataset.pos) > pos) ref = child;
    else break;
  }
  container.insertBefore(el, ref);
}

export function refreshPermissionCards(s) {
  for (const b of s.transcript.blocks()) if (b.type === 'permission_request') rerender(s, b);
}

function rerender(s, block) {
  const old = s.container?.querySelector(`[data-testid="block"][data-seq="${block.seq}"]`);
  if (!old) return;
  const el = renderBlock(block, renderCtx(s));
  el.dataset.pos = old.dataset.pos;
  old.replaceWith(el);
}

/**
 * A note in the session view (a slash command's output, an error, "Session ended"), kept
 * with the session so a reload shows it again at the same place; `command` is the line
 * typed (`/status`), shown above the output.
 */
export function addNote(s, text, kind = 'note', command = null) {
  const note = { pos: s.transcript.lastSeq + 0.5, text: String(text), kind, command };
  s.notes ??= [];
  s.notes.push(note);
  if (s.notes.length > MAX_NOTES) s.notes.splice(0, s.notes.length - MAX_NOTES);
  s.persist();
  renderNote(s, note);
  if (app.current === s.id) scrollToEnd(true);
}

/** Puts a kept note in place in the session's container. */
export function renderNote(s, note) {
  if (!s.container) return;
  const el = h(
    'div',
    { class: `note ${note.kind}`, testid: 'note' },
    note.command ? h('div', { class: 'note-cmd', testid: 'note-command' }, note.command) : null,
    h('pre', null, note.text),
  );
  el.dataset.pos = String(note.pos);
  insertByPos(s.container, el, note.pos);
}

async function answerPermission(s, block, optionId) {
  const link = s.ctx?.link;
  if (!link) return toast('Not connected: the answer cannot be sent yet.', 'warn');
  s.answered.set(block.request_id, optionId);
  rerender(s, block);
  try {
    await link.request({ type: 'permission_response', session_id: s.id, request_id: block.request_id, option_id: optionId });
    s.persist();
    renderSwitcher();
  } catch (e) {
    s.answered.delete(block.request_id);
    rerender(s, block);
    toast(`The answer was not taken: ${e.message}`, 'warn');
  }
}

// Whether the reader is at the end, read once per frame: a replay appends hundreds of
// blocks in one task, and reading the layout after each append forced a layout of the
// whole transcript every time (opening a 2,000-block session took seconds). Read
// before this frame's appends, it is also the right question: "was the reader
// following the end?". A scroll forgets it.
let atEnd = null;
let endScroll = false;
globalThis.addEventListener?.('scroll', () => (atEnd = null), { passive: true, capture: true });

export function isAtEnd() {
  if (atEnd === null) {
    const el = document.scrollingElement ?? document.documentElement;
    atEnd = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
    requestAnimationFrame(() => (atEnd = null));
  }
  return atEnd;
}

export function scrollToEnd(force = false) {
  if (!force && !isAtEnd()) return;
  if (endScroll) return; // one scroll per frame, after every append of the frame
  endScroll = true;
  requestAnimationFrame(() => {
    endScroll = false;
    const el = document.scrollingElement ?? document.documentElement;
    el.scrollTop = el.scrollHeight;
    atEnd = true;
  });
}
