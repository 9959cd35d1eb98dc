// The page's URL names what it shows (docs/web-client.md, "Several bridges"): a
// session view is `#b=<bridge id>&s=<session id>`, so a reload, a notification or a
// shared link opens that session on that bridge. `#b=<bridge id>` alone opens that
// bridge's session list. A terminal view is `#b=<bridge id>&t=<terminal id>`: a reload
// reattaches to it. The home view keeps the plain URL. A pairing link's fragment
// (`#v=…&s=…`) is not a route.

/** `{bridgeId, sessionId, terminalId}` named by the URL's fragment, or null. */
export function routeFromUrl(hash = location.hash) {
  const f = hash.replace(/^#/, '');
  if (!f || /(^|&)v=/.test(f)) return null;
  const p = new URLSearchParams(f);
  const bridgeId = p.get('b');
  if (!bridgeId) return null;
  const sessionId = p.get('s') || null;
  const terminalId = p.get('t') || null;
  return { bridgeId, sessionId, terminalId };
}

/** The fragment naming `sessionId` on `bridgeId` (`#b=…&s=…`), or '' without a session. */
export function routeHash(bridgeId, sessionId) {
  if (!bridgeId || !sessionId) return '';
  return `#b=${encodeURIComponent(bridgeId)}&s=${encodeURIComponent(sessionId)}`;
}

/** Puts terminal `terminalId` of `bridgeId` in the address bar (`#b=…&t=…`), no history entry. */
export function setTerminalRoute(bridgeId, terminalId) {
  if (!bridgeId || !terminalId) return;
  const want = `#b=${encodeURIComponent(bridgeId)}&t=${encodeURIComponent(terminalId)}`;
  if (location.hash !== want) history.replaceState(null, '', `${location.pathname}${location.search}${want}`);
}

/** Puts the route in the address bar without a navigation (no history entry). */
export function setRoute(bridgeId, sessionId) {
  const want = routeHash(bridgeId, sessionId);
  if (location.hash === want || (!want && !location.hash)) return;
  history.replaceState(null, '', `${location.pathname}${location.search}${want}`);
}
