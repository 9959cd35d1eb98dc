// What waits for the user on each bridge, for the switcher's counts: permission
// requests not answered yet, and sessions whose turn finished while they were not
// shown. Counted over the sessions this page follows on that bridge (the ones opened
// or started here, and any a push notice named) and, for the others, the state its
// `list_sessions` gave (`awaiting_permission`).

/** The permission requests of session `s` still waiting: not answered here, and nothing came after them but other requests. */
export function waitingPermissions(s) {
  const blocks = s.transcript.blocks();
  let newestOther = 0;
  for (const b of blocks) if (b.type !== 'permission_request' && b.seq > newestOther) newestOther = b.seq;
  let n = 0;
  for (const b of blocks) {
    if (b.type === 'permission_request' && b.seq > newestOther && !s.answered.has(b.request_id)) n += 1;
  }
  return n;
}

/**
 * The permission requests waiting in a listed session (`list_sessions` entry): from the
 * blocks when this page follows it on an open link, else from the listing's state.
 */
export function waitingInListing(ctx, listing) {
  const held = ctx.sessions.get(listing.session_id);
  if (held && (held.attachedOn || listing.state !== 'awaiting_permission')) return waitingPermissions(held);
  return listing.state === 'awaiting_permission' ? 1 : 0;
}

/** `{permissions, unseen}` of a bridge (BridgeCtx): its followed sessions, and its listed sessions waiting for a permission. */
export function attentionOf(ctx) {
  let permissions = 0;
  let unseen = 0;
  const listed = new Set();
  for (const l of ctx.listings ?? []) {
    listed.add(l.session_id);
    permissions += waitingInListing(ctx, l);
  }
  for (const s of ctx.sessions.values()) {
    if (!listed.has(s.id)) permissions += waitingPermissions(s);
    if (s.unseen) unseen += 1;
  }
  return { permissions, unseen };
}
