// The terminal view in a real browser: Debian's Chromium driven by playwright-core at
// a phone's size (390x844, touch, scale 2) against a bridge's LAN server. Opens a
// terminal from a session in the scratch directory, types with the soft keyboard's
// path (composition events on xterm's textarea, as a phone's IME sends them: no
// character doubled or lost), shrinks the viewport as a soft keyboard does (the window
// refits and the shell gets the size), uses the key bar's Tab (completion shown),
// sticky Ctrl, Backspace, ^C (interrupts `sleep 100`), runs `less` and quits it with `q`,
// pastes through the Paste box (an http page cannot read the clipboard), reloads (the screen
// comes back from the scrollback), opens a second terminal from the bridge's screen
// and lists, reattaches and closes them. With `--off` the bridge has terminals off:
// the page shows its reason.
//
//   node web/test/browser-terminal.mjs --link '<pairing link>' --screenshots <dir> --cwd <dir> [--off]
//
// <dir> (--cwd) holds `notes-about-terminals.txt` (the file `less` shows). Prints
// progress on stderr and one final JSON line on stdout:
// {"ok":true,"terminals":[ids],"cols":n,"rows":n,"screenshots":[…]}.

import { chromium } from 'playwright-core';
import { PhoneRun, T, sleep, waitFor, parseArgs, STEP_TIMEOUT } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
const underTestRunner = Boolean(process.env.NODE_TEST_CONTEXT) && !args.link;
if (underTestRunner) {
  const { test } = await import('node:test');
  test('the terminal view (run directly with --link; bridge/tests/web_terminal.rs does)', { skip: 'needs --link' }, () => {});
} else if (!args.link || !args.screenshots || !args.cwd) {
  console.error("usage: node browser-terminal.mjs --link '<link>' --screenshots DIR --cwd DIR [--off]");
  process.exit(2);
}

const run = new PhoneRun('browser-terminal', args.screenshots);
const log = (...m) => run.log(...m);
const step = (name, fn) => run.step(name, fn);
let page = null;

const term = () => page.evaluate(() => window.terminull?.terminal?.() ?? null);
/** The screen's text (the whole buffer, scrollback included). */
const screen = async () => (await term())?.text ?? '';

async function waitScreen(desc, predicate, timeout = STEP_TIMEOUT) {
  try {
    return await waitFor(desc, async () => {
      const t = await term();
      return t && predicate(t.text, t) ? t : null;
    }, timeout);
  } catch (e) {
    e.message += `\nthe screen:\n${await screen()}`;
    throw e;
  }
}

/**
 * Types `text` as a phone's IME does, on xterm's textarea: keydown 229, then
 * compositionstart, one compositionupdate + input (insertCompositionText) per letter
 * with the textarea's value growing as the IME writes it, then compositionend. Real
 * events; nothing calls xterm or the app directly.
 */
async function compose(text) {
  await page.evaluate(async (word) => {
    const ta = document.querySelector('.xterm-helper-textarea');
    ta.focus();
    const tick = () => new Promise((r) => setTimeout(r, 15));
    const key229 = (type) => {
      const ev = new KeyboardEvent(type, { key: 'Unidentified', bubbles: true, cancelable: true, composed: true });
      Object.defineProperty(ev, 'keyCode', { value: 229 });
      Object.defineProperty(ev, 'which', { value: 229 });
      ta.dispatchEvent(ev);
    };
    const start = ta.value.length;
    key229('keydown');
    ta.dispatchEvent(new CompositionEvent('compositionstart', { data: '', bubbles: true, composed: true }));
    for (let i = 1; i <= word.length; i++) {
      const part = word.slice(0, i);
      if (i > 1) key229('keydown');
      ta.value = ta.value.slice(0, start) + part;
      ta.setSelectionRange(ta.value.length, ta.value.length);
      ta.dispatchEvent(new CompositionEvent('compositionupdate', { data: part, bubbles: true, composed: true }));
      ta.dispatchEvent(new InputEvent('input', { data: part, inputType: 'insertCompositionText', isComposing: true, bubbles: true, composed: true }));
      key229('keyup');
      await tick();
    }
    ta.dispatchEvent(new CompositionEvent('compositionend', { data: word, bubbles: true, composed: true }));
    await tick();
    await tick();
  }, text);
  // xterm reads the composed text on the next tick.
  await sleep(50);
}

