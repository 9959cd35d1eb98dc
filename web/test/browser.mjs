// The phone app in a real browser: Debian's Chromium driven by playwright-core at a
// phone-sized viewport. Pairs by opening the QR link, runs echo turns (a reply, a
// permission approved on its card, an interrupted turn), reloads mid-stream and
// checks that the page then shows every block of the session exactly once
// (superseded chunks of a streamed id excepted), against the bridge's own history
// fetched on a second link of the same device.
//
//   node web/test/browser.mjs --link '<pairing link URL>' --expect-path lan|relay \
//        --screenshots <dir> [--cwd <dir>]
//
// Prints progress on stderr and one final JSON line on stdout:
// {"ok":true,"session_id":…,"seqs":[…],"short_code":…,"path":…,"screenshots":[…]}
// Exit 0 on success; on failure prints what failed, saves fail.png, exits 1.

import { chromium } from 'playwright-core';
import WebSocket from 'ws';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as c from '../src/crypto.js';
import { openLink } from '../src/link.js';
import { Transcript, displayKey } from '../src/transcript.js';
import { CHROMIUM_ARGS, STEP_TIMEOUT, parseArgs, sleep, T, waitFor } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
// Collected by `node --test web/test/`: this script needs a running bridge, so there
// it only reports itself skipped.
const underTestRunner = Boolean(process.env.NODE_TEST_CONTEXT) && !args.link;
if (underTestRunner) {
  const { test } = await import('node:test');
  test('browser end-to-end (run directly with --link; bridge/tests/web_client.rs does)', { skip: 'needs --link' }, () => {});
} else if (!args.link || !args['expect-path'] || !args.screenshots) {
  console.error("usage: node browser.mjs --link '<pairing link>' --expect-path lan|relay --screenshots DIR [--cwd DIR]");
  process.exit(2);
}
const expectPath = args['expect-path'];
if (!underTestRunner && !['lan', 'relay'].includes(expectPath)) {
  console.error('--expect-path must be lan or relay');
  process.exit(2);
}
const shotsDir = args.screenshots;
if (!underTestRunner) mkdirSync(shotsDir, { recursive: true });
const ownCwd = !args.cwd && !underTestRunner;
const cwd = args.cwd ?? (ownCwd ? mkdtempSync(join(tmpdir(), 'terminull-web-cwd-')) : null);
const log = (...m) => console.error('[browser]', ...m);
const SLOW_WORDS = [
  'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten',
  'eleven', 'twelve', 'thirteen', 'fourteen', 'fifteen', 'sixteen', 'seventeen', 'eighteen', 'nineteen', 'twenty',
  'twentyone', 'twentytwo', 'twentythree', 'twentyfour', 'twentyfive', 'twentysix', 'twentyseven', 'twentyeight', 'twentynine', 'thirty',
  'thirtyone', 'thirtytwo', 'thirtythree', 'thirtyfour', 'thirtyfive', 'thirtysix', 'thirtyseven', 'thirtyeight', 'thirtynine', 'forty',
];

const screenshots = [];
let page = null;
let context = null;
let userDataDir = null;
const pageErrors = [];

async function shot(name) {
  const file = join(shotsDir, name);
  await page.screenshot({ path: file, fullPage: false });
  screenshots.push(file);
  log(`screenshot ${name}`);
}

async function step(name, fn) {
  log(`step: ${name}`);
  try {
    return await fn();
  } catch (e) {
    e.message = `${name}: ${e.message}`;
    throw e;
  }
}

/** The rendered blocks: [{seq, type, text, reason}]. */
function renderedBlocks() {
  return page.$$eval(T('block'), (els) =>
    els.map((el) => ({
      seq: Number(el.dataset.seq),
      type: el.dataset.blockType,
      text: el.textContent,
      reason: el.dataset.reason ?? null,
      streaming: el.classList.contains('streaming'),
    })),
  );
}

async function ends() {
  return (await renderedBlocks()).filter((b) => b.type === 'session_end');
}

async function waitTurnEnd(n, reason) {
  return waitFor(`turn ${n} to end${reason ? ` (${reason})` : ''}`, async () => {
    const e = await ends();
    return e.length >= n && (!reason || e[n - 1].reason === reason) ? e : null;
  });
}

async function waitText(needle, { done = true } = {}) {
  return waitFor(`a text block "${needle}"${done ? ' (done)' : ''}`, async () =>
    (await renderedBlocks()).find((b) => b.type === 'text' && b.text.includes(needle) && (!done || !b.streaming)),
  );
}

