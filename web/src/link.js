// One end-to-end encrypted link from this device to its bridge, over the bridge's
// LAN server or a relay (`/v1/client`): challenge → auth → relay_status →
// link_hello → link_accept, then sealed controls out and replies / blocks in.
// The same as client/src/connection.rs: session_request / session_resume /
// attach_external get a fresh X25519 key per attachment; on a relay, a control
// naming a session waits (≤ 5 s) for that session's resume token.
//
// DOM-free: the page passes the browser's WebSocket; the Node tests pass `ws`.
// Everything from the network is untrusted: a frame that fails to parse, verify or
// open is refused, counted and reported through `onReject`, never thrown. A session's
// blocks and the link's replies must arrive whole (consecutive counters): one that
// shows an earlier one was dropped on the way is refused and the link is closed, so
// the caller reconnects and resumes. `auth` says which protocol version this app
// speaks; a server whose `relay_status` names another is refused with one sentence
// naming both (error code VERSION_MISMATCH: reconnecting will not help).

import * as c from './crypto.js';
import { controlCounter, openReplayDone } from './attested.js';
import * as h from './handshake.js';

/** How long a control naming a session waits for its resume token (relay only). */
export const TOKEN_WAIT_MS = 5000;
/** How long the handshake may take. */
export const HANDSHAKE_TIMEOUT_MS = 15000;
/** How long a control waits for its reply. */
export const REPLY_TIMEOUT_MS = 30000;

const ATTACHING = new Set(['session_request', 'session_resume', 'attach_external', 'terminal_open', 'terminal_attach']);
/** The `block_type`s a terminal's sealed output and end travel as (docs/terminals.md#on-the-wire). */
const TERMINAL_BLOCKS = new Set(['terminal_output', 'terminal_exit']);
const FATAL_RELAY_ERRORS = new Set(['unknown_device', 'slow_consumer', 'too_many_connections', 'unsupported_version']);
/** The code of an error (a failed open, a closed link) that retrying will not fix: the two ends speak other protocol versions. */
export const VERSION_MISMATCH = 'unsupported_version';

/** `relay_status.protocol_version` (absent: 1) against this app's: the sentence naming both, or null. */
function versionProblem(frame, direct) {
  const v = Number.isSafeInteger(frame.protocol_version) ? frame.protocol_version : 1;
  if (v === c.PROTOCOL_VERSION) return null;
  return c.versionMismatch(direct ? 'the LAN server' : 'the relay', v, 'this device', c.PROTOCOL_VERSION);
}

/**
 * A control that failed: `code` is the reply's error code, `refused` when the link
 * refused it before dispatching (then `reason` is the refusal's code: replayed,
 * bad_seal, bad_signature, session_mismatch, rate_limited), or `link` when the link
 * went away.
 */
export class ControlError extends Error {
  constructor(code, message, reason = null) {
    super(message);
    this.name = 'ControlError';
    this.code = code;
    this.reason = reason;
  }
}

/** Controls remembered by counter, for `refused` replies that carry no id. */
const SENT_KEPT = 1024;

function parseFrame(data) {
  if (typeof data !== 'string') return null;
  let v;
  try {
    v = JSON.parse(data);
  } catch {
    return null;
  }
  return v && typeof v === 'object' && !Array.isArray(v) && typeof v.type === 'string' ? v : null;
}

function isBlock(v) {
  return (
    v &&
    typeof v === 'object' &&
    !Array.isArray(v) &&
    typeof v.type === 'string' &&
    Number.isSafeInteger(v.seq) &&
    v.seq >= 0
  );
}

