// The app from the relay's https origin keeps the LAN as its fast path: Debian's
// Chromium at a phone's size pairs through the relay, offers a WebRTC data channel to
// the bridge through its link, and runs a slow echo turn; the test (bridge/tests/
// web_lan_rtc.rs) takes the bridge's LAN address away mid-turn and gives it back. The
// page must say "LAN direct" while the channel carries, "via relay" after the loss,
// and "LAN direct" again once it is back, with every block once.
//
//   node web/test/lan-rtc.mjs --link '<https pairing link>' --spki <base64> --screenshots DIR --cwd DIR
//
// Talks to the test over stdio: prints `{"event":"drop-lan"}` / `{"event":"restore-lan"}`
// on stdout and waits for a line on stdin saying it was done. Ends with one JSON line:
// {"ok":true,"session_id":…,"seqs":[…],"paths":[…],"blocks":{"lan":n,"relay":m},"lan_after_return":k,"screenshots":[…]}

import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, parseArgs, PhoneRun, startEchoSession, STEP_TIMEOUT, T, testAsker, waitFor } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
if (process.env.NODE_TEST_CONTEXT && !args.link) {
  const { test } = await import('node:test');
  test('LAN data channel in the browser (bridge/tests/web_lan_rtc.rs runs it)', { skip: 'needs --link' }, () => {});
} else {
  await main();
}

async function main() {
  if (!args.link || !args.screenshots || !args.spki || !args.cwd) {
    console.error("usage: node lan-rtc.mjs --link '<https pairing link>' --spki BASE64 --screenshots DIR --cwd DIR");
    process.exit(2);
  }
  const run = new PhoneRun('lan-rtc', args.screenshots);
  const ask = testAsker();
  await run.finish(async () => {
    const page = await run.launch(chromium, { args: [...CHROMIUM_ARGS, `--ignore-certificate-errors-spki-list=${args.spki}`] });
    const pathShown = async () => (await page.textContent(T('path'))).trim();
    const waitPath = (want, timeout = STEP_TIMEOUT) => waitFor(`the header to say "${want}"`, async () => (await pathShown()) === want, timeout);
    const blocks = () =>
      page.$$eval(T('block'), (els) => els.map((el) => ({ seq: Number(el.dataset.seq), type: el.dataset.blockType, text: el.textContent })));
    const paths = [];
    let atReturn = 0;

    await run.step('pair through the relay, from its https origin', async () => {
      if (!args.link.startsWith('https://')) throw new Error(`not an https link: ${args.link}`);
      await page.goto(args.link, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
      if (!(await page.evaluate(() => window.isSecureContext))) throw new Error('the page is not a secure context');
      await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: STEP_TIMEOUT });
    });
    await run.step('the LAN data channel carries the link', async () => {
      await waitPath('LAN direct');
      paths.push('LAN direct');
    });
    await run.shot('01-lan-direct.png');

    const sessionId = await run.step('start an echo session on the LAN', () => startEchoSession(page, args.cwd));
    const words = Array.from({ length: 100 }, (_, i) => `w${i + 1}`);
    await run.step('a slow turn, begun on the LAN', async () => {
      await page.fill(T('composer'), `slow ${words.join(' ')}`);
      await page.click(T('send'));
      await waitFor('a few words over the LAN', async () => (await blocks()).some((b) => b.type === 'text' && b.text.includes('w3')));
      if ((await pathShown()) !== 'LAN direct') throw new Error(`the turn began on "${await pathShown()}"`);
    });
    await run.shot('02-turn-on-lan.png');

    await run.step('the LAN goes away mid-turn: the page goes on through the relay', async () => {
      await ask('drop-lan');
      await waitPath('via relay', 60_000);
      paths.push('via relay');
      const before = (await blocks()).filter((b) => b.type === 'text').pop()?.text.length ?? 0;
      await waitFor('the turn to go on through the relay', async () => ((await blocks()).filter((b) => b.type === 'text').pop()?.text.length ?? 0) > before);
    });
    await run.shot('03-via-relay.png');

    await run.step('the LAN is back: the page returns to it', async () => {
      await ask('restore-lan');
      await waitPath('LAN direct', 90_000);
      paths.push('LAN direct');
      atReturn = await page.evaluate(() => window.terminull.pathBlocks.lan);
    });
    await run.shot('04-lan-again.png');

    await run.step('the turn ends with every word', async () => {
      await waitFor('the end of the turn', async () => (await blocks()).some((b) => b.type === 'session_end'), 90_000);
      const text = (await blocks()).filter((b) => b.type === 'text').pop()?.text ?? '';
      if (!text.includes(`You said: slow ${words.join(' ')}`)) throw new Error(`the reply is not whole: ${text}`);
    });
    await run.shot('05-turn-complete.png');
    const counts = await page.evaluate(() => window.terminull.pathBlocks);
    const seqs = (await blocks()).map((b) => b.seq).sort((a, b) => a - b);
    if (run.pageErrors.length) throw new Error(`page errors: ${run.pageErrors.join(' | ')}`);
    const lanAfterReturn = counts.lan - atReturn;
    console.log(JSON.stringify({ ok: true, session_id: sessionId, seqs, paths, blocks: counts, lan_after_return: lanAfterReturn, screenshots: run.screenshots }));
  });
}
