// The device's state in IndexedDB (per origin): its identity, the bridges it paired
// with, each session's blocks (to resume by seq after a reload), push counters.
// One object store of key → value. When IndexedDB is unavailable (some private
// modes), an in-memory map stands in, so the page still works for this visit.

const DB_NAME = 'terminull';
const STORE = 'kv';

function promisify(req) {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

export class Store {
  constructor(db) {
    this.db = db;
    this.memory = db ? null : new Map();
  }

  static async open() {
    try {
      if (!globalThis.indexedDB) return new Store(null);
      const req = indexedDB.open(DB_NAME, 1);
      req.onupgradeneeded = () => {
        if (!req.result.objectStoreNames.contains(STORE)) req.result.createObjectStore(STORE);
      };
      return new Store(await promisify(req));
    } catch {
      return new Store(null);
    }
  }

  get persistent() {
    return this.db != null;
  }

  async get(key) {
    if (!this.db) return this.memory.get(key);
    const tx = this.db.transaction(STORE, 'readonly');
    return promisify(tx.objectStore(STORE).get(key));
  }

  async set(key, value) {
    if (!this.db) {
      this.memory.set(key, value);
      return;
    }
    const tx = this.db.transaction(STORE, 'readwrite');
    tx.objectStore(STORE).put(value, key);
    await new Promise((resolve, reject) => {
      tx.oncomplete = resolve;
      tx.onerror = () => reject(tx.error);
      tx.onabort = () => reject(tx.error);
    });
  }

  /** Every key held (the whole store: a few hundred at most, sessions included). */
  async keys() {
    if (!this.db) return [...this.memory.keys()];
    const tx = this.db.transaction(STORE, 'readonly');
    return promisify(tx.objectStore(STORE).getAllKeys());
  }

  async delete(key) {
    if (!this.db) {
      this.memory.delete(key);
      return;
    }
    const tx = this.db.transaction(STORE, 'readwrite');
    tx.objectStore(STORE).delete(key);
    await new Promise((resolve) => {
      tx.oncomplete = resolve;
      tx.onerror = resolve;
    });
  }
}
