// The service worker's own IndexedDB database, `terminull-sw-pins` (the worker
// cannot read the page's localStorage, and the page's `terminull` database belongs
// to store.js). Two object stores:
//   bridges: bridgeId → {bridgeId, ed25519}  the paired bridges' signing keys (the page writes them)
//   state:   'pin'    → {digest, cache, since} the shell the worker serves
//            'status' → {state, reason, digest, at} the last update check, for the page
// Used by both the page (web/src/integrity.js) and the worker (shell.js).

export const DB_NAME = 'terminull-sw-pins';

function promisify(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

let opened = null;

export function openPins() {
  if (!opened) {
    const req = indexedDB.open(DB_NAME, 1);
    req.onupgradeneeded = () => {
      const db = req.result;
      if (!db.objectStoreNames.contains('bridges')) db.createObjectStore('bridges');
      if (!db.objectStoreNames.contains('state')) db.createObjectStore('state');
    };
    opened = promisify(req).catch((e) => {
      opened = null;
      throw e;
    });
  }
  return opened;
}

async function tx(store, mode, fn) {
  const db = await openPins();
  const t = db.transaction(store, mode);
  const result = fn(t.objectStore(store));
  await new Promise((resolve, reject) => {
    t.oncomplete = resolve;
    t.onerror = () => reject(t.error);
    t.onabort = () => reject(t.error);
  });
  return result instanceof IDBRequest ? result.result : result;
}

export const getState = (key) => tx('state', 'readonly', (s) => s.get(key));
export const setState = (key, value) => tx('state', 'readwrite', (s) => s.put(value, key));
export const listBridges = () => tx('bridges', 'readonly', (s) => s.getAll());

/** Replaces the pinned bridge keys with `pins` (`[{bridgeId, ed25519}]`). */
export function setBridges(pins) {
  return tx('bridges', 'readwrite', (s) => {
    s.clear();
    for (const p of pins) s.put({ bridgeId: p.bridgeId, ed25519: p.ed25519 }, p.bridgeId);
  });
}
