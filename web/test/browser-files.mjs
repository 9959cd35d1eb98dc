// The Files and Changes tabs in a real browser: Debian's Chromium driven by
// playwright-core at a phone's size (390x844, touch, scale 2), against a bridge's LAN
// server whose echo session works in a scratch git repository. Files: the listing
// (folders first, sizes), a breadcrumb, a Rust file highlighted with line numbers, an
// image, a binary file and a too-large file refused with their sizes, edit and save,
// and a save refused because the file changed on disk meanwhile. Changes: the
// modified, unstaged and untracked files, a diff equal to `git diff`, discard after a
// confirmation, stage and commit, a failing pre-commit hook's words, unstage, switch
// branch. bridge/tests/web_files.rs runs it and checks the repository afterwards.
//
//   node web/test/browser-files.mjs --link '<pairing link>' --expect <file.json> --screenshots <dir>
//
// <file.json>: {"session": id, "repo": its directory, "main_rs": text, "diff": `git diff
// -- src/main.rs`, "message": commit message, "hook_says": a line the hook prints,
// "todo": what the script writes into todo.txt behind the page's back}. Prints progress on
// stderr and one JSON line on stdout: {"ok":true,"screenshots":[…]}.

import { chromium } from 'playwright-core';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PhoneRun, T, waitFor, parseArgs, STEP_TIMEOUT } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
const underTestRunner = Boolean(process.env.NODE_TEST_CONTEXT) && !args.link;
if (underTestRunner) {
  const { test } = await import('node:test');
  test('the Files and Changes tabs (run directly with --link; bridge/tests/web_files.rs does)', { skip: 'needs --link' }, () => {});
} else if (!args.link || !args.expect || !args.screenshots) {
  console.error("usage: node browser-files.mjs --link '<link>' --expect FILE --screenshots DIR");
  process.exit(2);
}

const run = new PhoneRun('browser-files', args.screenshots);
const shot = (name) => run.shot(name);
const step = (name, fn) => run.step(name, fn);
const { screenshots, pageErrors } = run;
let page = null;

const entry = (name) => `${T('file-entry')}[data-name="${name}"]`;
const row = (kind, path) => `${T('change-row')}[data-kind="${kind}"][data-path="${path}"]`;
const names = () => page.$$eval(T('file-entry'), (els) => els.map((e) => e.dataset.name));
const paths = (kind) => page.$$eval(`${T('change-row')}[data-kind="${kind}"]`, (els) => els.map((e) => e.dataset.path));

async function atLeast44(sel) {
  for (const bb of await page.locator(sel).evaluateAll((els) => els.map((e) => e.getBoundingClientRect().toJSON()))) {
    if (bb.height < 44 || bb.width < 44) throw new Error(`${sel} is ${bb.width}x${bb.height}, under 44 px`);
  }
}

/** No element of the panel is wider than the screen (the code and diffs scroll inside their box). */
async function noPageOverflow() {
  const w = await page.evaluate(() => document.documentElement.scrollWidth);
  if (w > 390) throw new Error(`the page is ${w} px wide on a 390 px screen`);
}

async function errorText(testid) {
  await page.waitForSelector(`${T(testid)}`, { timeout: STEP_TIMEOUT });
  return (await page.textContent(T(testid))).trim();
}

