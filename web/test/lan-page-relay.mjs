// One pairing, both paths, from the bridge's own http LAN page: Debian's Chromium at a
// phone's size pairs on the LAN page with a link that names the bridge's relay too,
// and runs a slow echo turn on the LAN; the test (bridge/tests/web_lan_page_relay.rs)
// stops the LAN server mid-turn and starts it again. The page must say "LAN", then
// "via relay" (the same device, no second pairing: the relay its pairing named), then
// "LAN" again, with every block once.
//
//   node web/test/lan-page-relay.mjs --link '<http pairing link>' --screenshots DIR --cwd DIR
//
// Talks to the test over stdio: prints `{"event":"stop-lan"}` / `{"event":"start-lan"}`
// on stdout and waits for a line on stdin saying it was done. Ends with one JSON line:
// {"ok":true,"session_id":…,"seqs":[…],"paths":[…],"blocks":{"lan":n,"relay":m},"lan_after_return":k,"screenshots":[…]}

import { chromium } from 'playwright-core';
import { parseArgs, PhoneRun, startEchoSession, STEP_TIMEOUT, T, testAsker, waitFor } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
if (process.env.NODE_TEST_CONTEXT && !args.link) {
  const { test } = await import('node:test');
  test('the LAN page falls back to the relay (bridge/tests/web_lan_page_relay.rs runs it)', { skip: 'needs --link' }, () => {});
} else {
  await main();
}

async function main() {
  if (!args.link || !args.screenshots || !args.cwd) {
    console.error("usage: node lan-page-relay.mjs --link '<http pairing link>' --screenshots DIR --cwd DIR");
    process.exit(2);
  }
  const run = new PhoneRun('lan-page-relay', args.screenshots);
  const ask = testAsker();
  await run.finish(async () => {
    const page = await run.launch(chromium);
    const pathShown = async () => (await page.textContent(T('path'))).trim();
    const waitPath = (want, timeout = STEP_TIMEOUT) => waitFor(`the header to say "${want}"`, async () => (await pathShown()) === want, timeout);
    const blocks = () =>
      page.$$eval(T('block'), (els) => els.map((el) => ({ seq: Number(el.dataset.seq), type: el.dataset.blockType, text: el.textContent })));
    const lastText = async () => (await blocks()).filter((b) => b.type === 'text').pop()?.text ?? '';
    const paths = [];
    let atReturn = 0;

    await run.step('pair on the LAN page, with a link that names the relay too', async () => {
      if (!args.link.startsWith('http://')) throw new Error(`not the LAN page's link: ${args.link}`);
      await page.goto(args.link, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
      await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: STEP_TIMEOUT });
      await waitPath('LAN');
      paths.push('LAN');
    });
    await run.shot('01-lan.png');

    const sessionId = await run.step('start an echo session', () => startEchoSession(page, args.cwd));
    const words = Array.from({ length: 100 }, (_, i) => `w${i + 1}`);
    await run.step('a slow turn, begun on the LAN', async () => {
      await page.fill(T('composer'), `slow ${words.join(' ')}`);
      await page.click(T('send'));
      await waitFor('a few words over the LAN', async () => (await lastText()).includes('w3'));
    });
    await run.shot('02-turn-on-lan.png');

    await run.step('the LAN server goes away mid-turn: the page goes on through the relay, unpaired nowhere', async () => {
      await ask('stop-lan');
      await waitPath('via relay', 60_000);
      paths.push('via relay');
      const before = (await lastText()).length;
      await waitFor('the turn to go on through the relay', async () => (await lastText()).length > before);
    });
    await run.shot('03-via-relay.png');

    await run.step('the LAN server is back: the page returns to it', async () => {
      await ask('start-lan');
      await waitPath('LAN', 90_000);
      paths.push('LAN');
      atReturn = await page.evaluate(() => window.terminull.pathBlocks.lan);
    });
    await run.shot('04-lan-again.png');

    await run.step('the turn ends with every word, and one more turn runs on the LAN', async () => {
      await waitFor('the end of the turn', async () => (await blocks()).some((b) => b.type === 'session_end'), 90_000);
      if (!(await lastText()).includes(`You said: slow ${words.join(' ')}`)) throw new Error(`the reply is not whole: ${await lastText()}`);
      await page.fill(T('composer'), 'back home');
      await page.click(T('send'));
      await waitFor('the second turn', async () => (await blocks()).filter((b) => b.type === 'session_end').length === 2);
    });
    await run.shot('05-turns-complete.png');
    const counts = await page.evaluate(() => window.terminull.pathBlocks);
    const seqs = (await blocks()).map((b) => b.seq).sort((a, b) => a - b);

    // The pairing taken to the relay's page (its own origin and store): the same device, no pairing there.
    const relayPath = await run.step("the pairing carried to the relay's page", async () => {
      const device = await page.evaluate(() => window.terminull.deviceId);
      await page.click('button.back');
      const link = await page.waitForSelector(T('carry-link'), { timeout: STEP_TIMEOUT });
      await run.shot('06-carry-offered.png');
      const href = await link.getAttribute('href');
      if (!href.includes('#carry=') || new URL(href).origin === new URL(args.link).origin) throw new Error(`the carry link is ${href}`);
      await page.click(T('carry-link'));
      await page.waitForURL((u) => u.origin === new URL(href).origin, { timeout: STEP_TIMEOUT });
      await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: STEP_TIMEOUT });
      if (page.url().includes('carry=')) throw new Error(`the secrets stayed in the address bar: ${page.url()}`);
      if (await page.isVisible(T('short-code'))) throw new Error('the relay page paired again');
      const there = await page.evaluate(() => window.terminull.deviceId);
      if (there !== device) throw new Error(`the relay page is device ${there}, the LAN page was ${device}`);
      await page.waitForSelector(`${T('session-item')}[data-session-id="${sessionId}"]`, { timeout: STEP_TIMEOUT });
      const shown = await pathShown();
      if (shown !== 'via relay' && shown !== 'LAN direct') throw new Error(`the relay page's path is "${shown}"`);
      return shown;
    });
    await run.shot('07-relay-page.png');
    if (run.pageErrors.length) throw new Error(`page errors: ${run.pageErrors.join(' | ')}`);
    console.log(JSON.stringify({ ok: true, session_id: sessionId, seqs, paths, relay_page_path: relayPath, blocks: counts, lan_after_return: counts.lan - atReturn, screenshots: run.screenshots }));
  });
}
