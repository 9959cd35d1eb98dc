// What the terminal view's keys send, DOM-free (test/terminal-keys.test.mjs): the key
// bar's keys and combos, the sticky Ctrl applied to the next character typed, the
// arrows in the cursor mode the program asked for, input split under the bridge's
// 64 KiB per `terminal_input`, and the feed that drops output already shown after a
// reattach (docs/terminals.md, "The web app's terminal").

/** Bytes per `terminal_input` the app sends (the bridge takes at most 64 KiB decoded). */
export const INPUT_CHUNK = 32 * 1024;

/**
 * The key bar, left to right: `{id, label, aria, send}` where `send` is the text sent,
 * `'ctrl'` (the sticky modifier) or `{arrow: 'A'|'B'|'C'|'D'}` (the sequence depends
 * on the cursor mode), or `'paste'`.
 */
export const KEYS = [
  { id: 'esc', label: 'Esc', aria: 'Escape', send: '\x1b' },
  { id: 'tab', label: 'Tab', aria: 'Tab', send: '\t' },
  { id: 'ctrl', label: 'Ctrl', aria: 'Control (applies to the next key)', send: 'ctrl' },
  { id: 'left', label: '←', aria: 'Left arrow', send: { arrow: 'D' } },
  { id: 'up', label: '↑', aria: 'Up arrow', send: { arrow: 'A' } },
  { id: 'down', label: '↓', aria: 'Down arrow', send: { arrow: 'B' } },
  { id: 'right', label: '→', aria: 'Right arrow', send: { arrow: 'C' } },
  { id: 'ctrl-c', label: '^C', aria: 'Control C (interrupt)', send: '\x03' },
  { id: 'ctrl-d', label: '^D', aria: 'Control D (end of input)', send: '\x04' },
  { id: 'ctrl-z', label: '^Z', aria: 'Control Z (suspend)', send: '\x1a' },
  { id: 'ctrl-l', label: '^L', aria: 'Control L (redraw)', send: '\x0c' },
  { id: 'pipe', label: '|', aria: 'Vertical bar', send: '|' },
  { id: 'tilde', label: '~', aria: 'Tilde', send: '~' },
  { id: 'slash', label: '/', aria: 'Slash', send: '/' },
  { id: 'dash', label: '-', aria: 'Dash', send: '-' },
  { id: 'paste', label: 'Paste', aria: 'Paste from the clipboard', send: 'paste' },
];

/** The arrow's sequence: `ESC O x` when the program set application cursor keys (less, vim), else `ESC [ x`. */
export function arrowSequence(letter, applicationCursor) {
  return `${applicationCursor ? '\x1bO' : '\x1b['}${letter}`;
}

/**
 * `text` typed while Ctrl is held: its first character as a control character
 * (`a`–`z` and `A`–`Z` → 0x01–0x1a, `@ [ \ ] ^ _` → 0x00 0x1b–0x1f, space → 0x00,
 * `?` → DEL), the rest as typed. A character with no control form is sent as typed.
 */
export function withCtrl(text) {
  if (!text) return text;
  const first = text[0];
  const rest = text.slice(1);
  const code = first.charCodeAt(0);
  if (/[a-z]/i.test(first)) return String.fromCharCode(first.toUpperCase().charCodeAt(0) - 64) + rest;
  if (first === ' ' || first === '@' || first === '2') return `\x00${rest}`;
  if (code >= 0x5b && code <= 0x5f) return String.fromCharCode(code - 64) + rest;
  if (first === '?') return `\x7f${rest}`;
  return text;
}

/** `bytes` cut into pieces of at most `size` (one per `terminal_input`). */
export function chunks(bytes, size = INPUT_CHUNK) {
  const out = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.subarray(i, i + size));
  return out;
}

/**
 * One terminal's output as the page takes it: the `seq` of the last chunk written
 * (reattach with it as `since_seq`); a chunk at or below it is a repeat and dropped.
 */
export class TerminalFeed {
  constructor(terminalId) {
    this.terminalId = terminalId;
    this.lastSeq = 0;
    this.dropped = 0;
  }

  /** Whether the output message `m` is new (and takes its seq). */
  take(m) {
    if (!Number.isSafeInteger(m?.seq) || m.seq <= this.lastSeq) {
      this.dropped += 1;
      return false;
    }
    this.lastSeq = m.seq;
    return true;
  }
}
