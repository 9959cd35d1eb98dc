// Several bridges in one page, in a real browser: Debian's Chromium driven by
// playwright-core at a phone-sized viewport (390x844), against two bridges on one
// relay. Pairs with both (the second pairing adds a bridge), starts a session on each,
// switches between them (each shows only its own sessions), sees the switcher count a
// permission request waiting on the bridge not shown, opens a session by its URL
// (`#b=…&s=…`) after a reload and by a hash change, then forgets one bridge: its keys
// leave the store, the other's stay, and it stays forgotten after a reload.
//
//   node web/test/browser-multi.mjs --link-a '<pairing link>' --link-b '<pairing link>' \
//        --screenshots <dir> --cwd <dir>
//
// Prints progress on stderr and one final JSON line on stdout:
// {"ok":true,"bridges":[a,b],"sessions":{"a":…,"b":…},"screenshots":[…]}
// Exit 0 on success; on failure prints what failed, saves fail.png, exits 1.

import { chromium } from 'playwright-core';
import { join } from 'node:path';
import { PhoneRun, T, sleep, waitFor, parseArgs, STEP_TIMEOUT } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
// Collected by `node --test web/test/`: this script needs running bridges, so there it only reports itself skipped.
const underTestRunner = Boolean(process.env.NODE_TEST_CONTEXT) && !args['link-a'];
if (underTestRunner) {
  const { test } = await import('node:test');
  test('several bridges in one page (run directly with --link-a/--link-b; bridge/tests/web_multi.rs does)', { skip: 'needs --link-a' }, () => {});
} else if (!args['link-a'] || !args['link-b'] || !args.screenshots || !args.cwd) {
  console.error("usage: node browser-multi.mjs --link-a '<link>' --link-b '<link>' --screenshots DIR --cwd DIR");
  process.exit(2);
}

const run = new PhoneRun('browser-multi', args.screenshots);
const log = (...m) => run.log(...m);
const shot = (name) => run.shot(name);
const step = (name, fn) => run.step(name, fn);
const { screenshots, pageErrors } = run;
let page = null;

const connected = () => waitFor('the link to the bridge shown', async () => (await page.getAttribute(T('connection-status'), 'data-state')) === 'connected');

/** The text blocks shown. */
const texts = () => page.$$eval(`${T('block')}[data-block-type="text"]`, (els) => els.map((e) => e.textContent));

async function pair(link) {
  await page.goto(link, { waitUntil: 'domcontentloaded' });
  await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
  await connected();
  return page.evaluate(() => window.terminull.bridgeId);
}

async function startSession(cwd) {
  await page.click(T('new-session'));
  await waitFor('the echo agent in the picker', () => page.$$eval(`${T('agent-picker')} option`, (os) => os.some((o) => o.value === 'echo')));
  await page.selectOption(T('agent-picker'), 'echo');
  await page.fill(T('cwd'), cwd);
  await page.click(T('start-session'));
  await page.waitForSelector(`${T('block')}[data-block-type="agent_info"]`, { timeout: STEP_TIMEOUT });
  return page.evaluate(() => window.terminull.current);
}

async function send(text) {
  await page.fill(T('composer'), text);
  await page.click(T('send'));
}

/** The session ids the home view lists. */
async function listed() {
  await page.waitForSelector(`${T('session-item')}, ${T('sessions-empty')}`, { timeout: STEP_TIMEOUT });
  return page.$$eval(T('session-item'), (els) => els.map((e) => e.dataset.sessionId));
}

async function openSwitcher() {
  await page.click(T('switcher'));
  await page.waitForSelector(`${T('bridge-sheet')}:not([hidden])`, { timeout: STEP_TIMEOUT });
}

const row = (id) => `${T('bridge-item')}[data-bridge-id="${id}"]`;

/** The store's keys, read in the page from IndexedDB. */
const storeKeys = () =>
  page.evaluate(
    () =>
      new Promise((resolve, reject) => {
        const req = indexedDB.open('terminull');
        req.onsuccess = () => {
          const get = req.result.transaction('kv', 'readonly').objectStore('kv').getAllKeys();
          get.onsuccess = () => resolve(get.result.map(String));
          get.onerror = () => reject(get.error);
        };
        req.onerror = () => reject(req.error);
      }),
  );