async function send(text) {
  await page.fill(T('composer'), text);
  await page.click(T('send'));
}

async function waitConnected() {
  await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: STEP_TIMEOUT });
}

/** The bridge's history of the session, through a second link of the same device. */
async function bridgeHistory(sessionId, bridge, identitySecrets, origin) {
  const identity = c.identityFromSecrets(identitySecrets);
  const transcript = new Transcript();
  let replayDone = false;
  const url = `${origin.replace(/^http/, 'ws')}/v1/client`;
  const link = await openLink({
    url,
    identity,
    bridge: { bridgeId: bridge.bridgeId, keys: bridge.keys },
    direct: expectPath === 'lan',
    WebSocket,
    onBlock: (sid, block) => sid === sessionId && transcript.apply(block),
    onReplayDone: (sid) => {
      if (sid === sessionId) replayDone = true;
    },
    onReject: (r) => log(`history link refused: ${r}`),
  });
  try {
    await link.request({ type: 'session_resume', session_id: sessionId, since_seq: 0 });
    await waitFor('the history replay', async () => replayDone);
    await sleep(500);
    const listing = await link.request({ type: 'list_sessions' });
    const entry = (listing.sessions ?? []).find((s) => s.session_id === sessionId);
    return { transcript, lastSeq: entry?.last_seq ?? null };
  } finally {
    link.close();
  }
}

/**
 * The page holds every block of the history once, except chunks superseded by a
 * later block of the same id (bridge/tests/support/remote.rs `assert_complete`);
 * the page's tool-call cards also show a tool_call's later status in place of the
 * earlier one, so the same id rule covers them.
 */
function checkComplete(rendered, history) {
  const seqs = rendered.map((b) => b.seq);
  const dup = seqs.filter((s, i) => seqs.indexOf(s) !== i);
  if (dup.length) throw new Error(`the page shows seqs twice: ${dup}`);
  if (seqs.some((s) => !Number.isSafeInteger(s))) throw new Error(`a rendered block has no seq: ${JSON.stringify(rendered)}`);
  const held = new Set(seqs);
  const blocks = history.blocks();
  const known = new Set(blocks.map((b) => b.seq));
  const unknown = seqs.filter((s) => !known.has(s));
  if (unknown.length) throw new Error(`the page shows seqs the bridge never sent: ${unknown}`);
  blocks.forEach((b, i) => {
    if (held.has(b.seq)) return;
    const key = displayKey(b);
    const superseded = key != null && blocks.slice(i + 1).some((later) => displayKey(later) === key && held.has(later.seq));
    if (!superseded) throw new Error(`the page lost seq ${b.seq} (${b.type}); it shows ${[...held].sort((x, y) => x - y)}`);
  });
  const expected = history.entries(displayKey).map((b) => `${b.seq}:${b.type}`);
  const shown = [...rendered].sort((a, b) => a.seq - b.seq).map((b) => `${b.seq}:${b.type}`);
  if (JSON.stringify(expected) !== JSON.stringify(shown)) {
    throw new Error(`the page's entries differ from the history's:\n page    ${shown}\n history ${expected}`);
  }
}

