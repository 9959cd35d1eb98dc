// The sessions this page holds: each one's transcript, the permission answers given
// here, the composer's queue, and its copy in IndexedDB (so a reload resumes by seq).

import { app, activeCtx } from './state.js';
import { Transcript } from './transcript.js';
import { toast } from './status.js';

const PERSIST_DELAY_MS = 150;

export class SessionState {
  constructor(id, meta = {}, ctx = null) {
    this.id = id;
    /** The bridge (BridgeCtx) this session runs on. */
    this.ctx = ctx;
    this.agentId = meta.agentId ?? null;
    this.cwd = meta.cwd ?? null;
    this.transcript = new Transcript(meta.blocks ?? []);
    /** request_id → option_id chosen here */
    this.answered = new Map(Object.entries(meta.answered ?? {}));
    /** Slash command outputs and other notes shown here: `{pos, text, kind, command}` (blocks.js). */
    this.notes = Array.isArray(meta.notes) ? meta.notes.filter((n) => n && typeof n.text === 'string' && Number.isFinite(n.pos)) : [];
    /** Attachments picked for the next message (attach-view.js). */
    this.draft = [];
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
    /** The link, and the since_seqs of the resumes asked on it to repair a gap (each asked once per link). */
    this.resynced = { link: null, asked: new Set() };
    /** A turn finished while the session was not shown (the switcher counts it). */
    this.unseen = false;
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
    if (this.persistTimer || !this.ctx || this.ctx.forgotten) return;
    this.persistTimer = setTimeout(() => this.flush(), PERSIST_DELAY_MS);
  }

  flush() {
    clearTimeout(this.persistTimer);
    this.persistTimer = null;
    if (!this.ctx || this.ctx.forgotten) return Promise.resolve();
    // Superseded chunks of a streamed id are dropped: a message is saved as the text it rebuilds.
    return app.store
      .set(`s:${this.ctx.id}:${this.id}`, {
        id: this.id,
        agentId: this.agentId,
        cwd: this.cwd,
        blocks: this.transcript.saved(),
        answered: Object.fromEntries(this.answered),
        notes: this.notes,
      })
      .catch((e) => console.warn(`cannot save the session: ${e}`));
  }
}

/** The session of `id` on bridge `ctx` (the active one by default), made if new; `meta` fills what is not known yet. */
export function sessionFor(id, meta, ctx = activeCtx()) {
  const sessions = ctx ? ctx.sessions : new Map();
  let s = sessions.get(id);
  if (!s) {
    s = new SessionState(id, meta, ctx);
    sessions.set(id, s);
  } else if (meta) {
    s.agentId ??= meta.agentId ?? null;
    s.cwd ??= meta.cwd ?? null;
  }
  return s;
}

/** The session of `id` on bridge `ctx`, from memory or from what IndexedDB saved. */
export async function loadSession(id, ctx = activeCtx()) {
  if (ctx?.sessions.has(id)) return ctx.sessions.get(id);
  let saved = null;
  try {
    saved = ctx ? await app.store.get(`s:${ctx.id}:${id}`) : null;
  } catch {
    /* nothing saved */
  }
  const blocks = saved && Array.isArray(saved.blocks) ? saved.blocks.filter((b) => b && Number.isSafeInteger(b.seq)) : [];
  return sessionFor(id, { agentId: saved?.agentId, cwd: saved?.cwd, blocks, answered: saved?.answered, notes: saved?.notes }, ctx);
}

/**
 * session_resume from the newest block held, or from before a message that does not
 * rebuild (a piece of it went missing), so the bridge sends that message again.
 */
export async function attach(s) {
  const link = s.ctx?.link;
  if (!link) return;
  s.attachedOn = link;
  const since = s.transcript.resumeSeq;
  s.resynced = { link, asked: new Set() };
  try {
    await link.request({ type: 'session_resume', session_id: s.id, since_seq: since });
  } catch (e) {
    if (s.attachedOn === link) s.attachedOn = null;
    if (e.code !== 'link') toast(`Could not resume the session: ${e.message}`, 'warn');
  }
}

/**
 * A block left a message with a gap: resume the session from `since` (the seq held
 * before that message's first chunk). Blocks the replay repeats are skipped by seq;
 * the message's snapshot takes its place. Asked once per link and seq, so a bridge
 * that cannot repair it is not asked again and again.
 */
export function resync(s, since) {
  const link = s.ctx?.link;
  if (!link || s.attachedOn !== link) return;
  if (s.resynced.link !== link) s.resynced = { link, asked: new Set() };
  if (s.resynced.asked.has(since)) return;
  s.resynced.asked.add(since);
  link.request({ type: 'session_resume', session_id: s.id, since_seq: since }).catch((e) => {
    if (e.code !== 'link') toast(`Could not fetch the rest of a message: ${e.message}`, 'warn');
  });
}
