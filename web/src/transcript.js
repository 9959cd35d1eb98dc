// A session as the app shows it (client/src/transcript.rs): blocks held by `seq`; a
// block whose `seq` is already held is dropped; a later block with the same
// replaceable id stands for the earlier ones in their place. History that arrives
// after `replay_done` is older and merges by `seq`.
//
// Replaceable ids are the protocol's (`text`, `thinking`, `progress`, `bg_task`);
// the page also shows a `tool_call` and its status updates (same `id`) as one card,
// so `displayKey` adds `tool_call`.
//
// A `text`/`thinking` message streams as snapshots and appends (streamed.js): its
// chunks are folded in `seq` order, so each message shows the text they rebuild. A
// chunk that does not fit is a gap: the message keeps the prefix it holds and
// `gaps()` names the `seq` to resume the session from; a replay's snapshot at a seq
// held (the bridge compacts a replayed message into one) takes the append's place.

import { Assembly, isAppend } from './streamed.js';

/** The protocol's replace key of a block (client/src/transcript.rs, blocks.rs). */
export function replaceKey(block) {
  switch (block?.type) {
    case 'text':
    case 'thinking':
    case 'progress':
    case 'bg_task':
      return typeof block.id === 'string' ? `${block.type}\u0000${block.id}` : null;
    default:
      return null;
  }
}

/** The key under which the page shows one card for successive blocks. */
export function displayKey(block) {
  if (block?.type === 'tool_call' && typeof block.id === 'string') return `tool_call\u0000${block.id}`;
  return replaceKey(block);
}

export class Transcript {
  constructor(blocks = []) {
    /** seq → block */
    this.bySeq = new Map();
    /** stream key → {seqs (ascending), asm, foldedTo, gap} of each text/thinking message */
    this.streams = new Map();
    for (const b of blocks) this.apply(b);
  }

  /** Applies one block; returns true when it was new (or rebuilt a message), false for a seq already held. */
  apply(block) {
    return this.applyBlock(block).status !== 'duplicate';
  }

  /**
   * Applies one block; returns `{status}`: 'added', 'duplicate' (a seq held, or no
   * seq), 'rebuilt' (a replay's snapshot took the place of the append held at its
   * seq) or 'gap' (held, but its message does not rebuild: resume from `since_seq`).
   */
  applyBlock(block) {
    if (!block || !Number.isSafeInteger(block.seq)) return { status: 'duplicate' };
    const key = streamKey(block);
    const held = this.bySeq.get(block.seq);
    if (held) {
      // Only a snapshot replacing an append of the same message is taken at a seq held.
      if (key == null || isAppend(block) || !isAppend(held) || streamKey(held) !== key) return { status: 'duplicate' };
      this.bySeq.set(block.seq, block);
      this.#refold(this.streams.get(key));
      return this.#result(key, 'rebuilt');
    }
    this.bySeq.set(block.seq, block);
    if (key == null) return { status: 'added' };
    let stream = this.streams.get(key);
    if (!stream) {
      stream = { seqs: [], asm: new Assembly(), foldedTo: -1, gap: false };
      this.streams.set(key, stream);
    }
    if (block.seq > stream.foldedTo) {
      stream.seqs.push(block.seq);
      foldChunk(stream, block);
      stream.foldedTo = block.seq;
    } else {
      stream.seqs.push(block.seq);
      stream.seqs.sort((a, b) => a - b);
      this.#refold(stream);
    }
    return this.#result(key, 'added');
  }

  /** The block to show for `block`: a text/thinking chunk as the whole message it rebuilds (newest seq, no offset). */
  shown(block) {
    const key = streamKey(block);
    const stream = key == null ? null : this.streams.get(key);
    if (!stream) return block;
    const newest = this.bySeq.get(stream.seqs[stream.seqs.length - 1]) ?? block;
    const { offset: _offset, ...rest } = newest;
    return { ...rest, text: stream.asm.text, done: stream.asm.done };
  }

  /** True when `block` is the first chunk held of its message (where the message is placed), or not streamed. */
  isFirstOfStream(block) {
    const key = streamKey(block);
    const stream = key == null ? null : this.streams.get(key);
    return !stream || stream.seqs[0] === block.seq;
  }