/** Enter on the soft keyboard (a real key event: phones send Enter as a key). */
const enter = () => page.keyboard.press('Enter');
const tap = (id) => page.tap(T(id));

/** Waits until the home view lists `n` terminals, asking the bridge again (Refresh) each time. */
async function listed(n) {
  await waitFor(`${n} terminal(s) listed`, async () => {
    if ((await page.$$(T('terminal-item'))).length === n) return true;
    await page.tap(T('session-refresh'));
    await sleep(300);
    return false;
  });
}

/** Bytes the page sent since `before` (its `sent` log). */
async function sentSince(before) {
  const t = await term();
  return t.sent.slice(before.length);
}

async function noHorizontalOverflow() {
  const wide = await page.evaluate(() => ({ doc: document.documentElement.scrollWidth, view: window.innerWidth }));
  if (wide.doc > wide.view) throw new Error(`the page is ${wide.doc} px wide in a ${wide.view} px viewport`);
}

async function main() {
  page = await run.launch(chromium);
  page.on('dialog', (d) => d.accept());
  // xterm.js must run under the page's CSP without a violation (web/build.mjs, src/xterm-style.js).
  const csp = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy/.test(m.text())) csp.push(m.text());
  });

  await step('pair over the LAN', async () => {
    await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
    await waitFor('the link', async () => (await page.getAttribute(T('connection-status'), 'data-state')) === 'connected');
  });

  if (args.off === 'true') {
    await step('terminals off: the home screen and the view say so in the bridge’s words', async () => {
      await page.waitForSelector(T('terminals-off'), { state: 'visible', timeout: STEP_TIMEOUT });
      const said = await page.textContent(T('terminals-off'));
      if (!/terminals are turned off/.test(said) || !/\[terminals\] enabled = false/.test(said)) throw new Error(`the home screen says "${said}"`);
      if (!(await page.isDisabled(T('new-terminal')))) throw new Error('+ Terminal is enabled with terminals off');
      await run.shot('off.png');
    });
    console.log(JSON.stringify({ ok: true, terminals: [], off: true, screenshots: run.screenshots }));
    return;
  }

  await step('a session in the scratch directory, then "Terminal here"', async () => {
    await page.click(T('new-session'));
    await waitFor('the echo agent', () => page.$$eval(`${T('agent-picker')} option`, (os) => os.some((o) => o.value === 'echo')));
    await page.selectOption(T('agent-picker'), 'echo');
    await page.fill(T('cwd'), args.cwd);
    await page.click(T('start-session'));
    await page.waitForSelector(`${T('block')}[data-block-type="agent_info"]`, { timeout: STEP_TIMEOUT });
    await page.tap(T('open-terminal'));
    await page.waitForSelector('.xterm-helper-textarea', { state: 'attached', timeout: STEP_TIMEOUT });
    await waitScreen('the shell’s prompt', (text, t) => t.id && text.trim().length > 0);
    const t = await term();
    log(`terminal ${t.id}: ${t.cols}x${t.rows}`);
    if (t.cols < 40 || t.rows < 10) throw new Error(`the window is only ${t.cols}x${t.rows}`);
    const title = await page.textContent(T('terminal-title'));
    if (!title.includes(args.cwd)) throw new Error(`the bar says "${title}", not the session's directory ${args.cwd}`);
  });
  const first = (await term()).id;

  await step('`stty size` shows the window the page fitted', async () => {
    const t = await term();
    await compose('stty size');
    await enter();
    await waitScreen('the size', (text) => text.includes(`${t.rows} ${t.cols}`));
  });

  await step('ls with the soft keyboard (composition events): sent once, output shown', async () => {
    const before = (await term()).sent;
    await compose('ls');
    const sent = await sentSince(before);
    if (sent !== 'ls') throw new Error(`the composition sent ${JSON.stringify(sent)}, expected "ls" once`);
    await enter();
    await waitScreen('ls output', (text) => text.includes('notes-about-terminals.txt'));
    await noHorizontalOverflow();
    await run.shot('01-terminal-ls.png');
  });

  await step('the soft keyboard up (the viewport shrinks): the window refits and the shell gets the new size', async () => {
    const before = await term();
    await page.setViewportSize({ width: 390, height: 500 });
    const smaller = await waitScreen('fewer rows', (_, t) => t.rows < before.rows);
    await compose('stty size');
    await enter();
    await waitScreen('the new size', (text) => text.includes(`\n${smaller.rows} ${smaller.cols}`));
    const bar = await page.locator(T('keybar')).boundingBox();
    if (bar.y + bar.height > 500 + 1) throw new Error(`the key bar ends at ${bar.y + bar.height}, under the keyboard`);
    await noHorizontalOverflow();
    await run.shot('01b-keyboard-up.png');
    log(`keyboard up: ${smaller.cols}x${smaller.rows} (was ${before.cols}x${before.rows})`);
    await page.setViewportSize({ width: 390, height: 844 });
    await waitScreen('the rows back', (_, t) => t.rows === before.rows);
  });

  await step('the key bar: labelled, at least 44 px tall, above the screen’s bottom edge', async () => {
    for (const id of ['key-esc', 'key-tab', 'key-ctrl', 'key-up', 'key-ctrl-c']) {
      const bb = await page.locator(T(id)).boundingBox();
      if (!bb || bb.height < 44 || bb.width < 44) throw new Error(`${id} is ${bb?.width}x${bb?.height}`);
      const label = await page.getAttribute(T(id), 'aria-label');
      if (!label) throw new Error(`${id} has no aria-label`);
    }
    const bar = await page.locator(T('keybar')).boundingBox();
    const screenBox = await page.locator(T('terminal-screen')).boundingBox();
    if (screenBox.y + screenBox.height > bar.y + 1) throw new Error(`the key bar (top ${bar.y}) covers the screen (bottom ${screenBox.y + screenBox.height})`);
    if (bar.y + bar.height > 844 + 1) throw new Error(`the key bar ends at ${bar.y + bar.height}, off the screen`);
  });

  await step('Tab completes a file name (the key bar’s Tab)', async () => {
    await compose('cat notes-a');
    const before = (await term()).sent;
    await tap('key-tab');
    await waitScreen('the completed name', (text) => /cat notes-about-terminals\.txt/.test(text));
    if ((await sentSince(before)) !== '\t') throw new Error('Tab did not send one tab');
    await enter();
    await waitScreen('the file', (text) => text.includes('line 1 of the notes'));
    await run.shot('02-keybar-tab.png');
  });

  await step('sticky Ctrl: Ctrl then u clears the line; Backspace deletes', async () => {
    await compose('echo wrong');
    await tap('key-ctrl');
    if ((await page.getAttribute(T('key-ctrl'), 'aria-pressed')) !== 'true') throw new Error('Ctrl is not shown pressed');
    const before = (await term()).sent;
    await compose('u');
    if ((await sentSince(before)) !== '\x15') throw new Error(`Ctrl then u sent ${JSON.stringify(await sentSince(before))}`);
    if ((await page.getAttribute(T('key-ctrl'), 'aria-pressed')) !== 'false') throw new Error('Ctrl stayed pressed');
    // A slip fixed with the keyboard's Backspace (a key event, as phones send it outside a composition).
    await compose('echo right-$((20+22))x');
    await page.keyboard.press('Backspace');
    await enter();
    await waitScreen('right-42', (text) => text.includes('\nright-42'));
    if ((await screen()).includes('right-42x')) throw new Error('Backspace did not delete the x');
    if ((await screen()).includes('\nwrong')) throw new Error('the cleared line ran');
  });

  await step('^C interrupts sleep 100', async () => {
    await compose('sleep 100');
    await enter();
    await sleep(500);
    await tap('key-ctrl-c');
    await compose('echo after-$((6*7))');
    await enter();
    await waitScreen('the prompt back after ^C', (text) => text.includes('\nafter-42'), 10_000);
  });

  await step('less opens (alternate screen) and quits with q', async () => {
    await compose('less notes-about-terminals.txt');
    await enter();
    await waitScreen('less on its alternate screen', (text, t) => t.alternate && text.includes('line 1 of the notes'));
    await tap('key-down');
    await sleep(200);
    await run.shot('03-less.png');
    await compose('q');
    await waitScreen('back from less', (_, t) => !t.alternate);
    await compose('echo quit-$((1+1))');
    await enter();
    await waitScreen('the shell after less', (text) => text.includes('\nquit-2'));
  });

  await step('a reload reattaches: the screen comes back from the scrollback', async () => {
    const url = page.url();
    if (!url.includes(`t=${first}`)) throw new Error(`the URL ${url} does not name the terminal`);
    await page.reload({ waitUntil: 'domcontentloaded' });
    await waitScreen('the screen after the reload', (text, t) => t.id === first && text.includes('after-42') && text.includes('quit-2'));
    await compose('echo again-$((3*3))');
    await enter();
    await waitScreen('typing after the reload', (text) => text.includes('\nagain-9'));
    await run.shot('04-reattached.png');
  });

  await step('Paste on a plain-http page: the box to paste into, its text sent to the shell', async () => {
    await tap('key-paste');
    await page.waitForSelector(T('paste-box'), { state: 'visible', timeout: STEP_TIMEOUT });
    await page.fill(T('paste-area'), 'echo pasted-$((5+5))');
    await page.tap(T('paste-send'));
    await enter();
    await waitScreen('the pasted command run', (text) => text.includes('\npasted-10'));
  });

  let second = null;
  await step('a second terminal from the bridge’s screen, in its home', async () => {
    await page.tap('.back');
    await page.waitForSelector(T('new-terminal'), { state: 'visible', timeout: STEP_TIMEOUT });
    await listed(1);
    await page.tap(T('new-terminal'));
    await waitScreen('the second shell', (text, t) => t.id && t.id !== first && text.trim().length > 0);
    second = (await term()).id;
    await compose('pwd');
    await enter();
    await waitScreen('its home', (text) => /\n\//.test(text));
  });

  await step('the list shows both; tapping the first reattaches to it; Close ends it', async () => {
    await page.tap('.back');
    await listed(2);
    await run.shot('05-terminal-list.png');
    await page.tap(`li[data-terminal-id="${first}"] ${T('terminal-item')}`);
    await waitScreen('the first terminal’s screen', (text, t) => t.id === first && text.includes('again-9'));
    await page.tap(T('terminal-close'));
    await waitFor('the end notice', async () => /has ended/.test((await page.textContent(T('terminal-notice'))) ?? ''));
    await page.tap('.back');
    await listed(1);
    const left = await page.getAttribute(T('terminal-item'), 'aria-label');
    log(`left: ${left}`);
  });

  await step('Ctrl-D on the keyboard bar ends the second one', async () => {
    await page.tap(T('terminal-item'));
    await waitScreen('the second terminal', (_, t) => t.id === second);
    await tap('key-ctrl-d');
    await waitFor('the end notice', async () => /exited/.test((await page.textContent(T('terminal-notice'))) ?? ''));
  });

  if (run.pageErrors.length) throw new Error(`page errors: ${run.pageErrors.join('; ')}`);
  if (csp.length) throw new Error(`${csp.length} CSP violations, the first: ${csp[0]}`);
  const t = await term();
  console.log(JSON.stringify({ ok: true, terminals: [first, second], cols: t.cols, rows: t.rows, screenshots: run.screenshots }));
}

if (!underTestRunner) await run.finish(main);
