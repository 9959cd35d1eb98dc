// The session list and the agent picker in a real browser: Debian's Chromium driven by
// playwright-core at a phone-sized viewport (390x844, touch, scale 2), against a bridge
// (echo adapter) holding 20 sessions (18 started by a device, 2 by `terminull chat`),
// one agent whose CLI is missing and one whose start fails. Checks the titled rows in
// activity order, the "From your terminal" section, search (a title, and a word found
// only in a message, by the bridge), rename, archive (and the Archived filter), delete
// with its confirmation, the picker (installed first, the missing one greyed with its
// install hint, never pre-selected), and that a failed start leaves no session.
//
//   node web/test/browser-list.mjs --link '<pairing link>' --expect <file.json> \
//        --screenshots <dir> --cwd <dir>
//
// <file.json>: {"app": [ids newest first], "terminal": [ids], "titles": {id: title},
// "needle": word, "needle_session": id}. Prints progress on stderr and one final JSON
// line on stdout: {"ok":true,"renamed":id,"archived":id,"deleted":id,"screenshots":[…]}.

import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PhoneRun, T, sleep, waitFor, parseArgs, STEP_TIMEOUT } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
const underTestRunner = Boolean(process.env.NODE_TEST_CONTEXT) && !args.link;
if (underTestRunner) {
  const { test } = await import('node:test');
  test('the session list and the agent picker (run directly with --link; bridge/tests/web_list.rs does)', { skip: 'needs --link' }, () => {});
} else if (!args.link || !args.expect || !args.screenshots || !args.cwd) {
  console.error("usage: node browser-list.mjs --link '<link>' --expect FILE --screenshots DIR --cwd DIR");
  process.exit(2);
}

const run = new PhoneRun('browser-list', args.screenshots);
const log = (...m) => run.log(...m);
const shot = (name) => run.shot(name);
const step = (name, fn) => run.step(name, fn);
const { screenshots, pageErrors } = run;
let page = null;

const APP_ROWS = `.session-list:not(.external) ${T('session-item')}`;
const TERMINAL_ROWS = `.session-list.external ${T('session-item')}`;
const ids = (sel) => page.$$eval(sel, (els) => els.map((e) => e.dataset.sessionId));
const rowOf = (id) => `li.session-row[data-session-id="${id}"]`;

async function search(q) {
  await page.fill(T('session-search'), q);
}

async function atLeast44(sel) {
  const bb = await page.locator(sel).first().boundingBox();
  if (!bb || bb.height < 44 || bb.width < 44) throw new Error(`${sel} is ${bb?.width}x${bb?.height}, under 44 px`);
}

