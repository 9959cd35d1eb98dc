// What every browser script shares: Debian's Chromium at a phone's size (390x844,
// touch, scale 2) driven by playwright-core, its arguments, the step/wait/screenshot
// helpers, and the ending every script has (a `fail.png` and one JSON line on stdout
// when it fails, the profile removed either way). The scripts themselves are each one
// scenario; bridge/tests/web_*.rs run them against a real bridge.

import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** Chromium's arguments: headless, and nothing that would talk to the network by itself. */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
/** How long one wait may take before the step fails. */
export const STEP_TIMEOUT = 30_000;
/** The phone the scripts pretend to be (an Android phone's user agent: the app names the device from it). */
export const PHONE = {
  viewport: { width: 390, height: 844 },
  deviceScaleFactor: 2,
  isMobile: true,
  hasTouch: true,
  userAgent:
    'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/148.0.0.0 Mobile Safari/537.36',
};

/** `--key value` pairs (a flag with no value is `'true'`). */
export function parseArgs(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith('--')) continue;
    const k = argv[i].slice(2);
    out[k] = argv[i + 1] && !argv[i + 1].startsWith('--') ? argv[++i] : 'true';
  }
  return out;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** The selector of an element by its `data-testid`. */
export const T = (id) => `[data-testid="${id}"]`;

/** Polls `predicate` every 100 ms until it returns something truthy, which is returned. */
export async function waitFor(desc, predicate, timeout = STEP_TIMEOUT) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const v = await predicate();
    if (v) return v;
    await sleep(100);
  }
  throw new Error(`timed out after ${timeout / 1000} s waiting for ${desc}`);
}

/**
 * The way a script asks the test driving it (bridge/tests/support/browser.rs
 * `run_conversing`) to act: `ask(event)` prints `{"event": event}` and resolves once
 * the test answers `done` on stdin.
 */
export function testAsker() {
  const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
  return async (event) => {
    console.log(JSON.stringify({ event }));
    const answer = await lines.next();
    if (answer.done || answer.value.trim() !== 'done') throw new Error(`the test did not do ${event}: ${answer.value}`);
  };
}

/** From the home view: starts an echo session in `cwd` and returns its id once it started. */
export async function startEchoSession(page, cwd) {
  await page.click(T('new-session'));
  await waitFor('the echo agent', () => page.$$eval(`${T('agent-picker')} option`, (os) => os.some((o) => o.value === 'echo')));
  await page.selectOption(T('agent-picker'), 'echo');
  await page.fill(T('cwd'), cwd);
  await page.click(T('start-session'));
  await page.waitForSelector(`${T('block')}[data-block-type="agent_info"]`, { timeout: STEP_TIMEOUT });
  return page.evaluate(() => window.terminull.current);
}

/** One script's run: its log tag, its screenshots, the page and what the page threw. */
export class PhoneRun {
  constructor(tag, screenshotDir) {
    this.tag = tag;
    this.dir = screenshotDir;
    this.screenshots = [];
    this.pageErrors = [];
    this.page = null;
    this.context = null;
    this.userDataDir = null;
  }

  log(...m) {
    console.error(`[${this.tag}]`, ...m);
  }

  /** Starts Chromium as the phone with a fresh profile; its page's errors are collected. */
  async launch(chromium, extra = {}) {
    mkdirSync(this.dir, { recursive: true });
    this.userDataDir = mkdtempSync(join(tmpdir(), 'terminull-chromium-'));
    this.context = await chromium.launchPersistentContext(this.userDataDir, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: CHROMIUM_ARGS,
      ...PHONE,
      ...extra,
    });
    const page = this.context.pages()[0] ?? (await this.context.newPage());
    page.on('pageerror', (e) => {
      this.pageErrors.push(String(e));
      this.log(`page error: ${e}`);
    });
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') this.log(`console.${m.type()}: ${m.text()}`);
    });
    this.page = page;
    return page;
  }

  async shot(name) {
    const file = join(this.dir, name);
    await this.page.screenshot({ path: file, fullPage: false });
    this.screenshots.push(file);
    this.log(`screenshot ${name}`);
  }

  /** Runs `fn` as a named step: a failure's message says which step. */
  async step(name, fn) {
    this.log(`step: ${name}`);
    try {
      return await fn();
    } catch (e) {
      e.message = `${name}: ${e.message}`;
      throw e;
    }
  }

  /** Runs `main` (which prints the success line), then exits: 1 with `fail.png` and
   * `{"ok":false,…}` on stdout when it threw. */
  async finish(main) {
    let code = 0;
    try {
      await main();
    } catch (e) {
      code = 1;
      console.error(`FAILED: ${e.stack ?? e}`);
      if (this.page) {
        try {
          const file = join(this.dir, 'fail.png');
          await this.page.screenshot({ path: file });
          this.screenshots.push(file);
        } catch {
          /* the page is gone */
        }
      }
      console.log(JSON.stringify({ ok: false, error: String(e.message ?? e), screenshots: this.screenshots }));
    } finally {
      await this.context?.close().catch(() => {});
      if (this.userDataDir) rmSync(this.userDataDir, { recursive: true, force: true });
    }
    process.exit(code);
  }
}