/**
 * Opens a link. Options:
 * - `url`: ws(s)://host/v1/client
 * - `identity`: the device identity (crypto.identityFromSecrets)
 * - `bridge`: `{bridgeId, keys: {ed25519, x25519}}` pinned at pairing
 * - `direct`: true on the LAN (no resume tokens to wait for)
 * - `WebSocket`: the constructor (browser's, or `ws` in Node)
 * - `pushLast`: the highest push counter opened so far (BigInt)
 * - handlers: `onBlock(sessionId, block, replay)`, `onReplayDone(sessionId, lastSeq)`,
 *   `onTerminal(terminalId, message)` (a sealed `terminal_output` or `terminal_exit`),
 *   `onStatus(status)`, `onPush(notice, counter)`, `onReject(reason)`,
 *   `onRelayError(frame)`, `onClose(reason)`
 * Resolves to a Link once `link_accept` verified; rejects with the reason otherwise.
 */
export function openLink(opts) {
  const WS = opts.WebSocket ?? globalThis.WebSocket;
  return new Promise((resolve, reject) => {
    let ws;
    try {
      ws = new WS(opts.url);
    } catch (e) {
      reject(new Error(`cannot open ${opts.url}: ${e.message ?? e}`));
      return;
    }
    const identity = opts.identity;
    const deviceId = c.deviceIdOf(identity.ed25519Public);
    const bridgeId = opts.bridge.bridgeId;
    let stage = 'challenge';
    let status = null;
    let settled = false;
    let link = null;
    const earlyPushes = [];
    let pending = null;
    const fail = (reason, code) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      try {
        ws.close();
      } catch {
        /* already closed */
      }
      const err = new Error(reason);
      if (code) err.code = code;
      reject(err);
    };
    const timer = setTimeout(() => fail(`${opts.url}: no answer within ${HANDSHAKE_TIMEOUT_MS / 1000} s`), HANDSHAKE_TIMEOUT_MS);
    const send = (frame) => ws.send(JSON.stringify(frame));

    ws.onerror = () => {
      if (!settled) fail(`cannot reach ${opts.url}`);
    };
    ws.onclose = (ev) => {
      if (!settled) {
        fail(`the server closed the connection during the handshake${ev && ev.reason ? `: ${ev.reason}` : ''}`);
      } else if (link) {
        link._closed(`the connection closed${ev && ev.reason ? `: ${ev.reason}` : ''}`);
      }
    };
    ws.onmessage = (ev) => {
      if (link) {
        link._incoming(ev.data);
        return;
      }
      const frame = parseFrame(ev.data);
      if (!frame) return fail(`unreadable frame during the handshake (${stage})`);
      if (frame.type === 'error' && frame.code === VERSION_MISMATCH) return fail(String(frame.message), VERSION_MISMATCH);
      if (frame.type === 'error') return fail(`refused: ${frame.code}: ${frame.message}`);
      if (frame.type === 'relay_status') {
        const problem = versionProblem(frame, !!opts.direct);
        if (problem) return fail(problem, VERSION_MISMATCH);
      }
      try {
        if (stage === 'challenge') {
          if (frame.type !== 'challenge') return fail(`expected challenge, got ${frame.type}`);
          stage = 'status';
          send(c.authFrame(identity, bridgeId, frame.nonce));
        } else if (stage === 'status') {
          if (frame.type !== 'relay_status') return fail(`expected relay_status, got ${frame.type}`);
          status = sanitizeStatus(frame);
          stage = 'accept';
          const started = h.startLink(identity, bridgeId);
          pending = started.pending;
          send(started.hello);
        } else if (stage === 'accept') {
          if (frame.type === 'relay_status') {
            status = sanitizeStatus(frame);
          } else if (frame.type === 'push') {
            earlyPushes.push(frame);
          } else if (frame.type === 'link_accept') {
            const keys = h.finishLink(identity, opts.bridge.keys, pending, frame);
            settled = true;
            clearTimeout(timer);
            link = new Link(ws, opts, keys, status, deviceId);
            for (const p of earlyPushes) link._push(p);
            opts.onStatus?.(status);
            resolve(link);
          } else {
            return fail(`expected link_accept, got ${frame.type}`);
          }
        }
      } catch (e) {
        fail(`handshake: ${e.message ?? e}`);
      }
    };
  });
}

