// The chat's cards in a real browser: Debian's Chromium driven by playwright-core at a
// phone's size (390x844, touch, scale 2), against a bridge with the demo adapter
// (tests/fixtures/adapters/demo.py), whose one turn emits every block type. Checks a
// shell card (command, monospace output, exit status; a failed one not all red), an
// edit card with its inline diff (line numbers, word marks) inside the call's card, a
// new file without a stray "+", a long diff collapsed, read/search/web/sub-agent/generic
// cards with no raw JSON, a permission card whose 300-character command is wholly
// visible, the answer named by its label, Markdown links (safe ones only) and a bare URL,
// a highlighted code block with a labelled Copy button, tap targets ≥ 44 px, and axe-core
// (injected into the page) with no serious or critical violation on the pairing screen,
// the chat with cards (light and dark) and the session list.
//
//   node web/test/browser-cards.mjs --link '<pairing link>' --screenshots <dir> --cwd <dir>
//
// Prints progress on stderr and one final JSON line on stdout:
// {"ok":true,"axe":{"pairing":{…},"chat":{…},…},"screenshots":[…]}.

import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { PhoneRun, T, waitFor, parseArgs, STEP_TIMEOUT } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
const underTestRunner = Boolean(process.env.NODE_TEST_CONTEXT) && !args.link;
if (underTestRunner) {
  const { test } = await import('node:test');
  test('the chat cards (run directly with --link; bridge/tests/web_cards.rs does)', { skip: 'needs --link' }, () => {});
} else if (!args.link || !args.screenshots || !args.cwd) {
  console.error("usage: node browser-cards.mjs --link '<link>' --screenshots DIR --cwd DIR");
  process.exit(2);
}

const run = new PhoneRun('browser-cards', args.screenshots);
const shot = (name) => run.shot(name);
const step = (name, fn) => run.step(name, fn);
const { screenshots, pageErrors } = run;
let page = null;
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const axeResults = {};

/** Runs axe-core in the page; fails on any serious or critical violation. */
async function axe(name) {
  // Evaluated through the DevTools protocol: the page's CSP forbids inline scripts.
  if (!(await page.evaluate(() => Boolean(window.axe)))) await page.evaluate(`${AXE}\n;true`);
  const result = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      nodes: v.nodes.length,
      targets: v.nodes.slice(0, 40).map((n) => {
        const d = n.any?.[0]?.data;
        return `${n.target.join(' ')}${d?.contrastRatio ? ` (${d.fgColor} on ${d.bgColor}: ${d.contrastRatio})` : ''}`;
      }),
    }));
  });
  const bad = result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  axeResults[name] = { violations: result.length, serious_or_critical: bad.length, ids: result.map((v) => `${v.id}:${v.impact}`) };
  run.log(`axe ${name}: ${JSON.stringify(axeResults[name])}`);
  if (bad.length) throw new Error(`axe-core on ${name}: ${JSON.stringify(bad)}`);
}

/** Every visible button, summary and link-button is at least 44 px high (inline text links excepted). */
async function tapTargets(scope) {
  const small = await page.$$eval(`${scope} button, ${scope} summary, ${scope} select, ${scope} input`, (els) =>
    els
      .filter((e) => e.offsetParent !== null && !e.disabled)
      .map((e) => ({ e, r: e.getBoundingClientRect() }))
      .filter(({ r }) => r.height > 0 && (r.height < 44 || r.width < 44))
      .map(({ e, r }) => `${e.tagName.toLowerCase()}.${e.className} "${e.textContent.trim().slice(0, 30)}" ${Math.round(r.width)}x${Math.round(r.height)}`),
  );
  if (small.length) throw new Error(`tap targets under 44 px: ${small.join('; ')}`);
}

const card = (toolId) => `[data-tool-id="${toolId}"]`;

async function open(toolId) {
  const sel = `${card(toolId)} > details`;
  await page.$eval(sel, (d) => {
    d.open = true;
  });
}

/** Scrolls to the end of the chat (the permission card is the last card). */
async function toEnd() {
  await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
  await page.waitForTimeout(100);
}

