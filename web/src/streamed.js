// Streamed text (`text` and `thinking` blocks) rebuilt from its chunks, as
// protocol/src/streamed.rs does it (docs/block-protocol.md):
//
// - a chunk without `offset` is a snapshot: its `text` is the whole message so far,
//   and replaces what is held;
// - a chunk with `offset: N` is an append: its `text` continues a message that is N
//   UTF-8 bytes long, and applies only when exactly N bytes are held. A piece that is
//   held already is a repeat (ignored); anything else is a gap, which changes nothing:
//   the page keeps the prefix it holds and never shows a wrong text.
//
// Offsets count UTF-8 bytes, not JavaScript's UTF-16 code units, so the byte length of
// the text held is kept beside it. DOM-free (Node tests import it).

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The UTF-8 byte length of a string (what `offset` counts). */
export function utf8Length(s) {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

/** True for an append (a chunk with a numeric `offset`), false for a snapshot. */
export function isAppend(chunk) {
  return chunk?.offset != null;
}

/** One streamed message as the page rebuilds it. `apply` says what it did with a chunk. */
export class Assembly {
  constructor() {
    this.text = '';
    /** UTF-8 bytes of `text`: the `offset` the next append must carry. */
    this.bytes = 0;
    this.done = false;
  }

  /**
   * Takes one chunk: 'taken' (the text or its `done` changed), 'repeat' (held
   * already), 'gap' (does not fit: nothing changed) or 'after_done'.
   */
  apply(chunk) {
    const text = typeof chunk?.text === 'string' ? chunk.text : '';
    const done = chunk?.done === true;
    if (this.done) return done && this.#matchesWhole(chunk, text) ? 'repeat' : 'after_done';
    if (!isAppend(chunk)) {
      if (text === this.text && !done) return 'repeat';
      this.#set(text, utf8Length(text), done);
      return 'taken';
    }
    const offset = chunk.offset;
    if (!Number.isSafeInteger(offset) || offset < 0 || offset > this.bytes) return 'gap';
    if (offset === this.bytes) {
      if (text === '' && !done) return 'repeat';
      this.#set(this.text + text, this.bytes + utf8Length(text), done);
      return 'taken';
    }
    // The piece starts inside what is held: take its new part when the overlap agrees.
    const overlap = this.#from(offset);
    if (overlap == null) return 'gap';
    if (!text.startsWith(overlap)) return overlap.startsWith(text) && !done ? 'repeat' : 'gap';
    const added = text.slice(overlap.length);
    if (added === '' && !done) return 'repeat';
    this.#set(this.text + added, this.bytes + utf8Length(added), done);
    return 'taken';
  }

  #set(text, bytes, done) {
    this.text = text;
    this.bytes = bytes;
    this.done = done;
  }

  /** The text held from UTF-8 byte `offset` on, or null when that is inside a character. */
  #from(offset) {
    const bytes = encoder.encode(this.text);
    if (offset < bytes.length && (bytes[offset] & 0xc0) === 0x80) return null;
    return decoder.decode(bytes.subarray(offset));
  }

  #matchesWhole(chunk, text) {
    const start = isAppend(chunk) ? chunk.offset : 0;
    if (!Number.isSafeInteger(start) || start < 0 || start > this.bytes) return false;
    return this.#from(start) === text;
  }
}