// The relay writes `relay_status.agents` and nothing authenticates it: the list is
// dropped here, and the agents come from a sealed `list_agents` reply (refreshAgents).
function sanitizeStatus(frame) {
  const agents = [];
  const tokens = {};
  if (frame.resume_tokens && typeof frame.resume_tokens === 'object') {
    for (const [k, v] of Object.entries(frame.resume_tokens)) if (typeof v === 'string') tokens[k] = v;
  }
  return { bridge_online: frame.bridge_online === true, agents, resume_tokens: tokens };
}

export class Link {
  constructor(ws, opts, keys, status, deviceId) {
    this.ws = ws;
    this.opts = opts;
    this.identity = opts.identity;
    this.bridgeId = opts.bridge.bridgeId;
    this.bridgeX = c.publicKeysFromWire(opts.bridge.keys).x25519;
    this.deviceId = deviceId;
    this.direct = !!opts.direct;
    this.sealer = keys.sealer;
    this.opener = keys.opener;
    this.pushOpener = new c.Opener(keys.pushKey, 'push', opts.pushLast ?? 0n);
    this.status = status;
    /** Block openers by session (one per attachment). */
    this.sessions = new Map();
    /** Session keys waiting for the bridge's attach, by control id. */
    this.pendingKeys = new Map();
    /** Replies awaited, by control id: {resolve, reject, timer}. */
    this.waiting = new Map();
    /** Controls waiting for a resume token: {value, since}. */
    this.queue = [];
    /** [counter, id] of the latest controls sent, at most SENT_KEPT. */
    this.sent = [];
    /** The agents, from the bridge's sealed `list_agents` reply (refreshAgents). */
    this.verifiedAgents = [];
    this.nextId = 0;
    this.rejected = 0;
    this.closed = null;
    this.tick = setInterval(() => this._flush(), 100);
  }

  /** The bridge's agents, as its last sealed `list_agents` reply listed them. */
  get agents() {
    return this.verifiedAgents;
  }

  /** Asks the bridge for its agents (a sealed reply: the relay cannot forge it). */
  async refreshAgents(timeoutMs = REPLY_TIMEOUT_MS) {
    const result = await this.request({ type: 'list_agents' }, timeoutMs);
    const agents = Array.isArray(result?.agents) ? result.agents.filter((a) => a && typeof a.agent_id === 'string') : [];
    this.verifiedAgents = agents;
    return agents;
  }

