// The pairing carried from the LAN page to the relay's page (web/src/carry.js): the
// link names the relay's page and round-trips the identity and the bridge's record;
// anything else in the fragment is refused. Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as c from '../src/crypto.js';
import { carryLink, parseCarried, relayPage } from '../src/carry.js';

const bridge = {
  bridgeId: 'brg_test',
  keys: { ed25519: 'x', x25519: 'y' },
  relay: 'wss://relay.example:8443',
  lan: 'ws://192.168.1.20:8478',
  pairedAt: 1767225600,
};

test("the relay's page is the relay's WebSocket origin as http(s)", () => {
  assert.equal(relayPage(bridge), 'https://relay.example:8443');
  assert.equal(relayPage({ relay: 'ws://127.0.0.1:9000/v1' }), 'http://127.0.0.1:9000');
  assert.equal(relayPage({ relay: 'javascript:alert(1)' }), null);
  assert.equal(relayPage({}), null);
});

test('a carry link round-trips the identity and the record', () => {
  const identity = c.generateIdentity();
  const href = carryLink(identity, bridge);
  assert.ok(href.startsWith('https://relay.example:8443/#carry='), href);
  const got = parseCarried(new URL(href).hash);
  assert.equal(c.deviceIdOf(got.identity.ed25519Public), c.deviceIdOf(identity.ed25519Public));
  assert.deepEqual(got.bridge, bridge);
});

test('a fragment that is not a carried pairing is refused or ignored', () => {
  assert.equal(parseCarried('#b=brg&s=s-1'), null);
  assert.throws(() => parseCarried('#carry=!!!'));
  assert.throws(() => parseCarried(`#carry=${c.b64url(new TextEncoder().encode('{"v":2}'))}`));
  assert.throws(() => parseCarried(`#carry=${'A'.repeat(9000)}`), /too long/);
});
