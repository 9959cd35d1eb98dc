// What the switcher counts on a bridge (web/src/attention.js). Run: node --test web/test/

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Transcript } from '../src/transcript.js';
import { waitingPermissions, attentionOf, waitingInListing } from '../src/attention.js';

const perm = (seq, id) => ({ type: 'permission_request', seq, ts: 1, request_id: id, tool: 'Bash', input: {}, options: [] });
const user = (seq) => ({ type: 'user_message', seq, ts: 1, text: 'x' });
const end = (seq) => ({ type: 'session_end', seq, ts: 1, reason: 'completed' });

function session(blocks, answered = {}, unseen = false) {
  return { transcript: new Transcript(blocks), answered: new Map(Object.entries(answered)), unseen };
}

test('a permission request is waiting until answered here or something comes after it', () => {
  assert.equal(waitingPermissions(session([user(1), perm(2, 'p1')])), 1);
  assert.equal(waitingPermissions(session([user(1), perm(2, 'p1'), perm(3, 'p2')])), 2);
  assert.equal(waitingPermissions(session([user(1), perm(2, 'p1')], { p1: 'allow' })), 0);
  // Answered elsewhere: the turn went on.
  assert.equal(waitingPermissions(session([user(1), perm(2, 'p1'), end(3)])), 0);
  assert.equal(waitingPermissions(session([user(1), end(2)])), 0);
});

test("a bridge's attention sums its sessions' waiting requests and unseen finished turns", () => {
  const ctx = { sessions: new Map([['a', session([user(1), perm(2, 'p')])], ['b', session([user(1), end(2)], {}, true)], ['c', session([])]]) };
  assert.deepEqual(attentionOf(ctx), { permissions: 1, unseen: 1 });
});

test('a listed session waiting for a permission counts until the page follows it on a link', () => {
  const listing = { session_id: 'x', state: 'awaiting_permission' };
  const ctx = { sessions: new Map(), listings: [listing, { session_id: 'y', state: 'idle' }] };
  assert.equal(waitingInListing(ctx, listing), 1);
  assert.deepEqual(attentionOf(ctx), { permissions: 1, unseen: 0 });
  // Followed on the link and answered here: the blocks are the truth, not the older listing.
  const held = { id: 'x', ...session([user(1), perm(2, 'p')], { p: 'allow' }), attachedOn: {} };
  ctx.sessions.set('x', held);
  assert.equal(waitingInListing(ctx, listing), 0);
  assert.deepEqual(attentionOf(ctx), { permissions: 0, unseen: 0 });
});
