// The installable app and its pinned code in a real browser: Debian's Chromium
// driven by playwright-core at a phone viewport, against a relay (with a bridge
// registered) behind a hostile loopback proxy this script runs. The proxy passes
// everything through, or drops every connection ("down": the server is gone), or
// replaces /app.js with altered code ("evil"), or with an update the bridge signed
// plus that signature ("signed"). Steps:
//   1. pair by opening the link; the service worker registers and controls the page;
//      the manifest parses, its icons load at their sizes, and Chromium's
//      `Page.getInstallabilityErrors` reports none;
//   2. the server goes away: a reload shows the app from the worker, "reconnecting";
//   3. the relay serves altered app.js: the worker refuses it, the page says so, and
//      reloads keep running the pinned code;
//   4. a signed update: taken, announced, and running after a reload;
//   5. a plain-http origin (not a secure context): no worker, one line saying why.
//
//   node web/test/install.mjs --link '<pairing link URL>' --evil FILE --signed-app FILE \
//        --signed-sig FILE --screenshots DIR
//
// Prints progress on stderr and one JSON line on stdout: {"ok":true,"screenshots":[…],…}.

import { chromium } from 'playwright-core';
import http from 'node:http';
import net from 'node:net';
import { mkdtempSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { STEP_TIMEOUT, parseArgs, sleep, T, waitFor } from './support/phone.mjs';

const args = parseArgs(process.argv.slice(2));
const underTestRunner = Boolean(process.env.NODE_TEST_CONTEXT) && !args.link;
if (underTestRunner) {
  const { test } = await import('node:test');
  test('install and pinned code (run directly with --link; bridge/tests/web_install.rs does)', { skip: 'needs --link' }, () => {});
} else if (!args.link || !args.evil || !args['signed-app'] || !args['signed-sig'] || !args.screenshots) {
  console.error("usage: node install.mjs --link '<pairing link>' --evil FILE --signed-app FILE --signed-sig FILE --screenshots DIR");
  process.exit(2);
}

const log = (...m) => console.error('[install]', ...m);
const screenshots = [];
const pageErrors = [];
let page = null;

async function shot(name) {
  const file = join(args.screenshots, name);
  await page.screenshot({ path: file });
  screenshots.push(file);
  log(`screenshot ${name}`);
}

async function step(name, fn) {
  log(`step: ${name}`);
  try {
    return await fn();
  } catch (e) {
    e.message = `${name}: ${e.message}`;
    throw e;
  }
}

/** The hostile proxy in front of the relay. `mode`: pass | down | evil | signed. */
function startProxy(upstream) {
  const state = { mode: 'pass', served: { evil: 0, signed: 0 } };
  const evil = readFileSync(args.evil);
  const signedApp = readFileSync(args['signed-app']);
  const signedSig = readFileSync(args['signed-sig']);
  const server = http.createServer((req, res) => {
    if (state.mode === 'down') {
      req.socket.destroy();
      return;
    }
    const path = new URL(req.url, 'http://x').pathname;
    if (state.mode === 'signed' && /^\/v1\/bridges\/[^/]+\/app-signature$/.test(path)) {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(signedSig);
      return;
    }
    const replacement = path === '/app.js' && state.mode !== 'pass' ? (state.mode === 'evil' ? evil : signedApp) : null;
    const up = http.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: req.headers },
      (upRes) => {
        if (replacement) {
          state.served[state.mode] += 1;
          const headers = { ...upRes.headers };
          delete headers['content-length'];
          res.writeHead(upRes.statusCode, headers);
          upRes.resume();
          res.end(replacement);
        } else {
          res.writeHead(upRes.statusCode, upRes.headers);
          upRes.pipe(res);
        }
      },
    );
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  server.on('upgrade', (req, socket, head) => {
    if (state.mode === 'down') {
      socket.destroy();
      return;
    }
    const up = net.connect(Number(upstream.port), upstream.hostname, () => {
      const lines = [`${req.method} ${req.url} HTTP/1.1`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      up.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length) up.write(head);
      socket.pipe(up).pipe(socket);
    });
    up.on('error', () => socket.destroy());
    socket.on('error', () => up.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, state, port: server.address().port })));
}

async function controlled() {
  return page.evaluate(() => Boolean(navigator.serviceWorker?.controller));
}

async function reload() {
  await page.reload({ waitUntil: 'domcontentloaded' });
}