async function main() {
  const expect = JSON.parse(readFileSync(args.expect, 'utf8'));
  page = await run.launch(chromium, { colorScheme: 'dark' });

  await step('pair over the LAN and open the session', async () => {
    await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
    await waitFor('the link', async () => (await page.getAttribute(T('connection-status'), 'data-state')) === 'connected');
    const bridge = await page.evaluate(() => window.terminull.bridgeId);
    await page.evaluate(([b, s]) => (location.hash = `#b=${encodeURIComponent(b)}&s=${encodeURIComponent(s)}`), [bridge, expect.session]);
    await page.waitForSelector(T('tab-files'), { state: 'visible', timeout: STEP_TIMEOUT });
    await atLeast44(`${T('session-tabs')} button`);
  });

  await step('Files: folders first, then files by name, with sizes', async () => {
    await page.click(T('tab-files'));
    await page.waitForSelector(T('file-list'), { timeout: STEP_TIMEOUT });
    const listed = await names();
    const want = ['.git', 'assets', 'src', 'README.md', 'big.log', 'data.bin', 'todo.txt'];
    if (JSON.stringify(listed) !== JSON.stringify(want)) throw new Error(`listed ${listed}, expected ${want}`);
    const meta = await page.textContent(`${entry('data.bin')} .fr-meta`);
    if (!meta.startsWith('4.0 KiB')) throw new Error(`data.bin's row says "${meta}"`);
    if (!(await page.textContent(`${entry('src')} .fr-meta`)).startsWith('folder')) throw new Error('src is not said to be a folder');
    await atLeast44(T('file-entry'));
    await noPageOverflow();
  });
  await shot('01-file-list.png');

  await step('a Rust file, highlighted, with line numbers', async () => {
    await page.click(entry('src'));
    await page.waitForSelector(entry('main.rs'), { timeout: STEP_TIMEOUT });
    const crumbs = await page.$$eval(T('crumb'), (els) => els.map((e) => e.dataset.path));
    if (JSON.stringify(crumbs) !== JSON.stringify(['', 'src'])) throw new Error(`breadcrumb ${crumbs}`);
    await page.click(entry('main.rs'));
    await page.waitForSelector(`${T('file-text')}[data-language="rust"]`, { timeout: STEP_TIMEOUT });
    const keywords = await page.$$eval(`${T('file-text')} .hljs-keyword`, (els) => els.map((e) => e.textContent));
    if (!keywords.includes('fn')) throw new Error(`no highlighted keyword fn (keywords: ${keywords})`);
    const lines = await page.$$eval(`${T('file-text')} .line`, (els) => els.map((e) => e.textContent));
    const want = expect.main_rs.replace(/\n$/, '').split('\n');
    if (JSON.stringify(lines) !== JSON.stringify(want)) throw new Error(`the file's lines differ:\n${lines.join('\n')}`);
    await noPageOverflow();
  });
  await shot('02-highlighted-file.png');

  await step('back by the breadcrumb; an image is shown', async () => {
    await page.click(`${T('crumb')}[data-path=""]`);
    await page.waitForSelector(entry('assets'), { timeout: STEP_TIMEOUT });
    await page.click(entry('assets'));
    await page.click(entry('logo.svg'));
    await page.waitForSelector(T('file-image'), { timeout: STEP_TIMEOUT });
    await waitFor('the image decoded', () => page.$eval(T('file-image'), (img) => img.complete && img.naturalWidth > 0));
  });
  await shot('03-image.png');

  await step('a binary file and a too-large file are refused with their sizes', async () => {
    await page.click(`${T('crumb')}[data-path=""]`);
    await page.click(entry('data.bin'));
    const binary = await errorText('files-error');
    if (!/binary/.test(binary) || !/4096 bytes/.test(binary)) throw new Error(`data.bin: "${binary}"`);
    await shot('04-binary-refused.png');
    await page.click(`${T('crumb')}[data-path=""]`);
    await page.click(entry('big.log'));
    await waitFor("the size refusal", async () => /300(\.0)? KiB/.test((await page.textContent(T('files-error')).catch(() => '')) ?? ''));
    const big = await page.textContent(T('files-error'));
    if (!/256 KiB/.test(big)) throw new Error(`big.log: "${big}"`);
  });

  await step('edit and save a text file; a save after the file changed on the computer is refused', async () => {
    await page.click(`${T('crumb')}[data-path=""]`);
    await page.click(entry('todo.txt'));
    await page.waitForSelector(`${T('file-text')}[data-language="plain"]`, { timeout: STEP_TIMEOUT });
    await page.click(T('file-edit'));
    await page.fill(T('file-editor'), '- buy milk\n- call the plumber\n');
    await page.click(T('file-save'));
    await waitFor('the saved text shown', async () => (await page.$$eval(`${T('file-text')} .line`, (els) => els.map((e) => e.textContent)).catch(() => [])).join('|') === '- buy milk|- call the plumber');
    if (readFileSync(join(expect.repo, 'todo.txt'), 'utf8') !== '- buy milk\n- call the plumber\n') throw new Error('the saved text is not on disk');
    await page.click(T('file-edit'));
    await page.fill(T('file-editor'), 'my edit\n');
    writeFileSync(join(expect.repo, 'todo.txt'), expect.todo);
    await page.click(T('file-save'));
    const refused = await errorText('save-error');
    if (!/changed on disk/.test(refused)) throw new Error(`the conflict says "${refused}"`);
    await shot('05a-save-conflict.png');
    await page.click(T('file-reload'));
    await waitFor('the file from disk', async () => (await page.$$eval(`${T('file-text')} .line`, (els) => els.map((e) => e.textContent)).catch(() => [])).join('\n') === expect.todo.replace(/\n$/, ''));
  });

  await step('Changes: modified, untracked, the branch', async () => {
    await page.click(T('tab-changes'));
    await page.waitForSelector(T('changes-unstaged'), { timeout: STEP_TIMEOUT });
    const unstaged = await paths('unstaged');
    if (JSON.stringify(unstaged.sort()) !== JSON.stringify(['README.md', 'src/main.rs'])) throw new Error(`unstaged ${unstaged}`);
    const untracked = await paths('untracked');
    if (JSON.stringify(untracked) !== JSON.stringify(['todo.txt'])) throw new Error(`untracked ${untracked}`);
    if ((await page.textContent(T('git-branch'))).trim() !== '⎇ main') throw new Error('the branch is not main');
    await atLeast44(`${T('changes-panel')} button:not([disabled])`);
    await noPageOverflow();
  });
  await shot('05-changes-list.png');

  await step('the diff of src/main.rs equals `git diff`', async () => {
    await page.click(`${row('unstaged', 'src/main.rs')} ${T('change-toggle')}`);
    await page.waitForSelector(`${row('unstaged', 'src/main.rs')} ${T('diff-body')}`, { timeout: STEP_TIMEOUT });
    const shown = await page.$$eval(`${row('unstaged', 'src/main.rs')} ${T('diff-body')} .dt`, (els) => els.map((e) => e.textContent).join('\n'));
    if (shown !== expect.diff.replace(/\n$/, '')) throw new Error(`the diff shown:\n${shown}\n--- git diff:\n${expect.diff}`);
    const numbers = await page.$$eval(`${row('unstaged', 'src/main.rs')} .dl.add .ln:nth-child(2)`, (els) => els.map((e) => e.textContent));
    if (!numbers.length || numbers.some((n) => !/^\d+$/.test(n))) throw new Error(`added lines without numbers: ${numbers}`);
    await noPageOverflow();
    await page.locator(`${row('unstaged', 'src/main.rs')} ${T('diff-body')}`).scrollIntoViewIfNeeded();
  });
  await shot('06-diff.png');

  await step('discard README.md after the confirmation', async () => {
    await page.click(`${row('unstaged', 'README.md')} ${T('discard')}`);
    await page.waitForSelector(`${T('confirm-dialog')}[open]`, { timeout: STEP_TIMEOUT });
    await shot('07-discard-confirm.png');
    await page.click(T('confirm-cancel'));
    if (!(await paths('unstaged')).includes('README.md')) throw new Error('Cancel discarded the file');
    await page.click(`${row('unstaged', 'README.md')} ${T('discard')}`);
    await page.click(T('confirm-ok'));
    await waitFor('README.md gone', async () => !(await paths('unstaged')).includes('README.md'));
  });

  await step('stage src/main.rs and commit it', async () => {
    await page.click(`${row('unstaged', 'src/main.rs')} ${T('stage')}`);
    await waitFor('src/main.rs staged', async () => (await paths('staged')).includes('src/main.rs'));
    await page.fill(T('commit-message'), expect.message);
    await page.click(T('commit'));
    await waitFor('the commit listed', async () => ((await page.textContent(`${T('commit-row')}:first-child .cm-subject`).catch(() => '')) ?? '') === expect.message);
    if ((await paths('staged')).length) throw new Error('files still staged after the commit');
  });

  await step('a failing pre-commit hook: its words are shown', async () => {
    await page.click(`${row('untracked', 'todo.txt')} ${T('stage')}`);
    await waitFor('todo.txt staged', async () => (await paths('staged')).includes('todo.txt'));
    await page.fill(T('commit-message'), 'add my notes');
    await page.click(T('commit'));
    const text = await errorText('git-error');
    if (!text.includes(expect.hook_says) || !/pre-commit hook/.test(text)) throw new Error(`the error says "${text}"`);
    await page.locator(T('git-error')).scrollIntoViewIfNeeded();
    await noPageOverflow();
  });
  await shot('08-hook-error.png');

  await step('unstage, then switch to the other branch (the tree is clean)', async () => {
    await page.click(`${row('staged', 'todo.txt')} ${T('unstage')}`);
    await waitFor('todo.txt untracked again', async () => (await paths('untracked')).includes('todo.txt'));
    await page.click(`${T('branch-row')}[data-branch="feature"] ${T('switch-branch')}`);
    await waitFor('on feature', async () => (await page.textContent(T('git-branch'))).trim() === '⎇ feature');
  });
  await shot('09-switched.png');

  await step('light mode: a file and the commits', async () => {
    await page.emulateMedia({ colorScheme: 'light' });
    await page.click(T('tab-files'));
    await page.click(`${T('crumb')}[data-path=""]`).catch(() => {});
    await page.click(entry('src'));
    await page.click(entry('main.rs'));
    await page.waitForSelector(`${T('file-text')}[data-language="rust"]`, { timeout: STEP_TIMEOUT });
    await shot('10-light-file.png');
    await page.click(T('tab-changes'));
    await page.waitForSelector(T('commit-list'), { timeout: STEP_TIMEOUT });
    await shot('11-light-changes.png');
  });

  await step('Chat is still there', async () => {
    await page.click(T('tab-chat'));
    await page.waitForSelector(T('composer'), { state: 'visible', timeout: STEP_TIMEOUT });
    if (await page.isVisible(T('changes-panel'))) throw new Error('the Changes panel shows on Chat');
  });

  if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.join(' | ')}`);
  console.log(JSON.stringify({ ok: true, screenshots }));
}

if (!underTestRunner) await run.finish(main);
