// The web app's budgets in a real browser (Debian's Chromium at a phone's size, driven
// by playwright-core), against a real bridge's LAN server: `terminull-bench --only web`
// starts the bridge, fills it with sessions and runs this script. It pairs by opening
// the link, then measures, each beside a floor taken in the same browser:
//
// - list: navigation start → the session list showing every row, over `--rounds`
//   reloads; floor: the same page's `load` event (fetching and running app.js).
// - tap: the Send button's click → the first streamed text of the echo reply in the
//   DOM, over `--rounds` turns (the Rust client's figure on the same LAN server is
//   the floor; the bench measures it); then one turn of `--blocks` 1 KiB blocks,
//   click → the last in the DOM. With `--relay`, the same again on the relay's page
//   (reached through the LAN page's carry link: the same device, no pairing).
// - open: the big session's row tapped → all of its turns on screen.
// - scroll: the big session scrolled from its end to its top by a synthesized touch
//   gesture, traced: frames (requestAnimationFrame intervals) over 50 ms and main
//   thread tasks over 50 ms in the Chromium trace; floor: a static page holding the
//   same text in as many plain elements, scrolled the same way.
//
//   node web/bench/budgets.mjs --link URL --rows N --echo SID --big SID --big-turns N \
//        [--rounds N] [--blocks N] [--relay true] [--screenshots DIR]
//
// Prints progress on stderr and one JSON line on stdout: {"ok":true, …figures in ms…}.

import { chromium } from 'playwright-core';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CHROMIUM_ARGS, PhoneRun, T, parseArgs, waitFor } from '../test/support/phone.mjs';
import { median, probe, round1, tapAndStream } from './probe.mjs';

const args = parseArgs(process.argv.slice(2));
for (const need of ['link', 'rows', 'echo', 'big', 'big-turns']) {
  if (!args[need]) {
    console.error(`usage: node budgets.mjs --link URL --rows N --echo SID --big SID --big-turns N [--rounds N]; --${need} missing`);
    process.exit(2);
  }
}
const rows = Number(args.rows);
const rounds = Number(args.rounds ?? 5);
const bigTurns = Number(args['big-turns']);
/** Blocks of the throughput turn on each path. */
const streamBlocks = Number(args.blocks ?? 500);
const run = new PhoneRun('budgets', args.screenshots ?? join(tmpdir(), 'terminull-budgets'));
const tapOptions = { session: args.echo, rounds, blocks: streamBlocks, log: (m) => run.log(m) };
/** The longest scroll gesture, so a huge session cannot hold the run for minutes. */
const MAX_SCROLL_PX = 400_000;
const SCROLL_SPEED = 8_000; // px/s: a brisk flick, held

const PROBE = probe(rows);

/** Scrolls the element under (x, y) up by `distance` px with a touch gesture, traced. */
async function tracedScroll(page, cdp, distance) {
  const events = [];
  const onData = (e) => events.push(...e.value);
  cdp.on('Tracing.dataCollected', onData);
  const complete = new Promise((r) => cdp.once('Tracing.tracingComplete', r));
  await cdp.send('Tracing.start', {
    categories: 'toplevel,devtools.timeline,disabled-by-default-devtools.timeline.frame',
    transferMode: 'ReportEvents',
  });
  await page.evaluate(() => {
    window.__budget.frames = [];
    window.__budget.recording = true;
  });
  const started = Date.now();
  await cdp.send('Input.synthesizeScrollGesture', {
    x: 195,
    y: 420,
    yDistance: distance,
    speed: SCROLL_SPEED,
    gestureSourceType: 'touch',
    preventFling: true,
  });
  const gestureMs = Date.now() - started;
  const frames = await page.evaluate(() => {
    window.__budget.recording = false;
    return window.__budget.frames;
  });
  await cdp.send('Tracing.end');
  await complete;
  cdp.off('Tracing.dataCollected', onData);
  // The renderer's main thread: named in the trace's metadata.
  const main = events.find((e) => e.ph === 'M' && e.name === 'thread_name' && e.args?.name === 'CrRendererMain');
  const tasks = events.filter((e) => (e.name === 'ThreadControllerImpl::RunTask' || e.name === 'RunTask') && e.ph === 'X' && (!main || (e.pid === main.pid && e.tid === main.tid)));
  const longTasks = tasks.filter((e) => e.dur > 50_000);
  const gaps = frames.slice(1).map((t, i) => t - frames[i]);
  return {
    gesture_ms: gestureMs,
    frames: frames.length,
    frames_over_50ms: gaps.filter((g) => g > 50).length,
    longest_frame_ms: round1(Math.max(0, ...gaps)),
    long_tasks: longTasks.length,
    longest_task_ms: round1(Math.max(0, ...tasks.map((e) => e.dur / 1000))),
    trace_events: events.length,
  };
}