async function main() {
  mkdirSync(args.screenshots, { recursive: true });
  const link = new URL(args.link);
  const proxy = await startProxy(new URL(link.origin));
  const origin = `http://127.0.0.1:${proxy.port}`;
  const pairUrl = `${origin}${link.pathname}${link.search}${link.hash}`;
  const userDataDir = mkdtempSync(join(tmpdir(), 'terminull-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      // A name for loopback that is not a secure context (as a LAN address is).
      '--host-resolver-rules=MAP lan.test 127.0.0.1',
    ],
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
    userAgent:
      'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/148.0.0.0 Mobile Safari/537.36',
  });
  const report = { ok: false };
  try {
    page = context.pages()[0] ?? (await context.newPage());
    page.on('pageerror', (e) => {
      pageErrors.push(String(e));
      log(`page error: ${e}`);
    });
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') log(`console.${m.type()}: ${m.text()}`);
    });

    await step('pair by opening the link (through the proxy)', async () => {
      await page.goto(pairUrl, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector(T('short-code'), { timeout: STEP_TIMEOUT });
      await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: STEP_TIMEOUT });
    });

    await step('the service worker registers and controls the page', async () => {
      await page.evaluate(() => navigator.serviceWorker.ready.then(() => true));
      await waitFor('the worker to control the page', controlled);
      const reg = await page.evaluate(async () => {
        const r = await navigator.serviceWorker.getRegistration('/');
        return { scope: r?.scope, script: r?.active?.scriptURL };
      });
      if (reg.scope !== `${origin}/` || reg.script !== `${origin}/sw.js`) throw new Error(`registration ${JSON.stringify(reg)}`);
      report.registration = reg;
      // The pins the worker reads: the paired bridge's key.
      report.pins = await waitFor('the bridge key in terminull-sw-pins', () =>
        page.evaluate(
          () =>
            new Promise((resolve, reject) => {
              const req = indexedDB.open('terminull-sw-pins');
              req.onerror = () => reject(req.error);
              req.onsuccess = () => {
                const all = req.result.transaction('bridges').objectStore('bridges').getAll();
                all.onsuccess = () => resolve(all.result.length ? all.result : null);
                all.onerror = () => reject(all.error);
              };
            }),
        ),
      );
    });
    await shot('01-paired-worker.png');

    await step('the manifest and icons pass the installability criteria', async () => {
      const manifest = await page.evaluate(async () => {
        const href = document.querySelector('link[rel="manifest"]')?.href;
        const res = await fetch(href);
        return { href, type: res.headers.get('content-type'), body: await res.json() };
      });
      const m = manifest.body;
      const want = { name: 'terminull', short_name: 'terminull', display: 'standalone', start_url: '/', scope: '/', theme_color: '#111318', background_color: '#111318' };
      for (const [k, v] of Object.entries(want)) if (m[k] !== v) throw new Error(`manifest ${k} is ${JSON.stringify(m[k])}, want ${JSON.stringify(v)}`);
      if (!manifest.type.startsWith('application/manifest+json')) throw new Error(`manifest content type ${manifest.type}`);
      const icons = await page.evaluate(
        (list) =>
          Promise.all(
            list.map(
              (icon) =>
                new Promise((resolve) => {
                  const img = new Image();
                  img.onload = () => resolve({ ...icon, width: img.naturalWidth, height: img.naturalHeight });
                  img.onerror = () => resolve({ ...icon, width: 0, height: 0 });
                  img.src = icon.src;
                }),
            ),
          ),
        m.icons,
      );
      for (const icon of icons) {
        if (`${icon.width}x${icon.height}` !== icon.sizes) throw new Error(`icon ${icon.src} is ${icon.width}x${icon.height}, declared ${icon.sizes}`);
      }
      if (!icons.some((i) => i.purpose === 'maskable')) throw new Error('no maskable icon');
      const cdp = await context.newCDPSession(page);
      const parsed = await cdp.send('Page.getAppManifest');
      if (parsed.errors?.length) throw new Error(`manifest errors: ${JSON.stringify(parsed.errors)}`);
      const installability = await cdp.send('Page.getInstallabilityErrors');
      if (installability.installabilityErrors.length) {
        throw new Error(`installability errors: ${JSON.stringify(installability.installabilityErrors)}`);
      }
      await cdp.detach();
      report.manifest = { url: parsed.url, icons: icons.map((i) => `${i.src} ${i.width}x${i.height} ${i.purpose}`), installabilityErrors: 0 };
    });

    await step('offline: the app shell from the worker, reconnecting', async () => {
      proxy.state.mode = 'down';
      await reload();
      await page.waitForSelector('.topbar', { timeout: STEP_TIMEOUT });
      const status = await waitFor('"reconnecting"', async () => {
        const t = (await page.textContent(T('connection-status'))).trim();
        return /reconnecting/.test(t) ? t : null;
      });
      report.offline = { status, home: await page.isVisible(T('new-session')) };
      if (!report.offline.home) throw new Error('the home view is not shown offline');
    });
    await shot('02-offline-reconnecting.png');
    proxy.state.mode = 'pass';
    await reload();
    await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: STEP_TIMEOUT });

    await step('altered app.js from the relay: refused, the page says so', async () => {
      proxy.state.mode = 'evil';
      await reload();
      const text = await waitFor('the refusal banner', async () => {
        const el = await page.$(`${T('integrity-banner')}[data-state="refused"]:not([hidden])`);
        return el ? (await el.textContent()).trim() : null;
      });
      if (!/none of your computers signed/.test(text)) throw new Error(`banner: ${text}`);
      if (proxy.state.served.evil === 0) throw new Error('the proxy never served the altered app.js');
      // Reloads keep running the pinned code, and keep saying why.
      await reload();
      await page.waitForSelector(`${T('integrity-banner')}[data-state="refused"]:not([hidden])`, { timeout: STEP_TIMEOUT });
      const build = await page.evaluate(() => globalThis.terminullBuild ?? null);
      if (build !== null) throw new Error(`the altered code ran: ${build}`);
      await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: STEP_TIMEOUT });
      report.refused = { banner: text, evilServed: proxy.state.served.evil, ranAltered: false };
    });
    await shot('03-altered-refused.png');

    await step('an update signed by the bridge: taken', async () => {
      proxy.state.mode = 'signed';
      await reload();
      const text = await waitFor('the update banner', async () => {
        const el = await page.$(`${T('integrity-banner')}[data-state="updated"]:not([hidden])`);
        return el ? (await el.textContent()).trim() : null;
      });
      await shot('04-signed-update-ready.png');
      await reload();
      const build = await waitFor('the signed update to run', () => page.evaluate(() => globalThis.terminullBuild ?? null));
      if (build !== 'signed-update') throw new Error(`running ${build}`);
      await page.waitForSelector(`${T('connection-status')}[data-state="connected"]`, { timeout: STEP_TIMEOUT });
      const hidden = await page.$eval(T('integrity-banner'), (el) => el.hidden);
      if (!hidden) throw new Error('the banner still shows after the update');
      report.update = { banner: text, running: build };
    });
    await shot('05-signed-update-running.png');

    await step('a plain-http origin: no worker, one line saying why', async () => {
      const plain = await context.newPage();
      await plain.goto(`http://lan.test:${proxy.port}/`, { waitUntil: 'domcontentloaded' });
      const note = await plain.waitForSelector(`${T('app-note')}:not([hidden])`, { timeout: STEP_TIMEOUT });
      const text = (await note.textContent()).trim();
      const secure = await plain.evaluate(() => window.isSecureContext);
      const worker = await plain.evaluate(() => Boolean(navigator.serviceWorker));
      if (secure || worker || !/need https/.test(text)) throw new Error(`secure ${secure}, worker ${worker}, note "${text}"`);
      const prev = page;
      page = plain;
      await shot('06-plain-http-note.png');
      page = prev;
      await plain.close();
      report.plainHttp = { note: text };
    });

    if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.join(' | ')}`);
    report.ok = true;
  } catch (e) {
    try {
      const file = join(args.screenshots, 'fail.png');
      await page?.screenshot({ path: file });
      screenshots.push(file);
    } catch {
      /* the page is gone */
    }
    throw e;
  } finally {
    await context.close().catch(() => {});
    proxy.server.closeAllConnections?.();
    proxy.server.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
  return report;
}

if (!underTestRunner) {
  try {
    const report = await main();
    console.log(JSON.stringify({ ...report, screenshots }));
    process.exit(0);
  } catch (e) {
    console.error(`FAILED: ${e.stack ?? e}`);
    console.log(JSON.stringify({ ok: false, error: String(e.message ?? e), screenshots }));
    process.exit(1);
  }
}
