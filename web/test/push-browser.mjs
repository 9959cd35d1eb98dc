// Web Push end to end in a real browser (bridge/tests/web_push.rs runs it): Debian's
// Chromium at a phone viewport against a relay that serves the app. The script
// stands in for the browser's push service: the page's PushManager hands out a
// subscription whose keys this script holds, with its endpoint on a loopback server
// this script runs; the relay's encrypted POSTs land there, are checked for
// plaintext, decrypted (RFC 8291) and delivered to the service worker with CDP
// `ServiceWorker.deliverPushMessage`.
//
//   node web/test/push-browser.mjs --link '<pairing link>' [--link2 '<a second bridge's link>'] --screenshots DIR --cwd DIR
//
// It asks the test to act on the bridge through stdout lines `CMD {json}` (a message
// sent, a turn interrupted while no page is open; `bridge: 2` for the second bridge)
// and waits for `OK` on stdin.
// The final stdout line is the JSON report {"ok":true,"session_id":…,"secret":…}.

import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { createECDH, createHmac, createDecipheriv, randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sleep, T, waitFor } from './support/phone.mjs';

const args = {};
for (let i = 2; i < process.argv.length; i++) {
  if (process.argv[i].startsWith('--')) args[process.argv[i].slice(2)] = process.argv[++i];
}

function log(...m) {
  console.error('[push-browser]', ...m);
}
/** Decrypts an RFC 8291 (aes128gcm) body with the subscription's keys. */
export function decryptWebPush(body, ecdh, auth) {
  const salt = body.subarray(0, 16);
  const idlen = body[20];
  const senderPublic = body.subarray(21, 21 + idlen);
  const ciphertext = body.subarray(21 + idlen);
  const hmac = (key, data) => createHmac('sha256', key).update(data).digest();
  const shared = ecdh.computeSecret(senderPublic);
  const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), ecdh.getPublicKey(), senderPublic, Buffer.from([1])]);
  const ikm = hmac(hmac(auth, shared), keyInfo);
  const prk = hmac(salt, ikm);
  const cek = hmac(prk, Buffer.from('Content-Encoding: aes128gcm\0\x01')).subarray(0, 16);
  const nonce = hmac(prk, Buffer.from('Content-Encoding: nonce\0\x01')).subarray(0, 12);
  const decipher = createDecipheriv('aes-128-gcm', cek, nonce);
  decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
  const padded = Buffer.concat([decipher.update(ciphertext.subarray(0, ciphertext.length - 16)), decipher.final()]);
  let end = padded.length - 1;
  while (end >= 0 && padded[end] === 0) end--;
  if (padded[end] !== 2) throw new Error('no last-record delimiter');
  return padded.subarray(0, end).toString('utf8');
}