  /** The messages that do not rebuild: `[{key, since_seq}]`, ascending by since_seq. */
  gaps() {
    const out = [];
    for (const [key, stream] of this.streams) if (stream.gap) out.push({ key, since_seq: this.#sinceSeq(stream) });
    return out.sort((a, b) => a.since_seq - b.since_seq);
  }

  /** Where to resume the session from: before the first message that does not rebuild, else the newest seq. */
  get resumeSeq() {
    const gaps = this.gaps();
    return gaps.length ? gaps[0].since_seq : this.lastSeq;
  }

  #refold(stream) {
    stream.asm = new Assembly();
    stream.gap = false;
    for (const seq of stream.seqs) foldChunk(stream, this.bySeq.get(seq));
    stream.foldedTo = stream.seqs[stream.seqs.length - 1];
  }

  #result(key, status) {
    const stream = this.streams.get(key);
    return stream.gap ? { status: 'gap', since_seq: this.#sinceSeq(stream) } : { status };
  }

  /** The seq held before the message's first chunk (0 when none). */
  #sinceSeq(stream) {
    const first = stream.seqs[0];
    let best = 0;
    for (const seq of this.bySeq.keys()) if (seq < first && seq > best) best = seq;
    return best;
  }

  has(seq) {
    return this.bySeq.has(seq);
  }

  /** The highest seq held (0 when empty): what to resume from. */
  get lastSeq() {
    let max = 0;
    for (const s of this.bySeq.keys()) if (s > max) max = s;
    return max;
  }

  /** Every seq held, ascending (replaced chunks included). */
  seqs() {
    return [...this.bySeq.keys()].sort((a, b) => a - b);
  }

  /** The blocks held, by ascending seq. */
  blocks() {
    return this.seqs().map((s) => this.bySeq.get(s));
  }

  /**
   * The entries as shown: in seq order, each key once, at the place of its first
   * block, with the content of its last (a streamed message: the text it rebuilds).
   * `keyOf` defaults to the protocol's rule.
   */
  entries(keyOf = replaceKey) {
    const out = [];
    const index = new Map();
    for (const block of this.blocks()) {
      const key = keyOf(block);
      if (key != null) {
        if (index.has(key)) {
          out[index.get(key)] = block;
          continue;
        }
        index.set(key, out.length);
      }
      out.push(block);
    }
    return out.map((b) => this.shown(b));
  }

  /**
   * What a page saves to resume from: the entries, except that a message that does
   * not rebuild keeps its chunks as held, so its gap is still known after a reload.
   */
  saved() {
    const gapped = new Set(this.gaps().map((g) => g.key));
    if (gapped.size === 0) return this.entries(replaceKey);
    const raw = this.blocks().filter((b) => gapped.has(streamKey(b)));
    const kept = this.entries(replaceKey).filter((b) => !gapped.has(streamKey(b)));
    return [...kept, ...raw].sort((a, b) => a.seq - b.seq);
  }

  /** The session's agent_info, if held. */
  agentInfo() {
    // The first by seq, without sorting every block held.
    let first = null;
    for (const [seq, b] of this.bySeq) if (b.type === 'agent_info' && (!first || seq < first.seq)) first = b;
    return first;
  }

  /**
   * Whether a turn runs: the newest user_message comes after the newest session_end.
   * Mirrored blocks (a terminal's turns, `_meta.mirrored`) do not count. While the
   * newest session_state is `parked` no turn of terminull's runs (messages queue at
   * the bridge); after a `live` one with messages queued, the bridge starts a turn with
   * the first of them.
   */
  turnRunning() {
    let lastUser = 0;
    let lastEnd = 0;
    const state = this.sessionState();
    for (const [seq, b] of this.bySeq) {
      if (b.type === 'user_message' && seq > lastUser && b._meta?.mirrored !== true) lastUser = seq;
      if (b.type === 'session_end' && seq > lastEnd) lastEnd = seq;
    }
    if (state?.state === 'parked') return false;
    if (state && state.seq > lastEnd && state.seq > lastUser) return Number(state.queued) > 0;
    return lastUser > lastEnd;
  }

  /** The newest session_state block (who drives the conversation), if any. */
  sessionState() {
    let best = null;
    for (const [seq, b] of this.bySeq) if (b.type === 'session_state' && (!best || seq > best.seq)) best = b;
    return best;
  }

  /** The newest session_end, if any. */
  lastEnd() {
    let best = null;
    for (const [seq, b] of this.bySeq) if (b.type === 'session_end' && (!best || seq > best.seq)) best = b;
    return best;
  }
}

/** The key of a streamed (`text`/`thinking`) message, or null. */
function streamKey(block) {
  return block?.type === 'text' || block?.type === 'thinking' ? replaceKey(block) : null;
}

/** Folds one chunk into its message; a gap marks it, a taken chunk clears the mark. */
function foldChunk(stream, block) {
  const result = stream.asm.apply(block);
  if (result === 'gap') stream.gap = true;
  else if (result === 'taken') stream.gap = false;
}