  /**
   * Sends a control message (a plain object as on the local socket) and resolves to
   * the reply's `result` (rejects with a ControlError on an error reply).
   */
  request(message, timeoutMs = REPLY_TIMEOUT_MS) {
    if (this.closed) return Promise.reject(new ControlError('link', this.closed));
    const value = { ...message };
    if (typeof value.id !== 'string') value.id = `w-${++this.nextId}-${Date.now().toString(36)}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(value.id);
        reject(new ControlError('timeout', `no reply to ${value.type} within ${timeoutMs / 1000} s`));
      }, timeoutMs);
      this.waiting.set(value.id, { resolve, reject, timer, type: value.type });
      this.queue.push({ value, since: Date.now() });
      this._flush();
    });
  }

  /**
   * Closes the link (no reconnect from here: the caller decides; `code` tells it why,
   * e.g. VERSION_MISMATCH, which retrying will not fix).
   */
  close(reason = 'closed by this device', code = null) {
    try {
      this.ws.close(1000);
    } catch {
      /* already closed */
    }
    this._closed(reason, code);
  }

  _sendable(value) {
    if (this.direct) return true;
    const sid = typeof value.session_id === 'string' ? value.session_id : null;
    return sid == null || Object.hasOwn(this.status.resume_tokens, sid);
  }

  _flush() {
    if (this.closed) return;
    while (this.queue.length) {
      const { value, since } = this.queue[0];
      if (!this._sendable(value) && Date.now() - since < TOKEN_WAIT_MS) break;
      this.queue.shift();
      try {
        this.ws.send(JSON.stringify(this._outgoing(value)));
      } catch (e) {
        this._fail(value.id, new ControlError('link', `not sent: ${e.message ?? e}`));
      }
    }
  }

  _outgoing(value) {
    if (ATTACHING.has(value.type)) {
      const key = c.appSessionKey();
      value.app_pubkey = c.b64url(key.public);
      this.pendingKeys.set(value.id, key);
    }
    const sid = typeof value.session_id === 'string' ? value.session_id : null;
    const token = sid != null && !this.direct ? (this.status.resume_tokens[sid] ?? null) : null;
    const frame = c.sealControl(this.sealer, this.identity, this.bridgeId, sid, token, JSON.stringify(value));
    if (typeof value.id === 'string') {
      const counter = controlCounter(frame.body);
      if (counter != null) {
        if (this.sent.length >= SENT_KEPT) this.sent.shift();
        this.sent.push([counter, value.id]);
      }
    }
    return frame;
  }

  _fail(id, err) {
    const w = this.waiting.get(id);
    if (!w) return;
    this.waiting.delete(id);
    clearTimeout(w.timer);
    w.reject(err);
  }

  _reject(what, reason) {
    this.rejected += 1;
    const text = `refused ${what}: ${reason}`;
    try {
      this.opts.onReject?.(text);
    } catch {
      /* a handler's bug must not break the link */
    }
  }

  _closed(reason, code = null) {
    if (this.closed) return;
    this.closed = reason;
    this.closedCode = code;
    clearInterval(this.tick);
    for (const id of [...this.waiting.keys()]) this._fail(id, new ControlError('link', reason));
    this.queue = [];
    try {
      this.opts.onClose?.(reason, code);
    } catch {
      /* ignore */
    }
  }

  _incoming(data) {
    // A closed link reads nothing more (a broken one least of all).
    if (this.closed) return undefined;
    const frame = parseFrame(data);
    if (!frame) return this._reject('a frame', 'unreadable');
    try {
      switch (frame.type) {
        case 'reply':
          return this._reply(frame);
        case 'block':
          return this._block(frame);
        case 'replay_done': {
          // Only a sealed one counts: the relay cannot make one up.
          const opener = typeof frame.session_id === 'string' ? this.sessions.get(frame.session_id) : undefined;
          if (!opener) return this._reject('a replay_done', `no key for session \`${frame.session_id}\` on this link`);
          let done;
          try {
            done = openReplayDone(opener, frame);
          } catch (e) {
            return this._refuseOrBreak('a replay_done', e);
          }
          return this.opts.onReplayDone?.(done.session_id, done.last_seq);
        }
        case 'relay_status': {
          const problem = versionProblem(frame, this.direct);
          if (problem) {
            this._reject('a relay_status', problem);
            return this.close(problem, VERSION_MISMATCH);
          }
          this.status = sanitizeStatus(frame);
          this._flush();
          return this.opts.onStatus?.(this.status);
        }
        case 'push':
          return this._push(frame);
        case 'error':
          this.opts.onRelayError?.(frame);
          if (frame.code === VERSION_MISMATCH) this.close(String(frame.message), VERSION_MISMATCH);
          else if (FATAL_RELAY_ERRORS.has(frame.code)) this.close(`${frame.code}: ${frame.message}`);
          return undefined;
        default:
          return this._reject('a frame', `\`${frame.type}\` is not sent to devices`);
      }
    } catch (e) {
      return this._reject(`a ${frame.type}`, e.message ?? String(e));
    }
  }

  _reply(frame) {
    let sealed;
    try {
      const bytes = c.openReply(this.opener, this.bridgeId, this.deviceId, frame.body);
      sealed = JSON.parse(c.fromUtf8(bytes));
    } catch (e) {
      return this._refuseOrBreak('a reply', e);
    }
    const reply = sealed && typeof sealed === 'object' ? sealed.reply : null;
    if (!reply || typeof reply !== 'object') return this._reject('a reply', 'no `reply` object');
    let id = typeof reply.id === 'string' ? reply.id : null;
    // A refusal of a control whose id the bridge could not read names its counter.
    if (id == null && reply.status === 'refused' && Number.isSafeInteger(reply.counter)) {
      id = this.sent.find(([n]) => n === reply.counter)?.[1] ?? null;
    }
    const key = id != null ? this.pendingKeys.get(id) : undefined;
    if (id != null) this.pendingKeys.delete(id);
    const attach = sealed.attach;
    if (attach != null) {
      if (!key) return this._reject('a reply', 'an attach for no session request of this link');
      if (typeof attach.session_id !== 'string') return this._reject('a reply', 'attach without session_id');
      const nonce = c.fromB64urlN(attach.attach_nonce, 16, 'attach_nonce');
      const shared = c.agree(key.secret, this.bridgeX, 'bridge x25519');
      const keys = c.sessionKeys(shared, attach.session_id, key.public, nonce);
      this.sessions.set(attach.session_id, new c.Opener(keys.bridgeToApp, 'block'));
    }
    const w = id != null ? this.waiting.get(id) : undefined;
    if (!w) return undefined;
    this.waiting.delete(id);
    clearTimeout(w.timer);
    if (reply.status === 'ok') {
      w.resolve(reply.result ?? {});
    } else if (reply.status === 'refused') {
      const reason = String(reply.reason ?? 'refused');
      w.reject(new ControlError('refused', String(reply.message ?? `the bridge refused it (${reason})`), reason));
    } else {
      const err = reply.error && typeof reply.error === 'object' ? reply.error : {};
      w.reject(new ControlError(String(err.code ?? 'error'), String(err.message ?? 'the bridge refused')));
    }
    return undefined;
  }

  _block(frame) {
    const opener = this.sessions.get(frame.session_id);
    if (!opener) return this._reject('a block', `no key for session \`${frame.session_id}\` on this link`);
    let block;
    try {
      block = JSON.parse(c.fromUtf8(c.openBlock(opener, frame)));
    } catch (e) {
      return this._refuseOrBreak('a block', e);
    }
    if (TERMINAL_BLOCKS.has(frame.block_type)) return this._terminal(frame, block);
    if (!isBlock(block)) return this._reject('a block', 'not a block with a seq');
    if (block.type !== frame.block_type) return this._reject('a block', 'its type differs from the envelope');
    return this.opts.onBlock?.(frame.session_id, block, frame.replay === true);
  }

  /**
   * A terminal's output or end, opened with its keys: checked, then handed to
   * `onTerminal` with its `type` from the envelope's `block_type` (which the AEAD
   * authenticates; the sealed JSON carries no `type` of its own).
   */
  _terminal(frame, opened) {
    if (!opened || typeof opened !== 'object' || Array.isArray(opened)) return this._reject('terminal output', 'not an object');
    if (opened.type != null && opened.type !== frame.block_type) return this._reject('terminal output', 'its type differs from the envelope');
    const message = { ...opened, type: frame.block_type };
    if (message.terminal_id !== frame.session_id) return this._reject('terminal output', 'it names another terminal');
    if (message.type === 'terminal_output' && (!Number.isSafeInteger(message.seq) || typeof message.data !== 'string')) {
      return this._reject('terminal output', 'no seq or data');
    }
    return this.opts.onTerminal?.(frame.session_id, message);
  }

  /**
   * Refuses a block or reply that did not open. One that shows an earlier one was
   * dropped on the way (MissingError) also breaks the link: what the page holds has a
   * hole that only a new link fills (new keys, sessions resumed from the newest block
   * held), so the socket is dropped and the caller reconnects.
   */
  _refuseOrBreak(what, e) {
    this._reject(what, e.message ?? String(e));
    if (e instanceof c.MissingError) this.close(`${what} was dropped on the way (${e.message}): reconnecting`);
    return undefined;
  }

  _push(frame) {
    let notice;
    try {
      notice = JSON.parse(c.fromUtf8(c.openPush(this.pushOpener, this.bridgeId, this.deviceId, frame)));
    } catch (e) {
      return this._reject('a push', e.message ?? String(e));
    }
    return this.opts.onPush?.(notice, this.pushOpener.last);
  }
}
