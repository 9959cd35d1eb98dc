// The app's one mutable state, shared by every module of the page: the device, the
// paired bridge, the link, the sessions held and the DOM nodes the shell built. One
// object rather than module-level variables so each concept's module reads and
// writes the same truth without importing the others.

/** sessionStorage key of the session shown, so a reload reopens it. */
export const CURRENT_KEY = 'terminull.current';

export const app = {
  store: null,
  identity: null,
  bridge: null,
  serverKind: null,
  link: null,
  connState: 'offline',
  bridgeOnline: true,
  agents: [],
  sessions: new Map(),
  listings: [],
  external: { state: 'unknown', items: [] },
  current: null,
  view: 'home',
  rejected: 0,
  reasons: [],
  pushLast: 0n,
  shortCode: null,
  ui: {},
};

/** The session the session view shows, or null on the other views. */
export function currentSession() {
  return app.current ? app.sessions.get(app.current) : null;
}
