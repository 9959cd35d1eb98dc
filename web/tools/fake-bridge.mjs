// An in-process bridge (optionally behind a "relay") speaking the device side of
// docs/relay.md with crypto.js: pairing, challenge/auth/relay_status, the link,
// sealed controls and replies, session keys from each attach, sealed blocks.
// Transport-agnostic: `connect(send)` starts one device connection whose frames go
// out through `send(text)`; feed the device's frames to `conn.receive(text)`.
// Used by test/link.test.mjs (a fake WebSocket) and test/ui.test.mjs (Playwright's
// routeWebSocket). Test support only: never bundled into the app.

import assert from 'node:assert/strict';
import * as c from '../src/crypto.js';
import { sealReplayDone } from '../src/attested.js';
import * as h from '../src/handshake.js';

export class FakeBridge {
  constructor({ direct = true, forgeAccept = false, agents, protocolVersion = c.PROTOCOL_VERSION } = {}) {
    this.protocolVersion = protocolVersion; // what relay_status says it speaks
    this.identity = c.generateIdentity();
    this.bridgeId = c.bridgeIdOf(this.identity.ed25519Public);
    this.keys = c.publicKeysWire(this.identity);
    this.direct = direct;
    this.forgeAccept = forgeAccept;
    this.agents = agents ?? [{ agent_id: 'echo', display_name: 'Echo', provides_models: false }];
    this.devices = new Map(); // device_id → {ed25519, x25519}
    this.controls = []; // every control message opened, in order
    this.sessions = new Map(); // session id → block Sealer (latest attachment)
    this.tokens = {};
    this.handlers = {}; // type → (json, conn) => result | {error} | undefined (default handling)
    this.listings = null; // list_sessions answers these (default: none)
    this.external = null; // scan_external_sessions answers these (default: not_supported)
    this.terminalCommands = {}; // session id → {argv, cwd, command} for continue_in_terminal (default: not_supported)
    this.conns = [];
  }

  /** A pairing link for this bridge (`base` without a trailing slash). */
  pairingLink(base, { expiresIn = 600 } = {}) {
    this.secret = c.randomBytes(32);
    return c.pairingLinkUrl(
      { bridgeId: this.bridgeId, bridge: this.keys, relay: null, lan: null, secret: this.secret, expiresAt: Math.floor(Date.now() / 1000) + expiresIn },
      base,
    );
  }

  /** Answers a PairRequest (what the bridge's broker does): `{status, body, shortCode}`. */
  pair(request) {
    const macKey = c.hkdfSha256(c.utf8('terminull/v1 pairing'), this.secret, c.utf8('mac'));
    if (request.pairing_id !== c.pairingId(this.secret)) return { status: 403, body: { error: 'unknown offer' } };
    const device = c.publicKeysFromWire(request.device);
    if (c.deviceIdOf(device.ed25519) !== request.device_id) return { status: 400, body: { error: 'device id' } };
    const nonce = c.fromB64urlN(request.device_nonce, 16);
    const t = c.transcript([
      'terminull/v1 pair-request', request.bridge_id, request.pairing_id, this.identity.ed25519Public, this.identity.x25519Public,
      request.device_id, device.ed25519, device.x25519, request.device_name, nonce,
    ]);
    const mac = c.fromB64url(request.mac);
    if (!c.equalBytes(c.hmacSha256(macKey, t), mac)) return { status: 403, body: { error: 'mac' } };
    if (!c.verify(device.ed25519, t, c.fromB64url(request.sig))) return { status: 403, body: { error: 'sig' } };
    const bridgeNonce = c.randomBytes(16);
    const rt = c.transcript(['terminull/v1 pair-response', t, mac, bridgeNonce]);
    this.devices.set(request.device_id, device);
    return {
      status: 200,
      shortCode: c.shortCode(rt),
      body: {
        bridge_id: this.bridgeId,
        device_id: request.device_id,
        bridge_nonce: c.b64url(bridgeNonce),
        mac: c.b64url(c.hmacSha256(macKey, rt)),
        sig: c.b64url(c.sign(this.identity, rt)),
      },
    };
  }

  /** Registers a device without pairing (its public keys as bytes). */
  addDevice(identity) {
    this.devices.set(c.deviceIdOf(identity.ed25519Public), { ed25519: identity.ed25519Public, x25519: identity.x25519Public });
  }

  /** Starts one device connection. */
  connect(send) {
    const conn = new FakeConn(this, send);
    this.conns.push(conn);
    conn.deliver({ type: 'challenge', nonce: c.b64url((conn.challenge = c.randomBytes(32))) });
    return conn;
  }

  /** The connection that attached to `sid` last. */
  connFor(sid) {
    for (let i = this.conns.length - 1; i >= 0; i--) if (this.conns[i].sessions.has(sid)) return this.conns[i];
    return null;
  }

  /** Seals `block` for the latest attachment of its session and sends it. */
  emit(sid, block, opts) {
    const conn = this.connFor(sid);
    assert.ok(conn, `no attachment of ${sid}`);
    const frame = conn.block(sid, block, opts);
    conn.deliver(frame);
    return frame;
  }

  /** Sends a relay_status with a token for `sid` to every connection (a relay would). */
  grantToken(sid) {
    this.tokens[sid] = `tok-${sid}`;
    for (const conn of this.conns) conn.deliver({ type: 'relay_status', protocol_version: this.protocolVersion, bridge_online: true, agents: this.agents, resume_tokens: this.tokens });
  }
}

