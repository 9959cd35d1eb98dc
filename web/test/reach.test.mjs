// Which paired bridges a page can reach (web/src/connection.js, markReachable): the
// relay's page every one, a LAN page only the bridge whose server it is. Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';

globalThis.location = { host: '192.168.1.20:7878', protocol: 'http:' };
const { app, BridgeCtx } = await import('../src/state.js');
const { markReachable } = await import('../src/connection.js');

function pairedWith(...lans) {
  app.bridges = new Map();
  lans.forEach((lan, i) => app.bridges.set(`brg_${i}`, new BridgeCtx({ bridgeId: `brg_${i}`, keys: {}, lan })));
  app.activeId = 'brg_0';
  return [...app.bridges.values()];
}

test("a LAN page reaches its own bridge only and says why not the others", () => {
  app.serverKind = 'lan';
  const [laptop, desktop] = pairedWith('ws://192.168.1.20:7878/v1/client', 'ws://192.168.1.30:7878/v1/client');
  markReachable();
  assert.equal(laptop.reachable, true);
  assert.equal(desktop.reachable, false);
  assert.match(desktop.unreachable, /another computer’s LAN server/);
  assert.equal(desktop.connLabel, 'other LAN');
});

test("the relay's page reaches every bridge; a LAN page with one bridge under another address reaches it", () => {
  app.serverKind = 'relay';
  let all = pairedWith('ws://192.168.1.20:7878/v1/client', null);
  markReachable();
  assert.ok(all.every((c) => c.reachable));
  app.serverKind = 'lan';
  all = pairedWith('ws://laptop.local:7878/v1/client');
  markReachable();
  assert.equal(all[0].reachable, true);
});
