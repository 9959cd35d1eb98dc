// What waits for the user on each bridge, for the switcher's counts: permission
// requests not answered yet, and sessions whose turn finished while they were not
// shown. Counted over the sessions this page follows on that bridge (the ones opened
// or started here, and any a push notice named).

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

/** `{permissions, unseen}` of a bridge (BridgeCtx). */
export function attentionOf(ctx) {
  let permissions = 0;
  let unseen = 0;
  for (const s of ctx.sessions.values()) {
    permissions += waitingPermissions(s);
    if (s.unseen) unseen += 1;
  }
  return { permissions, unseen };
}
