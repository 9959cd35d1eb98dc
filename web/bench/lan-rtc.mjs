// The installed app's two paths, measured in one page: `terminull-bench --only web-rtc`
// starts, inside a private network namespace, a relay behind a TLS front (the app's
// https origin), a bridge with an echo session and its LAN server on a veth "LAN", and
// runs this script. The page pairs through the relay and moves to the WebRTC data
// channel on the LAN; then, in the echo session, the taps and the 1 KiB-block turn of
// probe.mjs's tapAndStream run on the data channel; then the script asks the bench to
// take the LAN address away, waits for the page to say "via relay", and runs the same
// again through the relay.
//
//   node web/bench/lan-rtc.mjs --link '<https pairing link>' --spki BASE64 --echo SID \
//        [--rounds N] [--blocks N] [--screenshots DIR]
//
// Talks to the bench over stdio (`{"event":"drop-lan"}` on stdout, a line on stdin once
// done). Ends with one JSON line: {"ok":true,"lan":{…},"relay":{…},"path_blocks":{…}}.

import { chromium } from 'playwright-core';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHROMIUM_ARGS, parseArgs, PhoneRun, STEP_TIMEOUT, T, testAsker, waitFor } from '../test/support/phone.mjs';
import { probe, tapAndStream } from './probe.mjs';

const args = parseArgs(process.argv.slice(2));
for (const need of ['link', 'spki', 'echo']) {
  if (!args[need]) {
    console.error(`usage: node lan-rtc.mjs --link URL --spki BASE64 --echo SID [--rounds N] [--blocks N]; --${need} missing`);
    process.exit(2);
  }
}
const run = new PhoneRun('bench-lan-rtc', args.screenshots ?? join(tmpdir(), 'terminull-bench-lan-rtc'));
const tapOptions = { session: args.echo, rounds: Number(args.rounds ?? 5), blocks: Number(args.blocks ?? 500), log: (m) => run.log(m) };

await run.finish(async () => {
  const ask = testAsker();
  const page = await run.launch(chromium, { args: [...CHROMIUM_ARGS, `--ignore-certificate-errors-spki-list=${args.spki}`] });
  await page.addInitScript(probe(1));
  const pathShown = async () => (await page.textContent(T('path'))).trim();
  const waitPath = (want, timeout = STEP_TIMEOUT) => waitFor(`the header to say "${want}"`, async () => (await pathShown()) === want, timeout);

  await run.step('pair through the relay, from its https origin', async () => {
    await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: 60_000 });
    if (!(await page.evaluate(() => window.isSecureContext))) throw new Error('the page is not a secure context');
  });
  await run.step('the LAN data channel carries the link', () => waitPath('LAN direct', 60_000));
  const lan = await run.step('LAN data channel: taps and a turn of 1 KiB blocks', async () => {
    const got = await tapAndStream(page, tapOptions);
    if ((await pathShown()) !== 'LAN direct') throw new Error(`the measurement ended on "${await pathShown()}"`);
    return got;
  });
  await run.shot('01-lan-direct.png');
  await run.step('the LAN goes away: the page goes on through the relay', async () => {
    await ask('drop-lan');
    await waitPath('via relay', 60_000);
  });
  const relay = await run.step('relay: the same taps and turn', async () => {
    const got = await tapAndStream(page, tapOptions);
    if ((await pathShown()) !== 'via relay') throw new Error(`the measurement ended on "${await pathShown()}"`);
    return got;
  });
  await run.shot('02-via-relay.png');
  if (run.pageErrors.length) throw new Error(`uncaught errors in the page: ${run.pageErrors.join(' | ')}`);
  const pathBlocks = await page.evaluate(() => window.terminull.pathBlocks);
  console.log(JSON.stringify({ ok: true, lan, relay, path_blocks: pathBlocks, screenshots: run.screenshots }));
});
