// The composer in a real browser: Debian's Chromium driven by playwright-core at a
// phone-sized viewport (390x844, touch, scale 2), against a bridge whose echo adapter
// declares images and documents. Attaches a large photo (re-encoded smaller), a small
// diagram and a text file from the pickers, removes one, is refused a file over the
// limit, sends, and sees the thumbnails in the sent message and the echo naming each
// attachment. While a slow turn runs it queues three messages, edits one, cancels
// one; Stop asks about the queue: kept, the edited text is what is sent; another
// time dropped, it is never sent. `/status` is shown with its command and kept after
// a reload; End session stops the session. Mode & model, absent for echo, changes the
// model of an echo-py session (examples/ext_adapter_example.py) between turns.
//
//   node web/test/browser-compose.mjs --link '<pairing link>' --screenshots <dir> --cwd <dir>
//
// Prints progress on stderr and one final JSON line on stdout:
// {"ok":true,"session":id,"options_session":id,"screenshots":[…]}.

import { chromium } from 'playwright-core';
import { PhoneRun, T, waitFor, parseArgs, STEP_TIMEOUT } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
const underTestRunner = Boolean(process.env.NODE_TEST_CONTEXT) && !args.link;
if (underTestRunner) {
  const { test } = await import('node:test');
  test('the composer: attachments and the queue (run directly with --link; bridge/tests/web_compose.rs does)', { skip: 'needs --link' }, () => {});
} else if (!args.link || !args.screenshots || !args.cwd) {
  console.error("usage: node browser-compose.mjs --link '<link>' --screenshots DIR --cwd DIR");
  process.exit(2);
}

const run = new PhoneRun('browser-compose', args.screenshots);
const shot = (name) => run.shot(name);
const step = (name, fn) => run.step(name, fn);
const { screenshots, pageErrors } = run;
let page = null;

const USER = `${T('block')}[data-block-type="user_message"]`;
const REPLY = `${T('block')}[data-block-type="text"]`;
/** A message the echo answers a word every 200 ms: 12 s to queue, edit and stop in. */
const SLOW = `slow ${Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ')}`;
const texts = (sel) => page.$$eval(sel, (els) => els.map((e) => e.textContent));

async function atLeast44(sel) {
  const bb = await page.locator(sel).first().boundingBox();
  if (!bb || bb.height < 44 || bb.width < 44) throw new Error(`${sel} is ${bb?.width}x${bb?.height}, under 44 px`);
}

/** A PNG drawn in the page: `noise` makes it large (a photo's worth of detail). */
async function png(width, height, noise) {
  const b64 = await page.evaluate(
    ({ width, height, noise }) => {
      const c = document.createElement('canvas');
      c.width = width;
      c.height = height;
      const g = c.getContext('2d');
      const grad = g.createLinearGradient(0, 0, width, height);
      grad.addColorStop(0, '#1e5aa8');
      grad.addColorStop(1, '#f2a541');
      g.fillStyle = grad;
      g.fillRect(0, 0, width, height);
      g.fillStyle = '#ffffffcc';
      g.beginPath();
      g.arc(width * 0.3, height * 0.4, Math.min(width, height) * 0.2, 0, Math.PI * 2);
      g.fill();
      g.fillStyle = '#222';
      g.font = `${Math.round(height / 6)}px sans-serif`;
      g.fillText(noise ? 'photo' : 'diagram', width * 0.45, height * 0.6);
      if (noise) {
        const img = g.getImageData(0, 0, width, height);
        let x = 12345;
        for (let i = 0; i < img.data.length; i += 4) {
          x = (x * 1103515245 + 12345) & 0x7fffffff;
          const d = (x % 48) - 24;
          img.data[i] += d;
          img.data[i + 1] += d;
          img.data[i + 2] += d;
        }
        g.putImageData(img, 0, 0);
      }
      return c.toDataURL('image/png').split(',')[1];
    },
    { width, height, noise },
  );
  return Buffer.from(b64, 'base64');
}

async function toast() {
  await page.waitForSelector('.toast:not([hidden])', { timeout: STEP_TIMEOUT });
  return page.textContent('.toast');
}

async function send(text) {
  await page.fill(T('composer'), text);
  await page.click(T('send'));
}

/** Waits until a reply holds `needle`; returns the replies' texts. */
async function replyWith(needle) {
  return waitFor(`a reply with "${needle}"`, async () => {
    const all = await texts(REPLY);
    return all.some((t) => t.includes(needle)) ? all : null;
  });
}

async function idle() {
  await waitFor('the turn to end', async () => (await page.getAttribute(T('stop'), 'hidden')) !== null);
}

