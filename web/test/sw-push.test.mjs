// The service worker's push opening (web/src/sw/push.js): a sealed `push` frame opens
// with the device's push key from the worker's record, a replay or a wrong key or a
// tampered payload is refused, and the notification it makes carries the agent, the
// tool, the command, the session as tag and the Allow/Deny answers.
// Run: `npm test` in web/.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as c from '../src/crypto.js';
import { openPushFrame, notificationOf, intentOf } from '../src/sw/push.js';

const V = JSON.parse(readFileSync(fileURLToPath(new URL('../../docs/vectors/envelope.json', import.meta.url)), 'utf8'));
const bridgeId = V.bridge.bridge_id;
const deviceId = V.device.device_id;
const key = c.fromHex(V.push.key_hex);
const record = (last = 0n) => ({ bridgeId, deviceId, pushKey: c.b64url(key), last: last.toString() });

function sealed(notice, counter, kind = notice.kind) {
  const sealer = new c.Sealer(key, 'push', counter);
  const payload = c.b64(sealer.seal(c.pushAad(bridgeId, deviceId, kind), c.utf8(JSON.stringify(notice))));
  return { type: 'push', device_id: deviceId, kind, payload };
}

const permission = {
  session_id: 's-1',
  kind: 'permission_needed',
  title: 'claude asks to use Bash',
  body: 'rm -rf build',
  agent: 'claude',
  seq: 12,
  tool: 'Bash',
  request_id: 'perm_1',
  allow_option: 'allow',
  deny_option: 'deny',
};

test("the worker opens the envelope vector's push with the record's key", () => {
  const frame = { type: 'push', device_id: deviceId, kind: V.push.kind, payload: V.push.payload };
  const opened = openPushFrame(frame, [record()]);
  assert.deepEqual(opened.notice, JSON.parse(V.push.plaintext));
  assert.equal(opened.bridgeId, bridgeId);
  assert.equal(opened.counter, BigInt(V.push.counter));
});

test('a replayed counter, another device, a wrong key, a relabelled kind or a tampered payload is refused', () => {
  const frame = sealed(permission, 100n);
  assert.equal(openPushFrame(frame, [record(99n)]).counter, 100n);
  assert.throws(() => openPushFrame(frame, [record(100n)]), /not above the last accepted/);
  assert.throws(() => openPushFrame({ ...frame, device_id: 'dev_other' }, [record()]), /no key for device/);
  assert.throws(() => openPushFrame(frame, [{ ...record(), pushKey: c.b64url(new Uint8Array(32)) }]));
  assert.throws(() => openPushFrame({ ...frame, kind: 'turn_finished' }, [record()]));
  const bytes = c.fromB64(frame.payload);
  bytes[bytes.length - 1] ^= 1;
  assert.throws(() => openPushFrame({ ...frame, payload: c.b64(bytes) }, [record()]));
  assert.throws(() => openPushFrame({ type: 'block' }, [record()]), /not a push frame/);
});

test('the notification names the agent, the tool and the command, replaces by session and offers Allow/Deny', () => {
  const { title, options } = notificationOf(permission, bridgeId);
  assert.equal(title, 'claude asks to use Bash');
  assert.equal(options.body, 'Bash: rm -rf build');
  assert.equal(options.tag, 's-1');
  assert.equal(options.renotify, true);
  assert.deepEqual(options.actions.map((a) => a.action), ['allow', 'deny']);
  assert.deepEqual(intentOf(options.data, 'allow'), { bridge_id: bridgeId, session_id: 's-1', seq: 12, request_id: 'perm_1', option_id: 'allow' });
  assert.deepEqual(intentOf(options.data, ''), { bridge_id: bridgeId, session_id: 's-1', seq: 12, request_id: null, option_id: null });
  const finished = notificationOf({ session_id: 's-1', kind: 'turn_finished', title: 'claude: turn finished', body: '', agent: 'claude' }, bridgeId);
  assert.equal(finished.options.tag, 's-1');
  assert.deepEqual(finished.options.actions, []);
});

test("with several bridges paired, a push opens with its own bridge's record and names that bridge", () => {
  const otherId = 'brg_other';
  const otherKey = new Uint8Array(32).fill(7);
  const other = { bridgeId: otherId, deviceId, pushKey: c.b64url(otherKey), last: '0' };
  // The other bridge seals under its own key, bound to its own id.
  const sealer = new c.Sealer(otherKey, 'push', 5n);
  const payload = c.b64(sealer.seal(c.pushAad(otherId, deviceId, 'permission_needed'), c.utf8(JSON.stringify(permission))));
  const frame = { type: 'push', device_id: deviceId, kind: 'permission_needed', payload };
  const opened = openPushFrame(frame, [record(), other]);
  assert.equal(opened.bridgeId, otherId);
  assert.equal(opened.counter, 5n);
  assert.equal(notificationOf(opened.notice, opened.bridgeId).options.data.bridge_id, otherId);
  // The first bridge's push still opens with the first record, whatever the order.
  assert.equal(openPushFrame(sealed(permission, 100n), [other, record()]).bridgeId, bridgeId);
  // Another bridge's record does not open it: the associated data binds the bridge id.
  assert.throws(() => openPushFrame(frame, [record(), { ...other, bridgeId: bridgeId }]));
});
