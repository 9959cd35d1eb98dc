// The page in Chromium against an in-process fake bridge behind a "relay"
// (Playwright routes the page's HTTP and WebSocket traffic to tools/fake-bridge.mjs;
// no server, no network): every block type rendered, the model picker, tool-call
// cards, permission options, stop, the queue, the slash palette with the agent's
// commands, hostile blocks counted, a reload that resumes from the newest seq
// held, and streamed appends rebuilt with a gap repaired by a resume. Skipped where
// /usr/bin/chromium or playwright-core is missing.
// Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FakeBridge } from '../tools/fake-bridge.mjs';
import * as c from '../src/crypto.js';
import { Transcript, displayKey } from '../src/transcript.js';

const web = join(dirname(fileURLToPath(import.meta.url)), '..');
const CHROMIUM = '/usr/bin/chromium';
let chromium = null;
try {
  ({ chromium } = await import('playwright-core'));
} catch {
  /* not installed */
}
const skip = !existsSync(CHROMIUM) ? `${CHROMIUM} missing` : !chromium ? 'playwright-core missing' : false;
const ORIGIN = 'http://bridge.test';
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const T = (id) => `[data-testid="${id}"]`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, fn, timeout = 10000) {
  const end = Date.now() + timeout;
  while (Date.now() < end) {
    const v = await fn();
    if (v) return v;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const SLASH = [
  { name: 'help', description: 'List the commands this session understands', source: 'bridge' },
  { name: 'compact', description: 'Summarize the conversation to free context', source: 'agent' },
];

function blocks() {
  let seq = 0;
  const b = (x) => ({ seq: ++seq, ts: 1767225600 + seq, ...x });
  return [
    b({ type: 'agent_info', agent_id: 'claude', name: 'Claude Code', version: '2.1.3', model: 'opus', cap_images: false, cap_documents: false, cap_thinking: true, cap_permissions: true, cap_subagents: false, cap_interrupt: true, cap_input_during_turn: false, cap_terminal: false, provides_models: true, provides_usage: true, slash_commands: SLASH }),
    b({ type: 'user_message', text: 'Run the tests' }),
    b({ type: 'thinking', id: 'th', text: 'The user wants', done: false }),
    b({ type: 'thinking', id: 'th', text: 'The user wants the suite run.', done: true }),
    b({ type: 'text', id: 'm', text: 'Running:\n```sh\ncargo te', done: false }),
    b({
      type: 'text',
      id: 'm',
      text: 'Running:\n```sh\ncargo test\n```\n\n| crate | ok |\n|---|---|\n| parser | yes |\n\n<img src=x onerror="window.pwned=1"> **done**',
      done: true,
    }),
    b({ type: 'tool_call', id: 'call_1', name: 'Bash', input: { command: 'cargo test' }, status: 'running', title: 'Run tests' }),
    b({ type: 'tool_call', id: 'call_1', name: 'Bash', input: { command: 'cargo test' }, status: 'done', title: 'Run tests' }),
    b({ type: 'tool_result', tool_call_id: 'call_1', output: 'test result: ok. 42 passed', is_error: false }),
    b({
      type: 'permission_request',
      request_id: 'perm_1',
      tool: 'Bash',
      input: { command: 'rm -rf target/' },
      options: [
        { id: 'allow', label: 'Allow', kind: 'allow_once' },
        { id: 'always', label: 'Always allow', kind: 'allow_always' },
        { id: 'deny', label: 'Deny', kind: 'reject_once' },
      ],
    }),
    b({ type: 'plan', entries: [{ content: 'Run the suite', status: 'completed' }, { content: 'Fix the parser', status: 'in_progress' }] }),
    b({ type: 'diff', path: 'src/parser.rs', change: { format: 'unified', patch: '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n' } }),
    b({ type: 'progress', id: 'p', message: 'Indexing', current: 1, total: 4, done: false }),
    b({ type: 'progress', id: 'p', message: 'Indexed', done: true }),
    b({ type: 'bg_task', id: 'dev', title: 'npm run dev', status: 'running', output: 'ready\n' }),
    b({ type: 'error', message: 'A recoverable problem', recoverable: true, code: 'model_error' }),
    b({ type: 'session_summary', title: 'Fix the parser', usage: { input_tokens: 10, output_tokens: 5, cost_usd: 0.01 } }),
  ];
}

/** Chromium with the page's origin routed to `bridge` (a relay unless `bridge.direct`). */
async function launch(bridge) {
  const failures = [];
  const state = { shortCode: null };
  const userDataDir = mkdtempSync(join(tmpdir(), 'terminull-ui-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
    colorScheme: 'dark',
  });
  const close = async () => {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  };
  try {
    await context.route(`${ORIGIN}/**`, async (route) => {
      const url = new URL(route.request().url());
      const files = { '/': 'index.html', '/pair': 'index.html', '/app.js': 'app.js', '/style.css': 'style.css' };
      const types = { html: 'text/html; charset=utf-8', js: 'text/javascript', css: 'text/css' };
      if (files[url.pathname]) {
        const f = files[url.pathname];
        return route.fulfill({ status: 200, headers: { 'content-type': types[f.split('.').pop()], 'content-security-policy': CSP }, body: readFileSync(f === 'app.js' ? join(web, 'dist', f) : join(web, f)) });
      }
      if (url.pathname === '/v1/server') return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ kind: bridge.direct ? 'lan' : 'relay' }) });
      if (url.pathname === `/v1/bridges/${bridge.bridgeId}/pair` && route.request().method() === 'POST') {
        const answer = bridge.pair(JSON.parse(route.request().postData()));
        state.shortCode = answer.shortCode ?? null;
        return route.fulfill({ status: answer.status, contentType: 'application/json', body: JSON.stringify(answer.body) });
      }
      return route.fulfill({ status: 404, body: 'not found' });
    });
    await context.routeWebSocket(`ws://bridge.test/v1/client`, (ws) => {
      const conn = bridge.connect((text) => ws.send(text));
      ws.onMessage((m) => {
        try {
          conn.receive(String(m));
        } catch (e) {
          failures.push(String(e.stack ?? e));
        }
      });
      ws.onClose(() => (conn.closed = true));
    });
    const page = context.pages()[0] ?? (await context.newPage());
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    return { context, page, failures, pageErrors, state, close };
  } catch (e) {
    await close();
    throw e;
  }
}

