// A session as the app shows it (client/src/transcript.rs): blocks held by `seq`; a
// block whose `seq` is already held is dropped; a later block with the same
// replaceable id replaces the earlier one in its place. History that arrives after
// `replay_done` is older and merges by `seq`.
//
// Replaceable ids are the protocol's (`text`, `thinking`, `progress`, `bg_task`);
// the page also shows a `tool_call` and its status updates (same `id`) as one card,
// so `displayKey` adds `tool_call`.

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
    for (const b of blocks) this.apply(b);
  }

  /** Applies one block; returns true when it was new, false for a seq already held. */
  apply(block) {
    if (!block || !Number.isSafeInteger(block.seq)) return false;
    if (this.bySeq.has(block.seq)) return false;
    this.bySeq.set(block.seq, block);
    return true;
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
   * block, with the content of its last. `keyOf` defaults to the protocol's rule.
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
    return out;
  }

  /** The session's agent_info, if held. */
  agentInfo() {
    for (const b of this.blocks()) if (b.type === 'agent_info') return b;
    return null;
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