async function run() {
  const shotsDir = args.screenshots;
  mkdirSync(shotsDir, { recursive: true });
  const screenshots = [];
  const origin = new URL(args.link).origin;
  const secret = `/usr/bin/secret-command-${randomBytes(4).toString('hex')}`;

  // The push service stand-in: a loopback endpoint and a subscription's keys.
  const captured = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      captured.push({ path: req.url, headers: req.headers, body: Buffer.concat(chunks) });
      log(`push service: ${req.method} ${req.url} ${Buffer.concat(chunks).length} bytes, urgency ${req.headers.urgency}`);
      res.writeHead(201).end();
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const endpoint = `http://127.0.0.1:${server.address().port}/push/test-subscription`;
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const auth = randomBytes(16);
  const sub = { endpoint, p256dh: ecdh.getPublicKey().toString('base64url'), auth: auth.toString('base64url') };

  const stdin = createInterface({ input: process.stdin });
  const answers = stdin[Symbol.asyncIterator]();
  async function ask(cmd) {
    console.log(`CMD ${JSON.stringify(cmd)}`);
    const { value } = await answers.next();
    if (value?.trim() !== 'OK') throw new Error(`the test answered ${value} to ${JSON.stringify(cmd)}`);
  }

  const userDataDir = mkdtempSync(join(tmpdir(), 'terminull-chromium-push-'));
  let context;
  let page;
  let code = 0;
  const shot = async (p, name) => {
    const file = join(shotsDir, name);
    await p.screenshot({ path: file });
    screenshots.push(file);
    log(`screenshot ${name}`);
  };
  try {
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 2,
      isMobile: true,
      hasTouch: true,
    });
    await context.grantPermissions(['notifications'], { origin });
    // Headless Chromium has no push service offline: the page gets our subscription.
    await context.addInitScript((s) => {
      if (!globalThis.PushManager) return;
      const buf = (t) => Uint8Array.from(atob(t.replace(/-/g, '+').replace(/_/g, '/')), (ch) => ch.charCodeAt(0)).buffer;
      // A real browser keeps the subscription across pages: so does the stand-in.
      const KEPT = 'terminull-test-subscription';
      const kept = () => {
        try {
          return localStorage.getItem(KEPT) === '1';
        } catch {
          return false;
        }
      };
      const keep = (on) => {
        try {
          if (on) localStorage.setItem(KEPT, '1');
          else localStorage.removeItem(KEPT);
        } catch {
          /* no storage here */
        }
      };
      let current = null;
      const make = () => ({
        endpoint: s.endpoint,
        expirationTime: null,
        options: { userVisibleOnly: true },
        getKey: (n) => buf(n === 'p256dh' ? s.p256dh : s.auth),
        toJSON: () => ({ endpoint: s.endpoint, expirationTime: null, keys: { p256dh: s.p256dh, auth: s.auth } }),
        unsubscribe: async () => {
          current = null;
          keep(false);
          return true;
        },
      });
      PushManager.prototype.subscribe = async function subscribe() {
        current = make();
        keep(true);
        return current;
      };
      PushManager.prototype.getSubscription = async function getSubscription() {
        if (!current && kept()) current = make();
        return current;
      };
    }, sub);
    page = context.pages()[0] ?? (await context.newPage());
    page.on('console', (m) => m.type() === 'error' && log(`console.error: ${m.text()}`));

    // Pair, turn notifications on.
    await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: 30_000 });
    await page.click(T('notify-switch'));
    await page.waitForSelector(`${T('notifications')}[data-state="on"]`, { timeout: 30_000 });
    const msg = await page.textContent(T('notify-msg'));
    if (/could not/.test(msg)) throw new Error(`notifications: ${msg}`);
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    await shot(page, '01-notifications-on.png');

    // A session; a permission request while it is visible: no push at all.
    await page.click(T('new-session'));
    await waitFor('the echo agent', () => page.$$eval(`${T('agent-picker')} option`, (os) => os.some((o) => o.value === 'echo')));
    await page.selectOption(T('agent-picker'), 'echo');
    await page.fill(T('cwd'), args.cwd);
    await page.click(T('start-session'));
    await page.waitForSelector(`${T('block')}[data-block-type="agent_info"]`, { timeout: 30_000 });
    const sessionId = await page.evaluate(() => window.terminull.current);
    await sleep(1500); // the presence report reaches the bridge
    await page.fill(T('composer'), 'ask while you look');
    await page.click(T('send'));
    await page.waitForSelector(T('permission-card'), { timeout: 30_000 });
    await sleep(2000);
    const socketPushes = await page.evaluate(() => globalThis.terminullPush.socketPushes);
    const shownWhileVisible = await page.evaluate(async () => (await (await navigator.serviceWorker.getRegistration('/')).getNotifications()).length);
    if (captured.length || socketPushes || shownWhileVisible) {
      throw new Error(`a push while the session was visible: ${captured.length} Web Push, ${socketPushes} on the socket, ${shownWhileVisible} shown`);
    }
    await shot(page, '02-visible-no-notification.png');
    await page.click(`${T('permission-option')}[data-option-id="allow"]`);
    await waitFor('the first turn to end', () => page.$$eval(`${T('block')}[data-block-type="session_end"]`, (e) => e.length >= 1));
    log('no push while the session was visible');

    // The page closes: the session's events become Web Pushes.
    await page.close();
    const side = await context.newPage();
    await side.goto(`${origin}/style.css`); // same origin, no app: reads the worker's notifications
    await sleep(1500);
    const cdp = await context.newCDPSession(side);
    const registrations = [];
    cdp.on('ServiceWorker.workerRegistrationUpdated', (e) => registrations.push(...e.registrations));
    await cdp.send('ServiceWorker.enable');
    const reg = await waitFor('the worker registration', () => registrations.find((r) => !r.isDeleted && r.scopeURL.startsWith(origin)));
    const notifications = () =>
      side.evaluate(async () =>
        (await (await navigator.serviceWorker.getRegistration('/')).getNotifications()).map((n) => ({
          title: n.title,
          body: n.body,
          tag: n.tag,
          data: n.data,
          actions: (n.actions ?? []).map((a) => a.action),
        })),
      );
    const deliver = async (i) => {
      const raw = captured[i].body;
      if (raw.includes(Buffer.from(secret)) || raw.includes(Buffer.from('ask'))) throw new Error('the encrypted push carries plaintext');
      const frame = decryptWebPush(raw, ecdh, auth);
      if (frame.includes(secret)) throw new Error('the push frame carries the command in the clear');
      const parsed = JSON.parse(frame);
      log(`push ${i}: kind ${parsed.kind}, ${raw.length} bytes on the wire`);
      await cdp.send('ServiceWorker.deliverPushMessage', { origin, registrationId: reg.registrationId, data: frame });
      return parsed;
    };

    // Two events of one session: one notification, replaced.
    await ask({ cmd: 'send', session_id: sessionId, text: 'ask first event' });
    await waitFor('the first Web Push', () => captured.length >= 1);
    await ask({ cmd: 'interrupt', session_id: sessionId });
    await waitFor('the second Web Push', () => captured.length >= 2);
    const first = await deliver(0);
    await waitFor('the first notification', async () => (await notifications()).length === 1);
    const second = await deliver(1);
    const replaced = await waitFor('the replacing notification', async () => {
      const ns = await notifications();
      return ns.length === 1 && ns[0].data.kind === second.kind ? ns : null;
    });
    if (first.kind !== 'permission_needed' || second.kind !== 'turn_finished') throw new Error(`kinds ${first.kind}, ${second.kind}`);
    await sleep(500);
    if ((await notifications()).length !== 1) throw new Error('two notifications for one session');
    log(`two events, one notification: ${JSON.stringify(replaced[0].title)}`);

    // The permission request with the command.
    await ask({ cmd: 'send', session_id: sessionId, text: `ask ${secret}` });
    await waitFor('the third Web Push', () => captured.length >= 3);
    if (captured[2].headers.urgency !== 'high') throw new Error(`urgency ${captured[2].headers.urgency}`);
    await deliver(2);
    const shown = await waitFor('the permission notification', async () => {
      const ns = await notifications();
      return ns.length === 1 && ns[0].data.kind === 'permission_needed' ? ns[0] : null;
    });
    if (!shown.title.includes('echo') || !shown.body.includes('echo') || !shown.body.includes(secret)) {
      throw new Error(`the notification lacks the agent, the tool or the command: ${JSON.stringify(shown)}`);
    }
    if (shown.tag !== sessionId) throw new Error(`tag ${shown.tag}, session ${sessionId}`);
    if (shown.actions.join() !== 'allow,deny') throw new Error(`actions ${shown.actions}`);
    const card = await context.newPage();
    await card.setContent(
      `<body style="font:15px system-ui;background:#222;margin:0;padding:16px"><div style="background:#fff;border-radius:14px;padding:14px">
      <div style="font-size:12px;color:#666">terminull · notification read from the service worker</div>
      <b>${shown.title}</b><div style="white-space:pre-wrap;margin:6px 0">${shown.body}</div>
      <div style="font-size:12px;color:#666">tag ${shown.tag}</div>
      <div style="display:flex;gap:16px;margin-top:8px;color:#1a73e8">${shown.actions.map((a) => `<span>${a}</span>`).join('')}</div></div></body>`,
    );
    await shot(card, '03-notification.png');
    await card.close();

    // Tap Allow: the worker hands the intent to the open app, which opens the session
    // and sends the signed answer.
    await side.goto(`${origin}/`);
    await side.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: 30_000 });
    await shot(side, '04-before-tap.png');
    const worker = context.serviceWorkers().find((w) => w.url().endsWith('/sw.js')) ?? (await context.waitForEvent('serviceworker'));
    await worker.evaluate(async () => {
      const [n] = await self.registration.getNotifications();
      self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n, action: 'allow' }));
    });
    await waitFor('the session opened by the tap', async () => (await side.evaluate(() => window.terminull.current)) === sessionId);
    await waitFor('the allowed tool to run', () =>
      side.$$eval(T('block'), (els, s) => els.some((e) => e.dataset.blockType === 'text' && e.textContent.includes(`You said: ask ${s}`)), secret),
    );
    await shot(side, '05-tapped-allow.png');

    if (args.link2) {
      // A second computer paired in the same page while notifications are on: its
      // first link registers it at the relay and writes its own worker record; its
      // push opens with that record, and a tap opens that computer's session.
      const firstBridge = await side.evaluate(() => window.terminull.bridgeId);
      await side.goto(args.link2, { waitUntil: 'domcontentloaded' });
      await side.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: 30_000 });
      const secondBridge = await side.evaluate(() => window.terminull.bridgeId);
      if (!secondBridge || secondBridge === firstBridge) throw new Error(`second bridge ${secondBridge}`);
      const records = await waitFor('one worker record per bridge', async () => {
        const ids = await side.evaluate(
          () =>
            new Promise((resolve) => {
              const req = indexedDB.open('terminull-sw-push');
              req.onsuccess = () => {
                const all = req.result.transaction('bridges').objectStore('bridges').getAllKeys();
                all.onsuccess = () => resolve(all.result);
                all.onerror = () => resolve([]);
              };
              req.onerror = () => resolve([]);
            }),
        );
        return ids.length === 2 && ids.includes(firstBridge) && ids.includes(secondBridge) ? ids : null;
      });
      log(`worker records: ${records.join(', ')}`);
      await side.click(T('new-session'));
      await waitFor('the echo agent on the second computer', () => side.$$eval(`${T('agent-picker')} option`, (os) => os.some((o) => o.value === 'echo')));
      await side.selectOption(T('agent-picker'), 'echo');
      await side.fill(T('cwd'), args.cwd);
      await side.click(T('start-session'));
      await side.waitForSelector(`${T('block')}[data-block-type="agent_info"]`, { timeout: 30_000 });
      const secondSession = await side.evaluate(() => window.terminull.current);
      await shot(side, '06-second-computer.png');
      // Away from the app: the second computer's request is a Web Push.
      await side.goto(`${origin}/style.css`);
      await sleep(1500);
      const before = captured.length;
      await ask({ cmd: 'send', bridge: 2, session_id: secondSession, text: 'ask second computer' });
      await waitFor('the second computer\'s Web Push', () => captured.length > before);
      // Deliver every push captured since, as they come: another push (the first
      // computer's) may be captured first.
      let delivered = before;
      // 60 s: one full CI run, at load, timed out here after 30 s with the push delivered;
      // the error now says what the worker showed instead.
      const shown2 = await waitFor('the second computer\'s notification', async () => {
        while (delivered < captured.length) await deliver(delivered++);
        return (await notifications()).find((n) => n.tag === secondSession);
      }, 60_000).catch(async (e) => {
        const shown = (await notifications()).map((n) => `${n.tag}: ${n.title} / ${n.body}`);
        throw new Error(`${e.message}; ${captured.length} pushes captured, ${delivered} delivered; the worker shows ${JSON.stringify(shown)}`);
      });
      if (shown2.data.bridge_id !== secondBridge) throw new Error(`the notification names bridge ${shown2.data.bridge_id}, not ${secondBridge}`);
      // The app opens on the first computer; the tap shows the second and its session.
      await side.goto(`${origin}/#b=${encodeURIComponent(firstBridge)}&s=${encodeURIComponent(sessionId)}`);
      await side.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: 30_000 });
      const worker2 = context.serviceWorkers().find((w) => w.url().endsWith('/sw.js'));
      await worker2.evaluate(async (sid) => {
        const n = (await self.registration.getNotifications()).find((x) => x.tag === sid);
        self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n, action: 'allow' }));
      }, secondSession);
      await waitFor('the second computer\'s session opened by the tap', async () =>
        side.evaluate(([b, s]) => window.terminull.bridgeId === b && window.terminull.current === s, [secondBridge, secondSession]),
      );
      await waitFor('the tool allowed on the second computer', () =>
        side.$$eval(T('block'), (els) => els.some((e) => e.dataset.blockType === 'text' && e.textContent.includes('You said: ask second computer'))),
      );
      await shot(side, '07-second-computer-tapped.png');
      log('a second computer: its own record, its push opened, the tap opened its session and answered on its link');
    }
    console.log(JSON.stringify({ ok: true, session_id: sessionId, secret, pushes: captured.length, screenshots }));
  } catch (e) {
    code = 1;
    console.error(`FAILED: ${e.stack ?? e}`);
    for (const p of context?.pages() ?? []) await p.screenshot({ path: join(shotsDir, `fail-${screenshots.length}.png`) }).catch(() => {});
    console.log(JSON.stringify({ ok: false, error: String(e.message ?? e), screenshots }));
  } finally {
    await context?.close().catch(() => {});
    rmSync(userDataDir, { recursive: true, force: true });
    server.close();
    stdin.close();
  }
  process.exit(code);
}

if (process.env.NODE_TEST_CONTEXT && !args.link) {
  const { test } = await import('node:test');
  test('Web Push end-to-end (run by bridge/tests/web_push.rs)', { skip: 'needs --link' }, () => {});
} else {
  await run();
}