async function main() {
  const expect = JSON.parse(readFileSync(args.expect, 'utf8'));
  page = await run.launch(chromium);

  await step('pair', async () => {
    await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
    await waitFor('the link', async () => (await page.getAttribute(T('connection-status'), 'data-state')) === 'connected');
  });

  await step('20 sessions: titled rows, newest activity first; the terminal’s under "From your terminal"', async () => {
    await waitFor('18 rows', async () => (await ids(APP_ROWS)).length === expect.app.length);
    const listed = await ids(APP_ROWS);
    if (JSON.stringify(listed) !== JSON.stringify(expect.app)) throw new Error(`order ${listed} expected ${expect.app}`);
    const terminal = await ids(TERMINAL_ROWS);
    if (JSON.stringify([...terminal].sort()) !== JSON.stringify([...expect.terminal].sort())) throw new Error(`terminal rows ${terminal}`);
    for (const [id, title] of Object.entries(expect.titles)) {
      const shown = await page.textContent(`${rowOf(id)} ${T('session-title')}`);
      if (shown !== title) throw new Error(`row ${id} titled "${shown}", expected "${title}"`);
    }
    const first = expect.app[0];
    const when = await page.textContent(`${rowOf(first)} ${T('session-when')}`);
    if (!/just now|min/.test(when)) throw new Error(`the newest row says "${when}"`);
    const preview = await page.textContent(`${rowOf(first)} ${T('session-preview')}`);
    if (!preview.startsWith('You said:')) throw new Error(`the newest row's preview "${preview}"`);
    if (await page.isVisible(T('external-empty'))) throw new Error('"From your terminal" says it is empty');
    await atLeast44(T('session-actions'));
    await atLeast44(T('session-search'));
  });
  await shot('01-list-20-sessions.png');

  await step('search a title', async () => {
    const target = expect.app[5];
    await search(expect.titles[target].slice(0, 7));
    await waitFor('one row', async () => JSON.stringify(await ids(APP_ROWS)) === JSON.stringify([target]));
  });
  await shot('02-search-title.png');

  await step('search a word only a message holds: the bridge finds it', async () => {
    await search(expect.needle);
    await waitFor('the message match', async () => JSON.stringify(await ids(APP_ROWS)) === JSON.stringify([expect.needle_session]));
    const preview = await page.textContent(`${rowOf(expect.needle_session)} ${T('session-preview')}`);
    if (!preview.includes(expect.needle)) throw new Error(`the snippet "${preview}"`);
    await search('no session says this');
    await page.waitForSelector(T('sessions-empty'), { timeout: STEP_TIMEOUT });
    await search('');
    await waitFor('every row back', async () => (await ids(APP_ROWS)).length === expect.app.length);
  });
  await shot('03-search-message.png');

  const [renamed, archived, deleted] = [expect.app[1], expect.app[2], expect.app[3]];
  await step('rename', async () => {
    await page.click(`${rowOf(renamed)} ${T('session-actions')}`);
    await page.fill(`${rowOf(renamed)} ${T('rename-input')}`, 'Renamed on the phone');
    await shot('04-row-actions.png');
    await page.click(`${rowOf(renamed)} ${T('rename-save')}`);
    await waitFor('the new title', async () => (await page.textContent(`${rowOf(renamed)} ${T('session-title')}`)) === 'Renamed on the phone');
    await page.click(T('session-refresh')).catch(() => {});
  });

  await step('archive: gone from the list, under Archived', async () => {
    await page.click(`${rowOf(archived)} ${T('session-actions')}`);
    await page.click(`${rowOf(archived)} ${T('archive-session')}`);
    await waitFor('the row gone', async () => !(await ids(APP_ROWS)).includes(archived));
    await page.click(T('archived-filter'));
    await waitFor('the archived row', async () => JSON.stringify(await ids(APP_ROWS)) === JSON.stringify([archived]));
    await shot('05-archived.png');
    await page.click(T('archived-filter'));
    await waitFor('the list back', async () => (await ids(APP_ROWS)).length === expect.app.length - 1);
  });

  await step('delete asks once more, then the row goes', async () => {
    await page.click(`${rowOf(deleted)} ${T('session-actions')}`);
    await page.click(`${rowOf(deleted)} ${T('delete-session')}`);
    const asks = await page.textContent(`${rowOf(deleted)} ${T('delete-session')}`);
    if (!/again/.test(asks)) throw new Error(`the delete button says "${asks}" after one tap`);
    if (!(await ids(APP_ROWS)).includes(deleted)) throw new Error('one tap deleted the session');
    await shot('06-delete-confirm.png');
    await page.click(`${rowOf(deleted)} ${T('delete-session')}`);
    await waitFor('the row gone', async () => !(await ids(APP_ROWS)).includes(deleted));
  });

  await step('the list from the bridge again: the rename kept, the deleted gone', async () => {
    await page.reload({ waitUntil: 'domcontentloaded' });
    await waitFor('the rows', async () => (await ids(APP_ROWS)).length === expect.app.length - 2);
    const t = await page.textContent(`${rowOf(renamed)} ${T('session-title')}`);
    if (t !== 'Renamed on the phone') throw new Error(`after reload the renamed row says "${t}"`);
    if ((await ids(APP_ROWS)).includes(deleted)) throw new Error('the deleted session is listed again');
  });

  await step('a session of echo: no Continue in Terminal, 44 px back, the answer named by its label', async () => {
    await page.click(`${rowOf(expect.app[0])} ${T('session-item')}`);
    await page.waitForSelector(`${T('block')}[data-block-type="agent_info"]`, { state: 'attached', timeout: STEP_TIMEOUT });
    if (await page.isVisible(T('continue-in-terminal'))) throw new Error('Continue in Terminal is offered for echo');
    await atLeast44('button.back');
    await page.fill(T('composer'), 'ask nicely');
    await page.click(T('send'));
    const option = `${T('permission-option')}[data-option-id="allow"]`;
    await page.waitForSelector(option, { timeout: STEP_TIMEOUT });
    const label = (await page.textContent(option)).trim();
    await page.click(option);
    await page.waitForSelector(T('perm-answer'), { timeout: STEP_TIMEOUT });
    const answer = (await page.textContent(T('perm-answer'))).trim();
    if (answer !== `Answered: ${label}`) throw new Error(`the card says "${answer}" for the option labelled "${label}"`);
    const started = await page.$$eval(`${T('block')}[data-block-type="agent_info"]`, (els) => els.filter((e) => !e.hidden).length);
    if (started !== 1) throw new Error(`${started} "Session started" lines shown`);
    await shot('07a-session-answered.png');
    await page.click('button.back');
    await atLeast44(T('session-refresh'));
  });

  await step('the agent picker: installed first, the missing one greyed with its hint, never pre-selected', async () => {
    await page.click(T('new-session'));
    await waitFor('the agents', async () => (await page.$$(`${T('agent-picker')} option`)).length >= 3);
    const options = await page.$$eval(`${T('agent-picker')} option`, (os) => os.map((o) => ({ v: o.value, d: o.disabled, t: o.textContent })));
    const missingAt = options.findIndex((o) => o.v === 'broken-not-installed');
    if (missingAt < 0 || !options[missingAt].d) throw new Error(`the missing agent ${JSON.stringify(options)}`);
    if (options.slice(0, missingAt).some((o) => o.d)) throw new Error(`not installed first: ${JSON.stringify(options)}`);
    if (options.slice(missingAt).some((o) => !o.d)) throw new Error(`an installed agent after a missing one: ${JSON.stringify(options)}`);
    const chosen = await page.$eval(T('agent-picker'), (s) => s.value);
    if (chosen === 'broken-not-installed' || !chosen) throw new Error(`pre-selected "${chosen}"`);
    const hint = await page.textContent(`${T('missing-agent')}[data-agent-id="broken-not-installed"]`);
    if (!hint.includes('terminull agents')) throw new Error(`the hint says "${hint}"`);
  });
  await shot('07-agent-picker.png');

  await step('a start that fails shows why and leaves no session', async () => {
    await page.selectOption(T('agent-picker'), 'broken-start-fails');
    await page.fill(T('cwd'), args.cwd);
    await page.click(T('start-session'));
    await page.waitForSelector('.form-error:not([hidden])', { timeout: STEP_TIMEOUT });
    const text = await page.textContent('.form-error');
    if (!/could not start: .missing-cli. was not found on PATH\.$/.test(text) || /JSON-RPC/.test(text)) throw new Error(`the error says "${text}"`);
    await shot('08-start-failed.png');
    await page.click('button.back');
    await page.click(T('session-refresh'));
    await sleep(500);
    const n = (await ids(APP_ROWS)).length;
    if (n !== expect.app.length - 2) throw new Error(`${n} rows after the failed start`);
  });

  if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.join(' | ')}`);
  console.log(JSON.stringify({ ok: true, renamed, archived, deleted, screenshots }));
}

if (!underTestRunner) await run.finish(main);