async function main() {
  page = await run.launch(chromium);
  page.on('dialog', (d) => d.accept('Desktop'));
  const origin = new URL(args['link-a']).origin;

  const a = await step('pair with the first bridge', () => pair(args['link-a']));
  await shot('01-paired-a.png');
  const sa = await step('a session on the first bridge', async () => {
    const sid = await startSession(join(args.cwd, 'a'));
    await send('hello from A');
    await waitFor('the reply on A', async () => (await texts()).some((t) => t.includes('You said: hello from A')));
    return sid;
  });
  await shot('02-session-a.png');

  const b = await step('pair with the second bridge: added, not replacing', async () => {
    const id = await pair(args['link-b']);
    if (id === a) throw new Error('the second link paired the same bridge');
    const ids = await page.evaluate(() => window.terminull.bridgeIds);
    if (JSON.stringify(ids) !== JSON.stringify([a, id])) throw new Error(`paired bridges ${ids}, expected [${a}, ${id}]`);
    if (await page.isHidden(T('switcher'))) throw new Error('the switcher is hidden with two bridges paired');
    return id;
  });
  await shot('03-paired-b.png');
  const sb = await step('a session on the second bridge asks for a permission', async () => {
    const listedB = await listed();
    if (listedB.includes(sa)) throw new Error(`the second bridge's list shows the first's session ${sa}`);
    const sid = await startSession(join(args.cwd, 'b'));
    await send('ask for permission please');
    await page.waitForSelector(`${T('permission-card')}[data-state="waiting"]`, { timeout: STEP_TIMEOUT });
    return sid;
  });
  await shot('04-permission-b.png');

  await step('the switcher lists both, online', async () => {
    await openSwitcher();
    await waitFor('both bridges online', async () => {
      const rows = await page.$$eval(T('bridge-item'), (els) => els.map((e) => [e.dataset.bridgeId, e.dataset.online]));
      return rows.length === 2 && rows.every(([, online]) => online === 'true');
    });
    const box = await page.locator(T('switcher')).boundingBox();
    if (box.height < 44 || box.width < 44) throw new Error(`the switcher is ${box.width}x${box.height}, under 44 px`);
    for (const sel of [`${row(a)} .bridge-main`, `${row(a)} ${T('bridge-forget')}`, T('pair-another')]) {
      const bb = await page.locator(sel).boundingBox();
      if (bb.height < 44) throw new Error(`${sel} is ${bb.height} px high, under 44`);
    }
  });
  await shot('05-switcher.png');

  await step('switch to the first bridge: only its sessions, and the other bridge waits for an answer', async () => {
    await page.click(`${row(a)} .bridge-main`);
    await page.waitForSelector(`${T('session-item')}[data-session-id="${sa}"]`, { timeout: STEP_TIMEOUT });
    const ids = await listed();
    if (ids.includes(sb)) throw new Error(`the first bridge's list shows the second's session ${sb}`);
    if (await page.isVisible(T('short-code'))) throw new Error('the second pairing’s short code shows on the first bridge');
    await waitFor('the attention count in the header', async () => (await page.textContent(T('switcher-attention'))) === '1' && (await page.isVisible(T('switcher-attention'))));
    const att = await page.evaluate((id) => window.terminull.attention(id), b);
    if (att.permissions !== 1) throw new Error(`attention of the second bridge ${JSON.stringify(att)}`);
  });
  await shot('06-bridge-a-attention.png');
  await step('the sheet names what waits where', async () => {
    await openSwitcher();
    const text = await page.textContent(`${row(b)} ${T('bridge-permissions')}`);
    if (!/1 waiting/.test(text)) throw new Error(`the second bridge's row says "${text}"`);
    if (await page.$(`${row(a)} ${T('bridge-permissions')}`)) throw new Error('the first bridge shows a waiting permission');
  });
  await shot('07-sheet-attention.png');

  await step('rename the first bridge on this phone', async () => {
    await page.click(`${row(a)} ${T('bridge-rename')}`);
    await waitFor('the new name', async () => (await page.textContent(`${row(a)} .bridge-name`)) === 'Desktop');
  });

  await step('back to the second bridge: answer, the count goes', async () => {
    await page.click(`${row(b)} .bridge-main`);
    await page.waitForSelector(`${T('session-item')}[data-session-id="${sb}"] ${T('session-waiting')}`, { timeout: STEP_TIMEOUT });
    await shot('07a-bridge-b-list.png');
    await page.click(`${T('session-item')}[data-session-id="${sb}"]`);
    await page.click(`${T('permission-option')}[data-option-id="allow"]`);
    await waitFor('the approved turn', async () => (await texts()).some((t) => t.includes('You said: ask for permission please')));
    const url = new URL(page.url());
    if (url.hash !== `#b=${encodeURIComponent(b)}&s=${encodeURIComponent(sb)}`) throw new Error(`the URL is ${page.url()}`);
    const att = await page.evaluate((id) => window.terminull.attention(id), b);
    if (att.permissions !== 0) throw new Error(`still counted: ${JSON.stringify(att)}`);
  });

  await step('a reload reopens the session the URL names', async () => {
    await page.evaluate(() => window.terminull.flush());
    await page.reload({ waitUntil: 'domcontentloaded' });
    await page.waitForSelector(`${T('block')}[data-block-type="agent_info"]`, { timeout: STEP_TIMEOUT });
    const cur = await page.evaluate(() => [window.terminull.bridgeId, window.terminull.current]);
    if (cur[0] !== b || cur[1] !== sb) throw new Error(`after the reload the page shows ${cur}`);
    await connected();
  });
  await shot('08-reloaded-b.png');

  await step('a link to the other bridge’s session opens it (hash change)', async () => {
    await page.goto(`${origin}/#b=${encodeURIComponent(a)}&s=${encodeURIComponent(sa)}`);
    await waitFor('session A shown', async () => (await page.evaluate(() => [window.terminull.bridgeId, window.terminull.current])).join() === [a, sa].join());
    await waitFor('its transcript', async () => (await texts()).some((t) => t.includes('You said: hello from A')));
    if ((await texts()).some((t) => t.includes('permission'))) throw new Error('session A shows the other bridge’s blocks');
  });
  await shot('09-deeplink-a.png');

  await step('a turn that ends on the bridge not shown is counted as finished', async () => {
    await send('slow one two three four five six seven eight');
    await waitFor('the slow turn under way', async () => (await texts()).some((t) => t.includes('You said: slow')));
    await openSwitcher();
    await page.click(`${row(b)} .bridge-main`);
    await waitFor('the finished turn counted on the first bridge', async () => (await page.evaluate((id) => window.terminull.attention(id), a)).unseen === 1);
    await waitFor('the header badge', async () => (await page.textContent(T('switcher-attention'))) === '1');
    await openSwitcher();
    const text = await page.textContent(`${row(a)} ${T('bridge-unseen')}`);
    if (!/1 finished/.test(text)) throw new Error(`the first bridge's row says "${text}"`);
  });
  await shot('09a-finished-elsewhere.png');

  await step('forget the second bridge: its keys go, the first’s stay', async () => {
    const before = await storeKeys();
    if (!before.some((k) => k.startsWith(`s:${b}:`))) throw new Error(`no stored session of the second bridge: ${before}`);
    // The sheet is open, on the second bridge (the one shown): forgetting it shows the first.
    await page.click(`${row(b)} ${T('bridge-forget')}`);
    await shot('10-forget-confirm.png');
    await page.click(`${row(b)} ${T('bridge-forget')}`);
    await waitFor('one bridge left', async () => (await page.evaluate(() => window.terminull.bridgeIds)).length === 1);
    const keys = await waitFor('the second bridge’s keys deleted', async () => {
      const k = await storeKeys();
      return k.some((x) => x.includes(b)) ? null : k;
    });
    if (!keys.includes(`s:${a}:${sa}`)) throw new Error(`the first bridge's session left the store: ${keys}`);
    const stored = await page.evaluate(() => new Promise((resolve) => {
      const req = indexedDB.open('terminull');
      req.onsuccess = () => {
        const get = req.result.transaction('kv', 'readonly').objectStore('kv').get('bridges');
        get.onsuccess = () => resolve(get.result.map((x) => x.bridgeId));
      };
    }));
    if (JSON.stringify(stored) !== JSON.stringify([a])) throw new Error(`stored bridges ${stored}`);
    await waitFor('the first bridge shown', async () => (await page.evaluate(() => window.terminull.bridgeId)) === a);
    if (await page.isVisible(T('bridge-sheet'))) throw new Error('the sheet stays open after the bridge shown was forgotten');
    await page.waitForSelector(`${T('session-item')}[data-session-id="${sa}"]`, { timeout: STEP_TIMEOUT });
  });
  await shot('11-forgot-b.png');

  await step('after a reload the second bridge stays forgotten', async () => {
    await page.goto(`${origin}/`, { waitUntil: 'domcontentloaded' });
    await page.reload({ waitUntil: 'domcontentloaded' });
    await connected();
    const ids = await page.evaluate(() => window.terminull.bridgeIds);
    if (JSON.stringify(ids) !== JSON.stringify([a])) throw new Error(`paired bridges after the reload ${ids}`);
    // The reload reopens the session shown before (A's); its list is one tap back.
    if (await page.isVisible('button.back')) await page.click('button.back');
    await page.waitForSelector(`${T('session-item')}[data-session-id="${sa}"]`, { timeout: STEP_TIMEOUT });
    const name = await page.textContent(T('switcher-name'));
    if (name !== 'Desktop') throw new Error(`the switcher names "${name}"`);
    await openSwitcher();
    const rows = await page.$$eval(T('bridge-item'), (els) => els.length);
    if (rows !== 1) throw new Error(`${rows} rows in the switcher`);
  });
  await shot('12-reloaded-one.png');

  if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.join(' | ')}`);
  const rejected = await page.evaluate(() => window.terminull.rejected);
  if (rejected) throw new Error(`the page refused ${rejected} message(s) from the network`);
  console.log(JSON.stringify({ ok: true, bridges: [a, b], sessions: { a: sa, b: sb }, screenshots }));
}

if (!underTestRunner) await run.finish(main);
