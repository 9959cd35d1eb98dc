// The LAN fast path of the app loaded from the relay's https origin (which may not
// open ws:// to the LAN server: mixed content): a WebRTC data channel to the bridge,
// offered through the link (`rtc_offer`, sealed like every control) and carrying the
// same frames as a LAN WebSocket (docs/web-client.md, "The LAN as a data channel").
//
// DOM-free except for the RTCPeerConnection the caller passes: `ChannelSocket` makes
// an open data channel look like the WebSocket `openLink` expects, so the link's
// handshake, sealing and resume are the same code on every path.

/** The one channel's label (protocol/src/rtc.rs `DATA_CHANNEL_LABEL`). */
export const DATA_CHANNEL_LABEL = 'terminull';
/** The largest data channel message: a flag byte and a piece of a frame (`PIECE`). */
export const PIECE = 32 * 1024;
/** The largest frame reassembled (the LAN server's message limit). */
export const MAX_FRAME_BYTES = 1 << 20;
/** Time for ICE gathering (host candidates only: immediate in practice). */
export const GATHER_TIMEOUT_MS = 3000;
/** Time from the answer to the channel's opening. */
export const OPEN_TIMEOUT_MS = 10000;

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** A frame's text as data channel messages: pieces of at most PIECE bytes, each behind its flag byte (1: last). */
export function pieces(text) {
  const bytes = encoder.encode(text);
  const body = PIECE - 1;
  const count = Math.max(1, Math.ceil(bytes.length / body));
  const out = [];
  for (let i = 0; i < count; i++) {
    const part = bytes.subarray(i * body, Math.min(bytes.length, (i + 1) * body));
    const piece = new Uint8Array(part.length + 1);
    piece[0] = i + 1 === count ? 1 : 0;
    piece.set(part, 1);
    out.push(piece);
  }
  return out;
}

/** Joins pieces back into frames, at most `max` bytes each; throws naming what is wrong. */
export class Reassembly {
  constructor(max = MAX_FRAME_BYTES) {
    this.max = max;
    this.parts = [];
    this.length = 0;
  }

  /** Adds one piece (a Uint8Array); the frame's text when it was the last, else null. */
  push(piece) {
    if (piece.length === 0) throw new Error('an empty data channel message (no flag byte)');
    const flag = piece[0];
    if (flag > 1) throw new Error(`a flag byte of ${flag} (0: more pieces follow, 1: the last piece)`);
    if (this.length + piece.length - 1 > this.max) throw new Error(`a frame longer than ${this.max} bytes`);
    this.parts.push(piece.subarray(1));
    this.length += piece.length - 1;
    if (flag === 0) return null;
    const whole = new Uint8Array(this.length);
    let at = 0;
    for (const p of this.parts) {
      whole.set(p, at);
      at += p.length;
    }
    this.parts = [];
    this.length = 0;
    try {
      return decoder.decode(whole);
    } catch {
      throw new Error('a frame that is not UTF-8');
    }
  }
}

/**
 * An open RTCDataChannel as the WebSocket `openLink` uses: `send(text)`, `close()`,
 * `onmessage({data})`, `onclose({code, reason})`, `onerror`. Messages that arrive
 * before `onmessage` is set are kept and delivered when it is.
 */
export class ChannelSocket {
  constructor(channel, onGone) {
    this.channel = channel;
    this.onGone = onGone;
    this.reassembly = new Reassembly();
    this.early = [];
    this._onmessage = null;
    this.onclose = null;
    this.onerror = null;
    this.closed = false;
    channel.binaryType = 'arraybuffer';
    channel.onmessage = (ev) => {
      let text;
      try {
        text = this.reassembly.push(new Uint8Array(ev.data));
      } catch (e) {
        this.close(1002, `the data channel: ${e.message}`);
        return;
      }
      if (text === null) return;
      if (this._onmessage) this._onmessage({ data: text });
      else this.early.push(text);
    };
    channel.onclose = () => this._gone('the data channel closed');
    channel.onerror = () => this.onerror?.();
  }

  set onmessage(handler) {
    this._onmessage = handler;
    const early = this.early;
    this.early = [];
    for (const text of early) handler({ data: text });
  }

  get onmessage() {
    return this._onmessage;
  }

  send(text) {
    if (this.closed) return;
    for (const piece of pieces(text)) this.channel.send(piece);
  }

  close(code = 1000, reason = 'closed') {
    if (this.closed) return;
    try {
      this.channel.close();
    } catch {
      /* already closed */
    }
    this._gone(reason, code);
  }

  _gone(reason, code = 1006) {
    if (this.closed) return;
    this.closed = true;
    this.onGone?.();
    this.onclose?.({ code, reason });
  }
}

function waitFor(what, ms, register) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: not within ${ms / 1000} s`)), ms);
    register(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/**
 * Offers a data channel to the bridge through `link` (any open link: the relay's),
 * and resolves to a `ChannelSocket` once the channel is open. No ICE servers: host
 * candidates only. `RTCPeerConnection` is the browser's constructor.
 */
export async function offerChannel(link, RTCPeerConnection = globalThis.RTCPeerConnection) {
  if (typeof RTCPeerConnection !== 'function') throw new Error('this browser has no WebRTC');
  const pc = new RTCPeerConnection({ iceServers: [] });
  const close = () => {
    try {
      pc.close();
    } catch {
      /* already closed */
    }
  };
  try {
    const channel = pc.createDataChannel(DATA_CHANNEL_LABEL, { ordered: true });
    await pc.setLocalDescription(await pc.createOffer());
    if (pc.iceGatheringState !== 'complete') {
      await waitFor('gathering local candidates', GATHER_TIMEOUT_MS, (resolve) => {
        pc.addEventListener('icegatheringstatechange', () => {
          if (pc.iceGatheringState === 'complete') resolve();
        });
      }).catch(() => {
        /* send what was gathered */
      });
    }
    const reply = await link.request({ type: 'rtc_offer', sdp: pc.localDescription.sdp });
    if (typeof reply?.sdp !== 'string') throw new Error('the bridge sent no SDP answer');
    await pc.setRemoteDescription({ type: 'answer', sdp: reply.sdp });
    if (channel.readyState !== 'open') {
      await waitFor('opening the data channel', OPEN_TIMEOUT_MS, (resolve, reject) => {
        channel.onopen = () => resolve();
        channel.onclose = () => reject(new Error('the data channel closed before it opened'));
      });
    }
    const socket = new ChannelSocket(channel, close);
    pc.addEventListener('connectionstatechange', () => {
      if (pc.connectionState === 'failed' || pc.connectionState === 'disconnected' || pc.connectionState === 'closed') {
        socket.close(1006, `the LAN path is ${pc.connectionState}`);
      }
    });
    return socket;
  } catch (e) {
    close();
    throw e;
  }
}
