// The app's one mutable state, shared by every module of the page: the device, the
// paired bridges (one BridgeCtx each: its record, its link, its sessions), the one
// shown, and the DOM nodes the shell built. One object rather than module-level
// variables so each concept's module reads and writes the same truth without
// importing the others.
//
// `app.bridge`, `app.link`, `app.sessions`, … are the *active* bridge's (the one the
// page shows): the views act on it. Code that works for every bridge (the links, the
// blocks arriving, the switcher) takes a BridgeCtx instead.

/** sessionStorage key of the session shown, so a reload reopens it. */
export const CURRENT_KEY = 'terminull.current';

/** One paired bridge while the page lives. */
export class BridgeCtx {
  constructor(bridge) {
    /** The stored record: `{bridgeId, keys, relay, lan, pairedAt, name?}`. */
    this.bridge = bridge;
    /** The open link, or null. */
    this.link = null;
    this.connState = 'offline';
    this.connLabel = 'offline';
    /** The relay says the bridge is connected to it (always true on the LAN). */
    this.bridgeOnline = true;
    this.agents = [];
    /** session id → SessionState, for this bridge's sessions only. */
    this.sessions = new Map();
    this.listings = [];
    this.external = { state: 'unknown', items: [] };
    this.pushLast = 0n;
    /** Whether this page can reach the bridge at all (a LAN page reaches its own bridge only), and why not. */
    this.reachable = true;
    this.unreachable = null;
    /** The reconnection's own state: the next delay, the pending retry, a connect under way. */
    this.reconnect = { backoff: 250, timer: null, connecting: false };
    /** Set when the bridge was forgotten: its link closes and never reopens. */
    this.forgotten = false;
  }

  get id() {
    return this.bridge.bridgeId;
  }
}

export const app = {
  store: null,
  identity: null,
  serverKind: null,
  /** bridge id → BridgeCtx, in pairing order. */
  bridges: new Map(),
  /** The id of the bridge the page shows. */
  activeId: null,
  current: null,
  view: 'home',
  rejected: 0,
  reasons: [],
  shortCode: null,
  /** The bridge `shortCode` belongs to. */
  shortCodeBridge: null,
  /** The terminal view's hooks (main.js sets them): `{onTerminal, reattach, refresh, leave}`. */
  terminals: null,
  ui: {},
};

/** The bridge the page shows, or null when none is paired. */
export function activeCtx() {
  return app.activeId ? (app.bridges.get(app.activeId) ?? null) : null;
}

// The active bridge's state, read and written through `app` as before several bridges.
const PER_BRIDGE = {
  bridge: () => null,
  link: () => null,
  connState: () => 'offline',
  bridgeOnline: () => true,
  agents: () => [],
  sessions: () => new Map(),
  listings: () => [],
  external: () => ({ state: 'unknown', items: [] }),
  pushLast: () => 0n,
};
for (const [key, none] of Object.entries(PER_BRIDGE)) {
  Object.defineProperty(app, key, {
    enumerable: true,
    get() {
      const ctx = activeCtx();
      return ctx ? ctx[key] : none();
    },
    set(v) {
      const ctx = activeCtx();
      if (ctx) ctx[key] = v;
    },
  });
}

/** The session the session view shows, or null on the other views. */
export function currentSession() {
  return app.current ? app.sessions.get(app.current) : null;
}