async function main() {
  page = await run.launch(chromium);
  let session = null;

  await step('pair and start an echo session', async () => {
    await page.goto(args.link, { waitUntil: 'domcontentloaded' });
    await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
    await waitFor('the link', async () => (await page.getAttribute(T('connection-status'), 'data-state')) === 'connected');
    await page.click(T('new-session'));
    await waitFor('the echo agent', async () => (await page.$$(`${T('agent-picker')} option[value="echo"]`)).length === 1);
    await page.selectOption(T('agent-picker'), 'echo');
    await page.fill(T('cwd'), args.cwd);
    await page.click(T('start-session'));
    await page.waitForSelector(`${T('attach')}:not([hidden])`, { timeout: STEP_TIMEOUT });
    session = await page.$eval('.blocks', (e) => e.dataset.sessionId);
    await atLeast44(T('attach'));
  });

  await step('attach a large photo (made smaller), a diagram and a text file; remove one; refuse one over the limit', async () => {
    await page.click(T('attach'));
    await page.waitForSelector(`${T('attach-menu')}:not([hidden])`);
    for (const id of ['attach-camera', 'attach-photos', 'attach-files']) await atLeast44(T(id));
    const camera = await page.$eval(T('pick-camera'), (e) => [e.accept, e.getAttribute('capture')]);
    if (camera[0] !== 'image/*' || camera[1] !== 'environment') throw new Error(`the camera picker is ${camera}`);
    const photo = await png(2400, 1800, true);
    if (photo.length <= 512 * 1024) throw new Error(`the test photo is only ${photo.length} bytes`);
    run.log(`photo.png: ${photo.length} bytes`);
    await page.setInputFiles(T('pick-photos'), [
      { name: 'photo.png', mimeType: 'image/png', buffer: photo },
      { name: 'diagram.png', mimeType: 'image/png', buffer: await png(240, 150, false) },
    ]);
    await page.setInputFiles(T('pick-files'), [{ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('line one\nline two\n') }]);
    await waitFor('three tray items', async () => (await page.$$(T('tray-item'))).length === 3);
    await atLeast44(T('tray-remove'));
    await shot('01-attachments-in-tray.png');
    const order = await page.$$eval(T('tray-item'), (els) => els.map((e) => e.title.split(' · ')[0]));
    if (JSON.stringify(order) !== JSON.stringify(['photo.jpg', 'diagram.png', 'notes.txt'])) throw new Error(`the tray holds ${order}`);
    await page.locator(T('tray-remove')).nth(2).click();
    await waitFor('two tray items', async () => (await page.$$(T('tray-item'))).length === 2);
    await page.setInputFiles(T('pick-files'), [{ name: 'big.pdf', mimeType: 'application/pdf', buffer: Buffer.alloc(600 * 1024, 7) }]);
    const said = await toast();
    if (!/“big\.pdf” is 600 KB; a message carries at most 512 KB of attachments/.test(said)) throw new Error(`the refusal says "${said}"`);
    if ((await page.$$(T('tray-item'))).length !== 2) throw new Error('the file over the limit joined the tray');
  });

  await step('send: the message shows the thumbnails, the echo names each attachment', async () => {
    await send('what is in these?');
    const thumbs = await waitFor('two thumbnails, loaded', async () => {
      const shown = await page.$$eval(`${USER} ${T('attachment-thumb')}`, (els) => els.map((e) => [e.alt, e.naturalWidth]));
      return shown.length === 2 && shown.every(([, w]) => w > 0) ? shown : null;
    });
    if (thumbs.length !== 2 || thumbs[0][0] !== 'photo.jpg' || thumbs[1][0] !== 'diagram.png') throw new Error(`thumbnails ${JSON.stringify(thumbs)}`);
    if (!(thumbs[0][1] > 0 && thumbs[0][1] <= 1568)) throw new Error(`the photo was sent ${thumbs[0][1]} px wide`);
    const replies = await replyWith('[attached: diagram.png');
    const reply = replies.find((t) => t.includes('[attached:'));
    if (!/You said: what is in these\? \[attached: photo\.jpg \(image\/jpeg, \d+ bytes\)\] \[attached: diagram\.png \(image\/png, \d+ bytes\)\]/.test(reply)) {
      throw new Error(`the echo says "${reply}"`);
    }
    if (await page.isVisible(T('attach-tray'))) throw new Error('the tray still shows after sending');
    await idle();
    await shot('02-attachment-sent.png');
  });

  await step('queue while a turn runs: three queued, one edited, one cancelled; Stop asks, the queue kept is sent', async () => {
    await send(SLOW);
    await page.waitForSelector(`${T('stop')}:not([hidden])`, { timeout: STEP_TIMEOUT });
    for (const t of ['first queued', 'second queued', 'third queued']) await send(t);
    await waitFor('three queued', async () => (await page.$$(T('queue-item'))).length === 3);
    await atLeast44(T('queue-edit'));
    await atLeast44(T('queue-cancel'));
    await page.locator(T('queue-edit')).nth(0).click();
    await page.fill(T('queue-editor'), 'first queued, edited');
    await page.click(T('queue-save'));
    await page.locator(T('queue-cancel')).nth(1).click();
    const queued = await texts(T('queue-text'));
    if (JSON.stringify(queued) !== JSON.stringify(['first queued, edited', 'third queued'])) throw new Error(`the queue shows ${JSON.stringify(queued)}`);
    await shot('03-queue.png');
    await page.click(T('stop'));
    await page.waitForSelector(T('stop-drop'), { timeout: STEP_TIMEOUT });
    await shot('04-stop-asks.png');
    await page.click(T('stop-keep'));
    await replyWith('You said: third queued');
    const sent = await texts(`${USER} .bubble`);
    if (sent.includes('second queued') || sent.includes('first queued')) throw new Error(`sent ${JSON.stringify(sent)}`);
    if (!sent.includes('first queued, edited')) throw new Error(`the edit was not sent: ${JSON.stringify(sent)}`);
    await idle();
  });

  await step('Stop, dropping the queue: the queued message is never sent', async () => {
    await send(`${SLOW} again`);
    await page.waitForSelector(`${T('stop')}:not([hidden])`, { timeout: STEP_TIMEOUT });
    await send('never to be sent');
    await waitFor('one queued', async () => (await page.$$(T('queue-item'))).length === 1);
    await page.click(T('stop'));
    await page.click(T('stop-drop'));
    await waitFor('the queue gone', async () => !(await page.isVisible(T('queued'))));
    await idle();
    // A message after the stop: had the queue been sent, its block would come first.
    await send('after the stop');
    await replyWith('You said: after the stop');
    const sent = await texts(`${USER} .bubble`);
    if (sent.includes('never to be sent')) throw new Error('the dropped message was sent');
    await idle();
  });

  await step('/status: its command and output shown, and kept after a reload', async () => {
    await send('/status');
    await page.waitForSelector(T('note-command'), { timeout: STEP_TIMEOUT });
    const cmd = await page.textContent(T('note-command'));
    if (cmd !== '/status') throw new Error(`the note's command is "${cmd}"`);
    await page.waitForTimeout(300); // the note is saved 150 ms after it is added
    await page.reload({ waitUntil: 'domcontentloaded' });
    await page.waitForSelector(T('note-command'), { timeout: STEP_TIMEOUT });
    const after = await page.$$eval(T('note'), (els) => els.map((e) => e.textContent));
    if (!after.some((t) => t.startsWith('/status') && /echo|Echo/.test(t))) throw new Error(`after the reload: ${JSON.stringify(after)}`);
    await waitFor('the thumbnails after the reload', async () => (await page.$$(`${USER} ${T('attachment-thumb')}`)).length === 2);
    await shot('05-status-after-reload.png');
  });

  await step('End session asks, then stops the session', async () => {
    await atLeast44(T('end-session'));
    await page.click(T('end-session'));
    await page.click(T('end-confirm'));
    await waitFor('the note', async () => (await texts(T('note'))).some((t) => t.includes('Session ended.')));
  });

  let optionsSession = null;
  await step('Mode & model: an agent that lists models changes model between turns and goes on', async () => {
    if (await page.isVisible(T('session-options'))) throw new Error('Mode & model offered for echo, which takes neither');
    await page.click('button.back');
    await page.click(T('new-session'));
    await waitFor('echo-py', async () => (await page.$$(`${T('agent-picker')} option[value="echo-py"]`)).length === 1);
    await page.selectOption(T('agent-picker'), 'echo-py');
    await page.fill(T('cwd'), args.cwd);
    await page.click(T('start-session'));
    await page.waitForSelector(`${T('session-options')}:not([hidden])`, { timeout: STEP_TIMEOUT });
    optionsSession = await page.$eval('.blocks', (e) => e.dataset.sessionId);
    await send('remember me');
    await waitFor('the first reply', async () => (await texts(REPLY)).length >= 1);
    await idle();
    await atLeast44(T('session-options'));
    await page.click(T('session-options'));
    await waitFor('the models', async () => (await page.$$(`${T('options-model')} option[value="echo-1-mini"]`)).length === 1);
    await page.selectOption(T('options-model'), 'echo-1-mini');
    await shot('06-mode-and-model.png');
    await page.click(T('options-apply'));
    await waitFor('the note', async () => (await texts(T('note'))).some((t) => t.includes('From the next turn: model echo-1-mini.')));
    await waitFor('a start naming the model', async () =>
      (await texts(`${T('block')}[data-block-type="agent_info"]`)).some((t) => t.includes('echo-1-mini')),
    );
    const before = (await texts(REPLY)).length;
    await send('and now?');
    await waitFor('the reply after the change', async () => (await texts(REPLY)).length > before);
    await idle();
  });

  if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.join(' | ')}`);
  console.log(JSON.stringify({ ok: true, session, options_session: optionsSession, screenshots }));
}

if (!underTestRunner) await run.finish(main);