class FakeConn {
  constructor(bridge, send) {
    this.bridge = bridge;
    this.send = send;
    this.sessions = new Map();
    this.closed = false;
  }

  deliver(frame) {
    if (!this.closed) this.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  receive(text) {
    const b = this.bridge;
    const frame = JSON.parse(text);
    switch (frame.type) {
      case 'auth': {
        const dev = b.devices.get(frame.device_id);
        assert.ok(dev, `unknown device ${frame.device_id}`);
        assert.ok(c.verify(dev.ed25519, c.relayAuthBytes('device', frame.device_id, b.bridgeId, this.challenge), c.fromB64(frame.sig)), 'auth signature');
        this.deviceId = frame.device_id;
        this.device = dev;
        assert.equal(frame.protocol_version, c.PROTOCOL_VERSION, 'auth names the protocol version');
        this.deliver({ type: 'relay_status', protocol_version: b.protocolVersion, bridge_online: true, agents: b.agents, resume_tokens: b.direct ? {} : b.tokens });
        return;
      }
      case 'link_hello': {
        assert.equal(frame.device_id, this.deviceId);
        const signer = b.forgeAccept ? c.generateIdentity() : b.identity;
        const { accept, keys: k } = h.acceptHello(b.identity, this.device, frame, undefined, undefined, { signer });
        this.sealer = new c.Sealer(k.bridgeToApp, 'link');
        this.opener = new c.Opener(k.appToBridge, 'link');
        this.deliver(accept);
        return;
      }
      case 'control':
        return this.control(frame);
      default:
        throw new Error(`the device sent \`${frame.type}\``);
    }
  }

  control(frame) {
    const b = this.bridge;
    assert.ok(c.verifyControl(this.device.ed25519, b.bridgeId, frame), 'control signature');
    const json = JSON.parse(c.fromUtf8(this.opener.open(c.controlAad(b.bridgeId, frame.device_id, frame.session_id), c.fromB64(frame.body))));
    assert.equal(frame.session_id ?? undefined, json.session_id ?? undefined, 'the routing session_id is the message');
    if (!b.direct && json.session_id != null) assert.equal(frame.token, b.tokens[json.session_id], 'the resume token travels with it');
    b.controls.push({ ...json, _token: frame.token });
    const custom = b.handlers[json.type]?.(json, this);
    if (custom === null) return; // the handler answered (or chose not to)
    if (custom !== undefined) return this.reply(json.id, custom);
    if (json.type === 'session_request' || json.type === 'session_resume' || json.type === 'attach_external') {
      const sid = json.session_id ?? `s-${b.sessions.size + 1}`;
      const appPub = c.fromB64url(json.app_pubkey);
      const nonce = c.randomBytes(16);
      const k = c.sessionKeys(c.agree(b.identity.x25519Secret, appPub), sid, appPub, nonce);
      const sealer = new c.Sealer(k.bridgeToApp, 'block');
      this.sessions.set(sid, sealer);
      b.sessions.set(sid, sealer);
      const result = json.type === 'session_resume' ? { kind: 'accepted' } : { kind: 'session_started', session_id: sid };
      return this.reply(json.id, result, { session_id: sid, attach_nonce: c.b64url(nonce) });
    }
    if (json.type === 'list_sessions') return this.reply(json.id, { kind: 'sessions', sessions: b.listings ?? [] });
    if (json.type === 'list_agents') return this.reply(json.id, { kind: 'agents', agents: b.agents });
    if (json.type === 'scan_external_sessions') {
      if (b.external) return this.reply(json.id, { kind: 'external_sessions', sessions: b.external });
      return this.reply(json.id, { error: { code: 'not_supported', message: 'no handoff here' } });
    }
    if (json.type === 'continue_in_terminal') {
      const t = b.terminalCommands[json.session_id];
      if (!t) return this.reply(json.id, { error: { code: 'not_supported', message: `${json.session_id} cannot continue in a terminal` } });
      return this.reply(json.id, { kind: 'terminal_command', ...t });
    }
    return this.reply(json.id, { kind: 'accepted' });
  }

  /** Sends the reply to control `id`: a result, or `{error: {code, message}}`. */
  reply(id, result, attach) {
    const b = this.bridge;
    const reply = result && result.error ? { type: 'reply', id, status: 'error', error: result.error } : { type: 'reply', id, status: 'ok', result };
    const body = c.sealReply(this.sealer, b.bridgeId, this.deviceId, JSON.stringify({ reply, ...(attach ? { attach } : {}) }));
    this.deliver({ type: 'reply', device_id: this.deviceId, body });
  }

  /** A `refused` reply (docs/control-messages.md#refused): `id` may be null, then `counter` names the control. */
  refused(id, reason, counter = null) {
    const b = this.bridge;
    const reply = { status: 'refused', reason, message: `the bridge refused this control message (${reason})` };
    if (id != null) reply.id = id;
    if (counter != null) reply.counter = counter;
    const body = c.sealReply(this.sealer, b.bridgeId, this.deviceId, JSON.stringify({ reply }));
    this.deliver({ type: 'reply', device_id: this.deviceId, body });
  }

  /** A sealed `replay_done` for this connection's attachment to `sid`. */
  replayDone(sid, lastSeq = null) {
    return sealReplayDone(this.sessions.get(sid), sid, lastSeq);
  }

  /** A sealed block frame for this connection's attachment to `sid` (as the relay forwards it: no signature). */
  block(sid, block, { replay = false, ts = 1767225611.25 } = {}) {
    return c.sealBlock(this.sessions.get(sid), sid, block.type, replay, ts, JSON.stringify(block));
  }
}