test('the page renders every block type and drives a session through a relay', { skip, timeout: 120000 }, async () => {
  const bridge = new FakeBridge({
    direct: false,
    agents: [
      { agent_id: 'echo', display_name: 'Echo', provides_models: false },
      { agent_id: 'claude', display_name: 'Claude Code', version: '2.1.3', provides_models: true },
    ],
  });
  bridge.handlers.list_models = () => ({
    kind: 'models',
    models: [
      { id: 'sonnet', name: 'Sonnet', is_default: true },
      { id: 'opus', name: 'Opus' },
    ],
  });
  const shots = join(tmpdir(), 'terminull-ui-test');
  mkdirSync(shots, { recursive: true });
  const { page, failures, pageErrors, state, close } = await launch(bridge);
  try {
    // Pairing.
    await page.goto(bridge.pairingLink(ORIGIN));
    await page.waitForSelector(T('short-code'));
    assert.equal((await page.textContent(T('short-code'))).trim(), state.shortCode);
    await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`);
    assert.equal((await page.textContent(T('path'))).trim(), 'via relay');
    await page.waitForSelector(T('external-empty'));

    // New session with a model.
    await page.click(T('new-session'));
    await until('the agents', () => page.$$eval(`${T('agent-picker')} option`, (os) => os.length === 2));
    await page.selectOption(T('agent-picker'), 'claude');
    await until('the models', () => page.$$eval(`${T('model-picker')} option`, (os) => os.map((o) => o.value).join() === ',sonnet,opus'));
    assert.equal(await page.inputValue(T('model-picker')), 'sonnet', 'the default model is preselected');
    await page.selectOption(T('model-picker'), 'opus');
    await page.fill(T('cwd'), '/home/ada/parser');
    await page.click(T('start-session'));
    await until('the session_request', () => bridge.controls.find((m) => m.type === 'session_request'));
    const request = bridge.controls.find((m) => m.type === 'session_request');
    assert.equal(request.agent, 'claude');
    assert.equal(request.model, 'opus');
    assert.equal(request.cwd, '/home/ada/parser');
    await page.waitForSelector(T('composer'), { state: 'visible' });

    // The relay hands out the token, then the blocks flow (plus two hostile frames).
    bridge.grantToken('s-1');
    const all = blocks();
    const conn = bridge.connFor('s-1');
    for (const b of all) {
      const frame = bridge.emit('s-1', b);
      if (b.seq === 6) {
        conn.deliver(frame); // replayed: the counter refuses it
        // Forged under a key of the relay's own (and relabelled): refused. (Sealed
        // under the session's own sealer it would take a counter and the next genuine
        // block would show one missing.)
        const bad = c.sealBlock(new c.Sealer(c.randomBytes(32), 'block'), 's-1', 'error', false, 1, JSON.stringify({ type: 'text', seq: 99, ts: 1, id: 'x', text: 'forged', done: true }));
        conn.deliver(bad);
      }
    }
    const expected = new Transcript(all).entries(displayKey).map((b) => b.seq);
    await until('every block', async () => (await page.$$(T('block'))).length === expected.length);
    const shown = await page.$$eval(T('block'), (els) => els.map((e) => [Number(e.dataset.seq), e.dataset.blockType]));
    assert.deepEqual(shown.map(([s]) => s).sort((a, b) => a - b), expected);
    // A streamed id is one element with its newest chunk.
    const text = await page.$(`${T('block')}[data-block-type="text"]`);
    assert.equal(await text.getAttribute('data-seq'), '6');
    assert.equal(await text.$eval('pre code', (e) => e.textContent), 'cargo test');
    assert.deepEqual(await text.$$eval('td', (tds) => tds.map((t) => t.textContent)), ['parser', 'yes']);
    assert.match(await text.textContent(), /<img src=x onerror="window.pwned=1">/);
    assert.equal(await page.$$eval('.transcript img, .transcript script', (e) => e.length), 0, 'network text is never HTML');
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    // The tool call is one card, done, with its result inside.
    const card = await page.$(`${T('block')}[data-block-type="tool_call"]`);
    assert.equal(await card.getAttribute('data-seq'), '8');
    assert.match(await card.getAttribute('class'), /status-done/);
    assert.ok(await card.$(`${T('block')}[data-block-type="tool_result"]`), 'the result sits in its card');
    assert.equal(await page.getAttribute(`${T('block')}[data-block-type="thinking"]`, 'data-seq'), '4');
    assert.equal(await page.getAttribute(`${T('block')}[data-block-type="progress"]`, 'data-seq'), '14');
    // Hostile frames: counted and shown discreetly.
    await until('the refusals', async () => (await page.textContent(T('rejected'))).includes('2'));
    await page.screenshot({ path: join(shots, 'ui-blocks.png'), fullPage: true });

    // Permission with three options; the answer names the option.
    const options = await page.$$eval(`${T('permission-card')} ${T('permission-option')}`, (os) => os.map((o) => o.dataset.optionId));
    assert.deepEqual(options, ['allow', 'always', 'deny']);
    await page.click(`${T('permission-option')}[data-option-id="always"]`);
    const perm = await until('the permission_response', () => bridge.controls.find((m) => m.type === 'permission_response'));
    assert.deepEqual([perm.session_id, perm.request_id, perm.option_id, perm._token], ['s-1', 'perm_1', 'always', 'tok-s-1']);
    await page.waitForSelector(`${T('permission-card')}[data-state="answered"]`);

    // A turn runs: stop is offered; a message waits in the queue.
    await page.waitForSelector(`${T('stop')}:not([hidden])`);
    await page.fill(T('composer'), 'next please');
    await page.click(T('send'));
    await page.waitForSelector(`${T('queued')}:not([hidden])`);
    assert.equal(bridge.controls.filter((m) => m.type === 'user_message').length, 0, 'queued, not sent');
    await page.click(T('stop'));
    // With a message queued, Stop asks first; keeping the queue sends it after the turn.
    await page.click(T('stop-keep'));
    await until('the interrupt', () => bridge.controls.find((m) => m.type === 'interrupt' && m.session_id === 's-1'));
    bridge.emit('s-1', { seq: 18, ts: 1767225700, type: 'session_end', reason: 'interrupted' });
    const sent = await until('the queued message', () => bridge.controls.find((m) => m.type === 'user_message'));
    assert.equal(sent.text, 'next please');
    assert.equal(await page.getAttribute(`${T('block')}[data-block-type="session_end"]`, 'data-reason'), 'interrupted');

    // The slash palette lists the agent's commands; one runs as slash_command.
    await page.fill(T('composer'), '/co');
    await page.dispatchEvent(T('composer'), 'input');
    await page.waitForSelector(`${T('slash-command')}[data-command="compact"]`);
    await page.click(`${T('slash-command')}[data-command="compact"]`);
    await page.click(T('send'));
    const slash = await until('the slash_command', () => bridge.controls.find((m) => m.type === 'slash_command'));
    assert.equal(slash.command, 'compact');
    await page.screenshot({ path: join(shots, 'ui-session.png') });

    // A reload resumes from the newest seq held, with the token, and shows the same blocks.
    await page.evaluate(() => window.terminull.flush());
    await page.reload();
    const resume = await until('the session_resume', () => bridge.controls.find((m) => m.type === 'session_resume'));
    assert.deepEqual([resume.session_id, resume.since_seq, resume._token], ['s-1', 18, 'tok-s-1']);
    await until('the restored blocks', async () => (await page.$$(T('block'))).length === expected.length + 1);
    bridge.emit('s-1', { seq: 19, ts: 1767225701, type: 'user_message', text: 'next please' });
    bridge.emit('s-1', { seq: 18, ts: 1767225700, type: 'session_end', reason: 'interrupted' }); // a repeat: dropped
    await until('the new block', async () => (await page.$$(T('block'))).length === expected.length + 2);
    const seqs = await page.$$eval(T('block'), (els) => els.map((e) => Number(e.dataset.seq)));
    assert.equal(new Set(seqs).size, seqs.length, 'no seq shown twice');

    // The phone wakes with a socket that looks open but is dead: the page probes it
    // when it becomes visible, gives up after 5 s, opens a new link and resumes.
    bridge.handlers.list_sessions = () => null; // no answer
    const conns = bridge.conns.length;
    await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange', { bubbles: true })));
    await until('a new connection', () => bridge.conns.length > conns, 12000);
    delete bridge.handlers.list_sessions;
    const resumes = await until('a second session_resume', () => {
      const r = bridge.controls.filter((m) => m.type === 'session_resume');
      return r.length >= 2 ? r : null;
    });
    assert.equal(resumes[1].since_seq, 19);
    await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`);

    // A bridge restart starts the adapter again and its history gains a second
    // agent_info for the same agent: not news, so still one "Session started".
    const started = () =>
      page.$$eval(`${T('block')}[data-block-type="agent_info"]`, (els) => els.filter((e) => !e.hidden).map((e) => e.textContent));
    assert.equal((await started()).length, 1);
    bridge.emit('s-1', { ...all[0], seq: 20, ts: 1767225702 });
    await until('the second agent_info', async () => (await page.$$(`${T('block')}[data-block-type="agent_info"]`)).length === 2);
    assert.deepEqual(await started(), ['Session started · Claude Code · 2.1.3 · opus']);
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(failures, []);
  } finally {
    await close();
  }
});