/** Scrolls so `sel` starts just under the sticky header (and the session's tabs). */
async function show(sel) {
  await page.$eval(sel, (e) => {
    e.scrollIntoView({ block: 'start' });
    const tops = [...document.querySelectorAll('header, [role="tablist"]')].filter((x) => x.offsetParent !== null).map((x) => x.getBoundingClientRect().bottom);
    window.scrollBy(0, -Math.max(60, ...tops) - 8);
  });
  await page.waitForTimeout(100);
}

async function noRawJson(sel) {
  const text = await page.textContent(sel);
  if (/[{[]\s*"[a-z_]+"\s*:/.test(text)) throw new Error(`${sel} shows raw JSON: ${text.slice(0, 200)}`);
}

async function main() {
  page = await run.launch(chromium);
  const origin = new URL(args.link).origin;

  await step('the pairing screen passes axe-core', async () => {
    await page.goto(`${origin}/`, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector('.view-pair:not([hidden])', { timeout: STEP_TIMEOUT });
    await axe('pairing');
    await shot('00-pairing.png');
  });

  await step('pair', async () => {
    await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
    await waitFor('the link', async () => (await page.getAttribute(T('connection-status'), 'data-state')) === 'connected');
  });

  await step('start a demo session and send a message', async () => {
    await page.click(T('new-session'));
    await waitFor('the demo agent', async () => (await page.$$(`${T('agent-picker')} option[value="demo"]`)).length === 1);
    await page.selectOption(T('agent-picker'), 'demo');
    await page.fill(T('cwd'), args.cwd);
    await page.click(T('start-session'));
    await page.waitForSelector(T('composer'), { state: 'visible', timeout: STEP_TIMEOUT });
    await page.fill(T('composer'), 'show me every card');
    await page.click(T('send'));
    await page.waitForSelector(`${T('permission-card')}[data-state="waiting"]`, { timeout: STEP_TIMEOUT });
  });
  const p = 't1-';

  await step('markdown: safe links, a bare URL, no javascript: link', async () => {
    const links = await page.$$eval('.md a', (as) => as.map((a) => ({ href: a.getAttribute('href'), rel: a.rel, target: a.target, text: a.textContent })));
    const hrefs = links.map((l) => l.href);
    for (const want of ['https://example.com/terminull/docs/relay.md', 'https://example.com/terminull/issues/21', 'mailto:team@example.com'])
      if (!hrefs.includes(want)) throw new Error(`no link to ${want}: ${JSON.stringify(links)}`);
    if (hrefs.some((h) => !/^(https?|mailto):/.test(h))) throw new Error(`an unsafe link: ${hrefs}`);
    if (links.some((l) => !l.rel.includes('noopener') || l.target !== '_blank')) throw new Error(`rel/target: ${JSON.stringify(links)}`);
    const text = await page.textContent('.md');
    if (text.includes('](')) throw new Error('a raw [text](url) is left');
    if (!text.includes('script link')) throw new Error('the unsafe link lost its text');
  });

  await step('a highlighted code block with a labelled Copy button', async () => {
    const block = T('code-block');
    const spans = await page.$$eval(`${block} code .hljs-keyword`, (els) => els.map((e) => e.textContent));
    if (!spans.includes('fn') || !spans.includes('let')) throw new Error(`keywords highlighted: ${spans}`);
    const label = await page.getAttribute(`${block} ${T('code-copy')}`, 'aria-label');
    if (!/copy/i.test(label ?? '')) throw new Error(`copy button label "${label}"`);
    await show(block);
    await page.click(`${block} ${T('code-copy')}`);
    await waitFor('the copy reported', async () => /Copied|Selected/.test(await page.textContent(`${block} ${T('code-copy')}`)));
    const selected = await page.evaluate(() => String(window.getSelection()));
    if (!selected.includes('fn add(a: i32, b: i32)')) throw new Error(`the selection is "${selected.slice(0, 80)}"`);
    await page.evaluate(() => window.getSelection().removeAllRanges());
    await page.emulateMedia({ colorScheme: 'dark' });
    await shot('01b-markdown-code-dark.png');
    await page.emulateMedia({ colorScheme: 'light' });
  });
  await shot('01-markdown-code.png');

  await step('a shell card: the command, monospace output, exit status', async () => {
    await open(`${p}sh`);
    const cmd = await page.textContent(`${card(`${p}sh`)} ${T('shell-command')} code`);
    if (cmd !== 'cargo test -p terminull-web --quiet') throw new Error(`command "${cmd}"`);
    const font = await page.$eval(`${card(`${p}sh`)} .tool-output`, (e) => getComputedStyle(e).fontFamily);
    if (!/mono/i.test(font)) throw new Error(`output font ${font}`);
    const status = await page.textContent(`${card(`${p}sh`)} .result-status`);
    if (status !== 'Succeeded') throw new Error(`status "${status}"`);
    await noRawJson(card(`${p}sh`));
    await open(`${p}shfail`);
    const failed = await page.textContent(`${card(`${p}shfail`)} .result-status`);
    if (failed !== 'Failed · exit 2') throw new Error(`failed status "${failed}"`);
    const [outColor, textColor] = await page.$eval(`${card(`${p}shfail`)} .tool-output`, (e) => [getComputedStyle(e).color, getComputedStyle(document.body).color]);
    if (outColor !== textColor) throw new Error(`failed output drawn in ${outColor}, not the text colour ${textColor}`);
    await show(card(`${p}sh`));
  });
  await shot('02-shell-card.png');

  await step('an edit card: its diff inside the call card, line numbers and word marks', async () => {
    const diffs = await page.$$eval(`${T('block')}[data-block-type="diff"]`, (els) => els.map((e) => e.closest('[data-tool-id]')?.dataset.toolId ?? null));
    if (diffs.some((d) => d == null)) throw new Error(`a diff outside its card: ${diffs}`);
    const sel = `${card(`${p}edit`)} ${T('inline-diff')}`;
    const visible = await page.$$eval(sel, (els) => els.filter((e) => e.offsetParent !== null).length);
    if (visible !== 1) throw new Error(`${visible} diffs shown in the edit card`);
    const marks = await page.$$eval(`${card(`${p}edit`)} .tool-diff-slot .dl.add mark`, (els) => els.map((e) => e.textContent));
    if (!marks.join('').includes('there')) throw new Error(`word marks ${marks}`);
    const nums = await page.$$eval(`${card(`${p}edit`)} .tool-diff-slot .dl.add .ln`, (els) => els.map((e) => e.textContent));
    if (nums.join(',') !== ',2') throw new Error(`the added line's numbers ${nums}`);
    await show(card(`${p}edit`));
  });
  await shot('03-edit-card.png');

  await step('a new file: every line added, no stray "+" line; a long diff collapsed', async () => {
    const lines = await page.$$eval(`${card(`${p}write`)} .tool-diff-slot .dl`, (els) => els.map((e) => [e.className, e.querySelector('.dt')?.textContent]));
    if (lines.length !== 4 || lines.some(([c]) => c !== 'dl add')) throw new Error(`new-file lines ${JSON.stringify(lines)}`);
    if (lines[lines.length - 1][1].trim() === '+') throw new Error('a stray "+" last line');
    const collapsed = await page.$eval(`${card(`${p}long`)} .tool-diff-slot ${T('inline-diff')}`, (e) => e.classList.contains('collapsed'));
    if (!collapsed) throw new Error('the long diff is not collapsed');
    await show(card(`${p}write`));
  });
  await shot('04-write-and-long-diff.png');

  await step('read, search, web, sub-agent (nested) and generic cards, none as raw JSON', async () => {
    for (const id of ['read', 'grep', 'fetch', 'task', 'mcp', 'patch']) {
      await open(`${p}${id}`);
      await noRawJson(card(`${p}${id}`));
    }
    const range = await page.textContent(`${card(`${p}read`)} .tool-body`);
    if (!range.includes('src/main.rs') || !range.includes('lines 10–49')) throw new Error(`read card "${range}"`);
    const count = await page.textContent(`${card(`${p}grep`)} .result-status`);
    if (count !== '3 results') throw new Error(`search count "${count}"`);
    const href = await page.getAttribute(`${card(`${p}fetch`)} .tool-body a`, 'href');
    if (href !== 'https://example.com/docs/relay') throw new Error(`fetch link ${href}`);
    const nested = await page.$$eval(`${card(`${p}task`)} .tool-children > [data-tool-id]`, (els) => els.map((e) => e.dataset.toolId));
    if (nested.join() !== `${p}glob,${p}subgrep`) throw new Error(`nested calls ${nested}`);
    const generic = await page.textContent(`${card(`${p}mcp`)} summary .tool-name`);
    if (generic !== 'github · create_issue') throw new Error(`generic name "${generic}"`);
    await show(card(`${p}task`));
  });
  await shot('05-subagent-card.png');
  await show(card(`${p}mcp`));
  await shot('06-generic-card.png');

  await step('the permission card shows the whole 300-character command, wrapped', async () => {
    const sel = `${T('permission-card')} ${T('shell-command')}`;
    await toEnd();
    const text = await page.textContent(`${sel} code`);
    if (text.length < 300) throw new Error(`the command is ${text.length} characters`);
    const box = await page.$eval(`${sel} pre`, (e) => {
      const r = e.getBoundingClientRect();
      return { right: r.right, sw: e.scrollWidth, cw: e.clientWidth, sh: e.scrollHeight, ch: e.clientHeight };
    });
    if (box.right > 390 || box.sw > box.cw + 1 || box.sh > box.ch + 1) throw new Error(`the command is clipped: ${JSON.stringify(box)}`);
    await tapTargets(T('permission-card'));
    await page.emulateMedia({ colorScheme: 'dark' });
    await axe('chat-dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await axe('chat-light');
    await toEnd();
    await shot('07-permission-300-light.png');
    await page.emulateMedia({ colorScheme: 'dark' });
    await toEnd();
  });
  await shot('08-permission-300-dark.png');

  await step('answered: the card names the option by its label', async () => {
    await page.click(`${T('permission-option')}[data-option-id="allow"]`);
    await page.waitForSelector(T('perm-answer'), { timeout: STEP_TIMEOUT });
    const answer = (await page.textContent(T('perm-answer'))).trim();
    if (answer !== 'Answered: Allow once') throw new Error(`the card says "${answer}"`);
    await page.waitForSelector(`${T('block')}[data-block-type="session_end"]`, { state: 'attached', timeout: STEP_TIMEOUT });
    await toEnd();
  });
  await shot('09-permission-answered.png');

  await step('every block type the demo adapter emits is shown', async () => {
    const types = new Set(await page.$$eval(T('block'), (els) => els.map((e) => e.dataset.blockType)));
    const want = ['agent_info', 'user_message', 'thinking', 'text', 'plan', 'tool_call', 'tool_result', 'diff', 'progress', 'bg_task', 'error', 'session_summary', 'permission_request', 'session_end'];
    const missing = want.filter((t) => !types.has(t));
    if (missing.length) throw new Error(`not shown: ${missing}`);
  });

  await step('every card: tap targets ≥ 44 px, axe-core clean', async () => {
    for (const id of ['sh', 'shfail', 'edit', 'write', 'long', 'patch', 'read', 'grep', 'fetch', 'task', 'mcp', 'perm']) await open(`${p}${id}`);
    await tapTargets('.view-session');
    await axe('chat-all-open');
  });

  await step('the session list passes axe-core', async () => {
    await page.click('button.back');
    await page.waitForSelector(T('session-item'), { timeout: STEP_TIMEOUT });
    await axe('session-list');
  });
  await shot('10-session-list.png');

  if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.join(' | ')}`);
  console.log(JSON.stringify({ ok: true, axe: axeResults, screenshots }));
}

if (!underTestRunner) await run.finish(main);
