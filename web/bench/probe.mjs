// What the browser benchmarks share (budgets.mjs, lan-rtc.mjs): the probe that marks
// the moments measured inside the page, and the tap / turn measurement in the echo
// session.

import { T, waitFor } from '../test/support/phone.mjs';

/**
 * A script to run before the app's own code on every load (through the DevTools
 * protocol, so the page's CSP does not apply): marks when the list first shows
 * `rowsWanted` rows, when a tap on Send happened and when the next text block appeared,
 * and every animation frame.
 */
export function probe(rowsWanted) {
  return `
(() => {
  const p = (window.__budget = { listAt: null, tapAt: null, textAt: null, textsAtTap: 0, textsTarget: null, textsAt: null, frames: [], recording: false });
  const rowsWanted = ${Number(rowsWanted)};
  const texts = () => document.querySelectorAll('[data-testid="block"][data-block-type="text"]').length;
  new MutationObserver(() => {
    if (p.listAt == null && document.querySelectorAll('[data-testid="session-item"]').length >= rowsWanted) p.listAt = performance.now();
    if (p.tapAt != null && p.textAt == null && texts() > p.textsAtTap) p.textAt = performance.now();
    if (p.textsTarget != null && p.textsAt == null && texts() >= p.textsTarget) p.textsAt = performance.now();
  }).observe(document, { childList: true, subtree: true });
  document.addEventListener('click', (e) => {
    if (e.target.closest?.('[data-testid="send"]')) {
      p.tapAt = performance.now();
      p.textAt = null;
      p.textsAtTap = texts();
    }
  }, true);
  const frame = (t) => {
    if (p.recording) p.frames.push(t);
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
})();`;
}

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : null;
};
export const round1 = (x) => Math.round(x * 10) / 10;

/**
 * In the echo session `session` (opened from the list): taps
 * Send `rounds * 2` times, timing the click → the reply's first text element; then one
 * turn of `blocks` finished 1 KiB text blocks (echo-rs `bench blocks`), timing the click
 * → the last of them in the DOM.
 */
export async function tapAndStream(page, { session, rounds, blocks, log }) {
  if (await page.isVisible('button.back')) await page.click('button.back');
  await page.click(`${T('session-item')}[data-session-id="${session}"]`);
  await page.waitForSelector(T('composer'), { state: 'visible' });
  const ends = () => page.$$eval(`${T('block')}[data-block-type="session_end"]`, (els) => els.length);
  const got = [];
  for (let i = 0; i < rounds * 2; i++) {
    const before = await ends();
    await page.fill(T('composer'), `tap number ${i}`);
    await page.click(T('send'));
    const ms = await waitFor('the first text', () =>
      page.evaluate(() => (window.__budget.textAt != null ? window.__budget.textAt - window.__budget.tapAt : null)),
    );
    got.push(ms);
    await waitFor('the turn to end', async () => (await ends()) > before);
  }
  log(`tap → first text: ${got.map(round1).join(', ')} ms`);
  const before = await ends();
  await page.evaluate((n) => {
    const p = window.__budget;
    p.textsTarget = document.querySelectorAll('[data-testid="block"][data-block-type="text"]').length + n;
    p.textsAt = null;
  }, blocks);
  await page.fill(T('composer'), `bench blocks ${blocks} 1024`);
  await page.click(T('send'));
  const streamMs = await waitFor(`${blocks} blocks`, () =>
    page.evaluate(() => (window.__budget.textsAt != null ? window.__budget.textsAt - window.__budget.tapAt : null)),
  60_000);
  await waitFor('the turn to end', async () => (await ends()) > before);
  await page.evaluate(() => (window.__budget.textsTarget = null));
  return {
    tap_ms: round1(median(got)),
    tap_max_ms: round1(Math.max(...got)),
    turns: got.length,
    stream_blocks: blocks,
    stream_ms: round1(streamMs),
  };
}