async function main() {
  // No WebRTC candidates: the relay's page would offer the LAN data channel, and
  // gathering them announces mDNS names on the real network (tests do that only in a
  // private network namespace). So the relay's page stays on the relay.
  const page = await run.launch(chromium, { args: [...CHROMIUM_ARGS, '--force-webrtc-ip-handling-policy=disable_non_proxied_udp'] });
  await page.addInitScript(PROBE);
  const cdp = await run.context.newCDPSession(page);

  await run.step('pair by opening the link', async () => {
    await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: 60_000 });
    await waitFor(`${rows} rows in the list`, async () => (await page.$$(T('session-item'))).length >= rows, 60_000);
  });

  const list = await run.step('first render of the session list after a load', async () => {
    const got = [];
    for (let i = 0; i < rounds; i++) {
      await page.reload({ waitUntil: 'load' });
      const at = await waitFor('every row', () => page.evaluate(() => window.__budget.listAt), 60_000);
      const load = await page.evaluate(() => performance.getEntriesByType('navigation')[0]?.loadEventStart ?? null);
      got.push({ list: at, load });
    }
    run.log(`list: ${JSON.stringify(got)}`);
    return { list_ms: round1(median(got.map((g) => g.list))), load_ms: round1(median(got.map((g) => g.load))), runs: got.length };
  });
  await run.shot('01-list.png');

  const tap = await run.step('LAN: tap Send → first streamed text, and a turn of 1 KiB blocks', () => tapAndStream(page, tapOptions));
  await run.shot('02-echo.png');

  const open = await run.step('open the big session', async () => {
    await page.click('button.back');
    const row = `${T('session-item')}[data-session-id="${args.big}"]`;
    await page.waitForSelector(row);
    const t0 = Date.now();
    await page.click(row);
    await waitFor(`${bigTurns} turns shown`, async () =>
      (await page.$$eval(`${T('block')}[data-block-type="session_end"]`, (els) => els.length)) >= bigTurns,
    60_000);
    const ms = Date.now() - t0;
    const blocks = await page.$$eval(T('block'), (els) => els.length);
    run.log(`opened ${blocks} block elements in ${ms} ms`);
    return { open_ms: ms, block_elements: blocks };
  });
  await run.shot('03-big-session-end.png');

  const scroller = await page.evaluate(() => {
    // The element that scrolls the transcript (the document itself or a container).
    const el = document.querySelector('[data-testid="block"]');
    let s = el?.parentElement;
    while (s && s !== document.body && !(s.scrollHeight > s.clientHeight + 1 && /(auto|scroll)/.test(getComputedStyle(s).overflowY))) s = s.parentElement;
    const root = !s || s === document.body;
    const box = root ? document.scrollingElement : s;
    return { root, height: box.scrollHeight, client: box.clientHeight, top: box.scrollTop };
  });
  const distance = Math.min(MAX_SCROLL_PX, scroller.height - scroller.client);
  run.log(`scroller ${JSON.stringify(scroller)}; scrolling ${distance} px`);

  const scroll = await run.step('scroll the big session to its top, traced', () => tracedScroll(page, cdp, distance));
  await run.shot('04-big-session-top.png');

  const floor = await run.step('the floor: the same text as plain elements, scrolled the same way', async () => {
    const texts = await page.$$eval(T('block'), (els) => els.map((e) => e.innerText));
    await page.goto('about:blank');
    await page.setContent('<!doctype html><meta name="viewport" content="width=device-width"><body style="font:15px/1.4 sans-serif;margin:0 12px"></body>');
    await page.evaluate((ts) => {
      for (const t of ts) {
        const d = document.createElement('div');
        d.style.cssText = 'white-space:pre-wrap;padding:8px 0;border-bottom:1px solid #ddd';
        d.textContent = t;
        document.body.append(d);
      }
      window.scrollTo(0, document.scrollingElement.scrollHeight);
    }, texts);
    if (!(await page.evaluate(() => Boolean(window.__budget)))) await page.evaluate(PROBE);
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    const h = await page.evaluate(() => document.scrollingElement.scrollHeight - document.scrollingElement.clientHeight);
    return { ...(await tracedScroll(page, cdp, Math.min(distance, h))), height: h };
  });

  // The same device on the relay's page (its carry link), when the bridge has a relay.
  let relayTap = null;
  if (args.relay) {
    relayTap = await run.step("the relay's page: the same taps and turn through the relay", async () => {
      await page.goto(new URL(args.link).origin, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: 60_000 });
      // The page opens on the session it showed last: back to the home, where the link is.
      if (await page.isVisible('button.back')) await page.click('button.back');
      await page.click(T('carry-link'));
      await page.waitForURL((u) => !args.link.startsWith(u.origin), { timeout: 60_000 });
      await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: 60_000 });
      const path = (await page.textContent(T('path'))).trim();
      if (path !== 'via relay') throw new Error(`the relay's page is on "${path}"`);
      return tapAndStream(page, tapOptions);
    });
    await run.shot('05-relay-echo.png');
  }

  if (run.pageErrors.length) throw new Error(`uncaught errors in the page: ${run.pageErrors.join(' | ')}`);
  console.log(JSON.stringify({ ok: true, list, tap, relay_tap: relayTap, open, scroll: { ...scroll, distance }, floor, screenshots: run.screenshots }));
}

await run.finish(main);
