// The session list's pure parts (web/src/session-list.js) and the agent picker's order
// and labels (web/src/new-session.js). Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { app } from '../src/state.js';
import { ago, passes, rowTitle, allRows } from '../src/session-list.js';
import { pickerOrder, modelLabel } from '../src/new-session.js';

const ctx = (id, listings) => ({ id, bridge: { bridgeId: id }, listings, sessions: new Map() });

test('rows of every computer, most recently active first', () => {
  app.bridges = new Map([
    ['a', ctx('a', [{ session_id: 's1', last_activity: 10 }, { session_id: 's2', last_activity: 30 }])],
    ['b', ctx('b', [{ session_id: 's3', last_activity: 20 }, { session_id: 's4' }])],
  ]);
  assert.deepEqual(allRows().map((r) => r.s.session_id), ['s2', 's3', 's1', 's4']);
  app.bridges = new Map();
});

test('filters: computer, agent, archived, and a query over titles, previews and the bridge’s matches', () => {
  const a = ctx('a', []);
  const row = (s) => ({ ctx: a, s: { session_id: 's1', agent_id: 'echo', cwd: '/w/app', ...s } });
  const f = (over) => ({ query: '', computer: 'all', agent: 'all', archived: false, ...over });
  const none = new Map();
  assert.equal(passes(row({}), f(), none), true);
  assert.equal(passes(row({ archived: true }), f(), none), false, 'archived rows only under Archived');
  assert.equal(passes(row({ archived: true }), f({ archived: true }), none), true);
  assert.equal(passes(row({}), f({ computer: 'b' }), none), false);
  assert.equal(passes(row({}), f({ agent: 'codex' }), none), false);
  assert.equal(passes(row({ title: 'Fix the LOGIN bug' }), f({ query: 'login' }), none), true);
  assert.equal(passes(row({ preview: 'You said: hello' }), f({ query: 'HELLO' }), none), true);
  assert.equal(passes(row({ title: 'x' }), f({ query: 'deep' }), none), false);
  assert.equal(passes(row({ title: 'x' }), f({ query: 'deep' }), new Map([['a', new Map([['s1', '…deep…']])]])), true);
  assert.equal(passes(row({ title: 'x', archived: true }), f({ query: 'x' }), none), true, 'a search finds archived sessions too');
});

test('a row is called by its title, else its agent and directory', () => {
  assert.equal(rowTitle({ title: 'Release notes', agent_id: 'echo', cwd: '/a/b' }), 'Release notes');
  assert.equal(rowTitle({ agent_id: 'echo', cwd: '/home/ada/parser/' }), 'echo in parser');
});

test('relative times', () => {
  assert.equal(ago(100, 130), 'just now');
  assert.equal(ago(100, 100 + 5 * 60), '5 min');
  assert.equal(ago(100, 100 + 3 * 3600), '3 h');
  assert.equal(ago(100, 100 + 2 * 86400), '2 d');
  assert.equal(ago(undefined, 1), '');
});

test('the picker lists installed agents first; a model named default is not labelled twice', () => {
  const agents = [
    { agent_id: 'claude-code', installed: false },
    { agent_id: 'echo', installed: true },
    { agent_id: 'old' },
    { agent_id: 'codex', installed: false },
  ];
  assert.deepEqual(pickerOrder(agents).map((a) => a.agent_id), ['echo', 'old', 'claude-code', 'codex']);
  assert.equal(modelLabel({ id: 'd', name: 'Default (recommended)', is_default: true }), 'Default (recommended)');
  assert.equal(modelLabel({ id: 'opus', name: 'Opus', is_default: true }), 'Opus (default)');
  assert.equal(modelLabel({ id: 'sonnet', is_default: false }), 'sonnet');
});