test('handoff: terminal sessions attach, a parked session shows its banner and queue, Continue in Terminal', { skip, timeout: 120000 }, async () => {
  const bridge = new FakeBridge({
    direct: true,
    agents: [
      { agent_id: 'claude', display_name: 'Claude Code', provides_models: false, continues_in_terminal: true },
      { agent_id: 'codex', display_name: 'Codex', provides_models: false },
    ],
  });
  const now = Math.floor(Date.now() / 1000);
  bridge.listings = [{ session_id: 's-9', agent_id: 'claude', cwd: '/home/ada/old', state: 'parked', last_seq: 3, title: 'Old work' }];
  bridge.external = [
    { agent_id: 'claude', agent_session_id: 'abc-123', cwd: '/home/ada/parser', title: 'Fix the parser <b>now</b>', updated_at: now - 300, message_count: 12 },
    { agent_id: 'codex', agent_session_id: 'def-456', cwd: '/home/ada/web', updated_at: now - 7200 },
  ];
  const shots = join(tmpdir(), 'terminull-ui-test');
  mkdirSync(shots, { recursive: true });
  const { page, failures, pageErrors, close } = await launch(bridge);
  try {
    await page.goto(bridge.pairingLink(ORIGIN));
    await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`);
    assert.equal((await page.textContent(T('path'))).trim(), 'LAN');

    // The lists: a parked session, and the terminal's sessions newest first.
    await until('the external sessions', async () => (await page.$$(T('external-item'))).length === 2);
    const items = await page.$$eval(T('external-item'), (els) => els.map((e) => e.textContent));
    assert.match(items[0], /claude/);
    assert.match(items[0], /5 min ago/);
    assert.match(items[0], /12 messages/);
    assert.match(items[0], /Fix the parser <b>now<\/b>/);
    assert.match(items[0], /\/home\/ada\/parser/);
    assert.match(items[1], /codex/);
    assert.match(items[1], /2 h ago/);
    assert.match(items[1], /\/home\/ada\/web/);
    assert.match(await page.textContent(`${T('session-item')}[data-session-id="s-9"]`), /parked/);
    await page.screenshot({ path: join(shots, 'ui-handoff-lists.png') });

    // Attaching binds a session to it.
    await page.click(`${T('external-item')}[data-agent-session-id="abc-123"]`);
    const attach = await until('the attach_external', () => bridge.controls.find((m) => m.type === 'attach_external'));
    assert.deepEqual([attach.agent, attach.agent_session_id, attach.cwd], ['claude', 'abc-123', '/home/ada/parser']);
    assert.equal(typeof attach.app_pubkey, 'string');
    const sid = await until('the session view', () => page.evaluate(() => window.terminull.current));
    let seq = 0;
    const emit = (b) => bridge.emit(sid, { seq: ++seq, ts: now + seq, ...b });
    const mirrored = { _meta: { mirrored: true } };

    // It comes back parked: the terminal's turns mirrored, a banner, the composer queues at the bridge.
    emit({ type: 'agent_info', agent_id: 'claude', name: 'Claude Code', cap_interrupt: true, cap_input_during_turn: false, slash_commands: [] });
    emit({ type: 'user_message', text: 'typed in the terminal', ...mirrored });
    emit({ type: 'text', id: 't1', text: 'answered in the terminal', done: true, ...mirrored });
    emit({ type: 'session_state', state: 'parked', message: 'a terminal drives this session', owner_pid: 4242, queued: 0 });
    await page.waitForSelector(`${T('parked-banner')}:not([hidden])`);
    assert.match(await page.textContent(T('parked-banner')), /0 queued/);
    const notice = await page.textContent(`${T('block')}[data-block-type="session_state"][data-state="parked"]`);
    assert.match(notice, /A terminal is driving this conversation — terminull is observing; your messages will wait \(0 queued\)/);
    assert.match(notice, /terminal process 4242/);
    assert.equal(await page.getAttribute(T('composer'), 'placeholder'), 'Queued until the terminal is idle…');
    assert.ok(await page.isDisabled(T('continue-in-terminal')), 'no Continue in Terminal while parked');
    assert.ok(await page.isHidden(T('stop')), 'a mirrored turn is not one to stop');

    await page.fill(T('composer'), 'from the phone');
    await page.click(T('send'));
    const msg = await until('the user_message', () => bridge.controls.find((m) => m.type === 'user_message'));
    assert.deepEqual([msg.session_id, msg.text], [sid, 'from the phone']);
    assert.ok(await page.isHidden(T('queued')), 'sent to the bridge, which queues it');
    emit({ type: 'user_message', text: 'from the phone' });
    emit({ type: 'session_state', state: 'parked', owner_pid: 4242, queued: 1 });
    await until('one queued', async () => (await page.getAttribute(T('parked-banner'), 'data-queued')) === '1');
    assert.match(await page.textContent(T('parked-banner')), /1 queued/);
    await page.screenshot({ path: join(shots, 'ui-handoff-parked.png') });

    // The terminal lets go: live again, the queued message runs, the banner goes.
    emit({ type: 'session_state', state: 'live', message: 'the terminal is idle; terminull continues this conversation with your 1 queued message(s)', queued: 1 });
    await page.waitForSelector(`${T('parked-banner')}[hidden]`, { state: 'attached' });
    assert.match(await page.textContent(`${T('block')}[data-block-type="session_state"][data-state="live"]`), /terminull drives this conversation again/);
    assert.equal(await page.getAttribute(T('composer'), 'placeholder'), 'Message…');
    assert.ok(await page.isDisabled(T('continue-in-terminal')), 'not while the queued message runs');
    emit({ type: 'text', id: 't2', text: 'answered here', done: true });
    emit({ type: 'session_end', reason: 'completed' });
    await until('Continue in Terminal enabled', () => page.isEnabled(T('continue-in-terminal')));

    // Continue in Terminal: an error shown plainly, then the command.
    await page.click(T('continue-in-terminal'));
    await page.waitForSelector(T('continue-error'));
    assert.match(await page.textContent(T('continue-error')), /cannot continue in a terminal/);
    assert.equal(await page.getAttribute(T('continue-error'), 'data-code'), 'not_supported');
    const command = "cd '/home/ada/parser' && 'claude' '--resume' 'abc-123'";
    bridge.terminalCommands[sid] = { argv: ['claude', '--resume', 'abc-123'], cwd: '/home/ada/parser', command };
    await page.click(T('continue-in-terminal'));
    await page.waitForSelector(T('terminal-command'));
    const calls = bridge.controls.filter((m) => m.type === 'continue_in_terminal');
    assert.deepEqual(calls.map((m) => m.session_id), [sid, sid]);
    assert.equal(await page.textContent(`${T('terminal-command-text')} pre`), command);
    await page.click(T('terminal-command-text-copy'));
    await until('the command selected', async () => (await page.evaluate(() => window.getSelection().toString())) === command);
    assert.match(await page.textContent(T('terminal-command-text-copy')), /Copied|Selected/);

    // The bridge parks it with the resume command.
    emit({ type: 'session_state', state: 'parked', queued: 0, resume_command: ['claude', '--resume', 'abc-123'] });
    await page.waitForSelector(`${T('parked-banner')}:not([hidden])`);
    assert.equal(await page.textContent(`${T('resume-command')} pre`), 'claude --resume abc-123');
    assert.ok(await page.isDisabled(T('continue-in-terminal')));
    await page.screenshot({ path: join(shots, 'ui-handoff-continued.png') });
    assert.equal(await page.$$eval('.transcript b, .view-home b', (e) => e.length), 0, 'network text is never HTML');
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(failures, []);
  } finally {
    await close();
  }
});

test('streamed appends: the page rebuilds the text, a gap resumes from before the message, the replay repairs it', { skip, timeout: 120000 }, async () => {
  const bridge = new FakeBridge({ direct: true, agents: [{ agent_id: 'echo', display_name: 'Echo', provides_models: false }] });
  const { page, failures, pageErrors, close } = await launch(bridge);
  const shownText = () => page.$eval(`${T('block')}[data-block-type="text"]`, (e) => [e.dataset.seq, e.textContent]);
  const bytes = (s) => new TextEncoder().encode(s).length;
  try {
    await page.goto(bridge.pairingLink(ORIGIN));
    await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`);
    await page.click(T('new-session'));
    await until('the agents', () => page.$$eval(`${T('agent-picker')} option`, (os) => os.length === 1));
    await page.fill(T('cwd'), '/home/ada');
    await page.click(T('start-session'));
    await until('the session_request', () => bridge.controls.find((m) => m.type === 'session_request'));
    await page.waitForSelector(T('composer'), { state: 'visible' });
    const at = (seq, x) => ({ seq, ts: 1767225600 + seq, ...x });
    const piece = (seq, before, text, done = false) => at(seq, { type: 'text', id: 'm', offset: bytes(before), text, done });
    bridge.emit('s-1', at(1, { type: 'user_message', text: 'hi' }));
    bridge.emit('s-1', piece(2, '', 'Hé'));
    bridge.emit('s-1', piece(3, 'Hé', 'llo € '));
    await until('the appends', async () => (await shownText())[1] === 'Hé' + 'llo € ');
    // seq 4 (`wörld`) is lost on the way; seq 5 does not fit: the prefix stays, the page resumes.
    bridge.emit('s-1', piece(5, 'Héllo € wörld', ' 😀'));
    const resume = await until('the session_resume', () => bridge.controls.find((m) => m.type === 'session_resume'));
    assert.deepEqual([resume.session_id, resume.since_seq], ['s-1', 1], 'from the seq held before the message');
    assert.deepEqual(await shownText(), ['5', 'Héllo € '], 'never a wrong text: the prefix held');
    // The replay: what is held is skipped; the message comes as one snapshot at its newest seq.
    bridge.emit('s-1', at(1, { type: 'user_message', text: 'hi' }), { replay: true });
    bridge.emit('s-1', at(5, { type: 'text', id: 'm', text: 'Héllo € wörld 😀', done: false }), { replay: true });
    await until('the repaired text', async () => (await shownText())[1] === 'Héllo € wörld 😀');
    bridge.emit('s-1', piece(6, 'Héllo € wörld 😀', '!', true));
    await until('the last piece', async () => (await shownText()).join() === '6,Héllo € wörld 😀!');
    assert.equal((await page.$$(`${T('block')}[data-block-type="text"]`)).length, 1, 'one element per message');
    // A reload shows the message as saved, rebuilt.
    await page.evaluate(() => window.terminull.flush());
    await page.reload();
    await until('the restored text', async () => (await page.$(`${T('block')}[data-block-type="text"]`)) && (await shownText()).join() === '6,Héllo € wörld 😀!');
    assert.deepEqual(pageErrors, []);
    assert.deepEqual(failures, []);
  } finally {
    await close();
  }
});