async function main() {
  userDataDir = mkdtempSync(join(tmpdir(), 'terminull-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
    userAgent:
      'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/148.0.0.0 Mobile Safari/537.36',
  });
  page = context.pages()[0] ?? (await context.newPage());
  page.on('pageerror', (e) => {
    pageErrors.push(String(e));
    log(`page error: ${e}`);
  });
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') log(`console.${m.type()}: ${m.text()}`);
  });
  const origin = new URL(args.link).origin;

  const shortCode = await step('pair by opening the link', async () => {
    const response = await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    // The page may talk to its own origin only (docs/web-client.md): no `ws:`/`wss:` to any host.
    const csp = (await response.allHeaders())['content-security-policy'] ?? '';
    const connect = csp.split(';').map((d) => d.trim()).find((d) => d.startsWith('connect-src')) ?? '';
    if (connect !== "connect-src 'self'") throw new Error(`the page's CSP says "${connect}" (all: ${csp})`);
    const el = await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
    const code = (await el.textContent()).trim();
    if (!/^\d{3} \d{3}$/.test(code)) throw new Error(`the short code is "${code}"`);
    const url = page.url();
    if (url.includes('#') || url.includes('s=')) throw new Error(`the fragment was not cleared: ${url}`);
    log(`short code ${code}`);
    return code;
  });
  await waitConnected();
  const path = await step('the path shown', async () => {
    const text = (await page.textContent(T('path'))).trim();
    const want = expectPath === 'lan' ? 'LAN' : 'via relay';
    if (text !== want) throw new Error(`the page shows path "${text}", expected "${want}"`);
    return expectPath;
  });
  await shot('01-paired.png');

  await step('start an echo session', async () => {
    await page.click(T('new-session'));
    await waitFor('the echo agent in the picker', () =>
      page.$$eval(`${T('agent-picker')} option`, (os) => os.some((o) => o.value === 'echo')),
    );
    await page.selectOption(T('agent-picker'), 'echo');
    await page.fill(T('cwd'), cwd);
    await shot('01a-new-session.png');
    await page.click(T('start-session'));
    await page.waitForSelector(`${T('block')}[data-block-type="agent_info"]`, { timeout: STEP_TIMEOUT });
  });
  const sessionId = await page.evaluate(() => window.terminull.current);
  if (!sessionId) throw new Error('no current session id on the page');
  log(`session ${sessionId}`);

  await step('a turn', async () => {
    await send('hello from the phone');
    await waitText('You said: hello from the phone');
    await waitTurnEnd(1, 'completed');
    const user = (await renderedBlocks()).find((b) => b.type === 'user_message');
    if (!user || !user.text.includes('hello from the phone')) throw new Error('the user message is not shown');
  });
  await shot('02-turn.png');

  await step('a permission request, approved on its card', async () => {
    await send('ask for permission please');
    const card = await page.waitForSelector(T('permission-card'), { timeout: STEP_TIMEOUT });
    const options = await card.$$eval(T('permission-option'), (os) => os.map((o) => o.dataset.optionId));
    if (!options.includes('allow') || !options.includes('deny')) throw new Error(`options offered: ${options}`);
    await shot('03-permission.png');
    await page.click(`${T('permission-option')}[data-option-id="allow"]`);
    await waitText('You said: ask for permission please');
    await waitTurnEnd(2, 'completed');
  });
  await shot('04-approved.png');

  await step('a long turn, stopped', async () => {
    await send(`slow ${SLOW_WORDS.join(' ')}`);
    await waitText('You said: slow one two', { done: false });
    const stop = await page.waitForSelector(`${T('stop')}:not([hidden])`, { timeout: STEP_TIMEOUT });
    await stop.click();
    await waitTurnEnd(3, 'interrupted');
    const text = (await renderedBlocks()).filter((b) => b.type === 'text').pop();
    if (text.text.includes('forty')) throw new Error('the turn ran to its end: the stop did nothing');
    if (await page.isVisible(T('stop'))) throw new Error('the stop button is still shown after the turn ended');
  });
  await shot('05-interrupted.png');

  await step('a long turn, the page reloaded mid-stream', async () => {
    await send(`slow ${SLOW_WORDS.map((w) => `${w}x`).join(' ')}`);
    await waitText('You said: slow onex twox threex', { done: false });
    await page.evaluate(() => window.terminull.flush());
    await page.reload({ waitUntil: 'domcontentloaded' });
    await page.waitForSelector(T('composer'), { state: 'visible', timeout: STEP_TIMEOUT });
    await waitConnected();
    const after = await page.evaluate(() => window.terminull.current);
    if (after !== sessionId) throw new Error(`after the reload the page shows session ${after}`);
    await waitFor('the stream to go on after the reload', async () =>
      (await renderedBlocks()).some((b) => b.type === 'text' && b.text.includes('You said: slow onex')),
    );
    await shot('06-reloaded.png');
    await waitText('fortyx');
    await waitTurnEnd(4, 'completed');
  });
  await shot('07-complete.png');

  await step('a message sent while a turn runs is queued, then sent', async () => {
    await send('slow alpha beta gamma delta epsilon zeta');
    await waitText('You said: slow alpha', { done: false });
    await send('queued message');
    await page.waitForSelector(`${T('queued')}:not([hidden])`, { timeout: STEP_TIMEOUT });
    await shot('08-queued.png');
    await waitTurnEnd(5, 'completed');
    await waitText('You said: queued message');
    await waitTurnEnd(6, 'completed');
    if (await page.isVisible(T('queued'))) throw new Error('the queue indicator is still shown');
  });

  await step('the connection drops mid-stream and the page reconnects', async () => {
    await send(`slow ${SLOW_WORDS.slice(0, 20).map((w) => `${w}y`).join(' ')}`);
    await waitText('You said: slow oney twoy', { done: false });
    await page.evaluate(() => window.terminull.dropConnection());
    await waitFor('the page to notice the drop', async () =>
      (await page.getAttribute(T('connection-status'), 'data-state')) !== 'connected',
    ).catch(() => log('the reconnect was too quick to observe'));
    await waitConnected();
    await waitText('twentyy');
    await waitTurnEnd(7, 'completed');
  });
  await shot('09-reconnected.png');

  await step('the slash palette and a bridge command', async () => {
    await page.fill(T('composer'), '/');
    await page.dispatchEvent(T('composer'), 'input');
    await page.waitForSelector(`${T('slash-command')}[data-command="help"]`, { timeout: STEP_TIMEOUT });
    await shot('10-slash.png');
    await page.click(`${T('slash-command')}[data-command="status"]`);
    await page.click(T('send'));
    await waitFor('the /status output', async () => {
      const notes = await page.$$eval(T('note'), (ns) => ns.map((n) => n.textContent));
      return notes.some((n) => n.includes('agent echo'));
    });
  });

  const rendered = await renderedBlocks();
  const { history, lastSeq } = await step("compare with the bridge's history", async () => {
    const identitySecrets = await page.evaluate(
      () =>
        new Promise((resolve, reject) => {
          const req = indexedDB.open('terminull');
          req.onerror = () => reject(req.error);
          req.onsuccess = () => {
            const tx = req.result.transaction('kv', 'readonly');
            const store = tx.objectStore('kv');
            const out = {};
            const a = store.get('identity');
            // Several bridges (web/src/bridges.js): the records under `bridges`; this test pairs one.
            const b = store.get('bridges');
            a.onsuccess = () => (out.identity = a.result);
            b.onsuccess = () => (out.bridge = Array.isArray(b.result) ? b.result[0] : undefined);
            tx.oncomplete = () => resolve(out);
            tx.onerror = () => reject(tx.error);
          };
        }),
    );
    if (!identitySecrets.identity || !identitySecrets.bridge) throw new Error('the identity is not in IndexedDB');
    const got = await bridgeHistory(sessionId, identitySecrets.bridge, identitySecrets.identity, origin);
    checkComplete(rendered, got.transcript);
    const maxShown = Math.max(...rendered.map((b) => b.seq));
    if (got.lastSeq != null && got.lastSeq !== maxShown) {
      throw new Error(`list_sessions says last_seq ${got.lastSeq}, the page's newest is ${maxShown}`);
    }
    return { history: got.transcript, lastSeq: got.lastSeq };
  });
  log(`history seqs ${history.seqs()}; last_seq ${lastSeq}`);

  await step('the session is listed', async () => {
    await page.click('button.back');
    await page.waitForSelector(`${T('session-item')}[data-session-id="${sessionId}"]`, { timeout: STEP_TIMEOUT });
  });
  await shot('11-sessions.png');

  await step('the pairing link opened again says to pair again', async () => {
    await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    await waitFor('the refusal', async () => /Pairing failed/.test((await page.textContent('.pair-msg').catch(() => '')) ?? ''));
    const said = await page.textContent('.pair-msg');
    if (!said.includes('Run `terminull pair` on the computer again')) throw new Error(`a reused link says "${said}"`);
  });
  await shot('12-link-reused.png');

  const rejected = await page.evaluate(() => window.terminull.rejected);
  if (rejected) throw new Error(`the page refused ${rejected} message(s) from the network`);
  if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.join(' | ')}`);

  const seqs = rendered.map((b) => b.seq).sort((a, b) => a - b);
  console.log(JSON.stringify({ ok: true, session_id: sessionId, seqs, short_code: shortCode, path, screenshots }));
}

async function run() {
  let code = 0;
  try {
    await main();
  } catch (e) {
    code = 1;
    console.error(`FAILED: ${e.stack ?? e}`);
    if (page) {
      try {
        const file = join(shotsDir, 'fail.png');
        await page.screenshot({ path: file });
        screenshots.push(file);
        console.error(`screenshot ${file}`);
        const blocks = await renderedBlocks().catch(() => []);
        console.error(`rendered blocks: ${JSON.stringify(blocks.map((b) => [b.seq, b.type, b.reason]))}`);
      } catch {
        /* the page is gone */
      }
    }
    console.log(JSON.stringify({ ok: false, error: String(e.message ?? e), screenshots }));
  } finally {
    await context?.close().catch(() => {});
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
    if (ownCwd) rmSync(cwd, { recursive: true, force: true });
  }
  process.exit(code);
}

if (!underTestRunner) await run();
