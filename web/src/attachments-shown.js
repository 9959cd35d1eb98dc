// The thumbnails of a sent message's attachments, in its bubble: images shown (only
// the four types agents take, from base64 checked here), other files as name and size.

import { h } from './dom.js';
import { formatBytes, base64Bytes } from './attach.js';

const SAFE_IMAGE = /^image\/(png|jpeg|gif|webp)$/;

/** Thumbnails of a sent message's attachments (images shown, other files as name and size). */
export function attachmentsView(atts) {
  if (!Array.isArray(atts) || atts.length === 0) return null;
  return h(
    'div',
    { class: 'attachments', testid: 'message-attachments' },
    atts.map((a) => {
      const name = typeof a?.name === 'string' ? a.name : 'file';
      const mime = typeof a?.mime_type === 'string' ? a.mime_type.toLowerCase() : '';
      const data = typeof a?.data === 'string' ? a.data : '';
      if (SAFE_IMAGE.test(mime) && /^[A-Za-z0-9+/=]*$/.test(data) && data) {
        return h('img', { class: 'att-thumb', testid: 'attachment-thumb', src: `data:${mime};base64,${data}`, alt: name, title: name });
      }
      return h('span', { class: 'att-file', testid: 'attachment-file', title: name }, extBadge(name), `${name} · ${formatBytes(base64Bytes(data))}`);
    }),
  );
}

/** A file's extension as a small badge (`PDF`, `TXT`), or `FILE`. */
export function extBadge(name) {
  const m = /\.([A-Za-z0-9]{1,5})$/.exec(String(name ?? ''));
  return h('span', { class: 'att-ext', 'aria-hidden': 'true' }, m ? m[1].toUpperCase() : 'FILE');
}
