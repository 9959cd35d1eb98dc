// Attachments in the composer: which kinds the session's agent takes (cap_images,
// cap_documents), the limits of one message, reading a picked file (a large photo is
// re-encoded smaller), and the tray of removable thumbnails before sending.
//
// The limits follow from the frame size: a control message, and the user_message block
// the bridge sends back, travel as one WebSocket message of at most 1 MiB (the relay's
// `max_message_bytes`, the LAN server's likewise) once the JSON holding the base64 is
// sealed and base64-encoded again (×16/9). 512 KiB of files keeps that under 1 MiB.

/** Most files in one message. */
export const MAX_ATTACHMENTS = 4;
/** The files of one message together, in bytes (decoded). */
export const MAX_TOTAL_BYTES = 512 * 1024;
/** A photo's longest edge after re-encoding (what Claude's vision takes without scaling). */
export const MAX_EDGE = 1568;
/** Images sent as they are when small enough; other image types are re-encoded as JPEG. */
export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];

const TEXT_EXT = /\.(txt|md|markdown|csv|tsv|json|ya?ml|toml|xml|html?|css|js|mjs|ts|tsx|jsx|py|rs|go|java|c|h|cpp|hpp|sh|log|ini|conf|sql)$/i;

/** What the session's agent takes: `{images, documents}` from its agent_info. */
export function acceptedKinds(info) {
  return { images: info?.cap_images === true, documents: info?.cap_documents === true };
}

/** The MIME type to send for a picked file (its own, or a guess from the name). */
export function mimeOf(file) {
  const t = typeof file?.type === 'string' ? file.type.toLowerCase() : '';
  if (t) return t;
  const name = String(file?.name ?? '');
  if (/\.pdf$/i.test(name)) return 'application/pdf';
  if (TEXT_EXT.test(name)) return 'text/plain';
  if (/\.jpe?g$/i.test(name)) return 'image/jpeg';
  if (/\.png$/i.test(name)) return 'image/png';
  return 'application/octet-stream';
}

export function isImage(mime) {
  return typeof mime === 'string' && mime.startsWith('image/');
}

/** `1.2 MB`, `340 KB`, `12 bytes`. */
export function formatBytes(n) {
  if (n >= 1024 * 1024) return `${(n / (1024 * 1024)).toFixed(1)} MB`;
  if (n >= 1024) return `${Math.round(n / 1024)} KB`;
  return `${n} bytes`;
}

/** Why `file` cannot join `held` (already in the tray), or null: the kind, the count. */
export function refusal(held, file, kinds) {
  const mime = mimeOf(file);
  const name = String(file?.name ?? 'file');
  if (isImage(mime) ? !kinds.images : !kinds.documents) {
    return isImage(mime) ? `This agent takes no images: “${name}” was not attached.` : `This agent takes no files other than images: “${name}” was not attached.`;
  }
  if (held.length >= MAX_ATTACHMENTS) return `At most ${MAX_ATTACHMENTS} attachments per message: “${name}” was not attached.`;
  return null;
}

/** Standard padded base64 of `bytes` (Uint8Array). */
export function toBase64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** The decoded size of standard base64 `data`. */
export function base64Bytes(data) {
  const s = String(data ?? '');
  const pad = s.endsWith('==') ? 2 : s.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((s.length * 3) / 4) - pad);
}

/**
 * Reads a picked file into an attachment `{name, mime_type, data, size}` that fits in
 * `budget` bytes: an image larger than that or than MAX_EDGE is re-encoded as JPEG
 * (smaller and at lower quality until it fits). Throws an Error whose message says why not.
 */
export async function readAttachment(file, budget) {
  const mime = mimeOf(file);
  const name = String(file.name || 'file');
  if (isImage(mime)) {
    let bitmap = null;
    try {
      bitmap = await createImageBitmap(file);
    } catch {
      /* not decodable here: sent as it is if it fits */
    }
    const big = bitmap && Math.max(bitmap.width, bitmap.height) > MAX_EDGE;
    if (bitmap && (big || file.size > budget || !IMAGE_TYPES.includes(mime))) {
      const bytes = await shrink(bitmap, budget);
      bitmap.close?.();
      if (!bytes) throw new Error(`“${name}” cannot be made smaller than ${formatBytes(budget)}.`);
      return { name: name.replace(/\.[^.]*$/, '') + '.jpg', mime_type: 'image/jpeg', data: toBase64(bytes), size: bytes.length };
    }
    bitmap?.close?.();
  }
  if (file.size > budget) throw new Error(overBudget(name, file.size, budget));
  const bytes = new Uint8Array(await file.arrayBuffer());
  return { name, mime_type: mime, data: toBase64(bytes), size: bytes.length };
}

/** Why a file of `bytes` does not fit in the `budget` left in one message. */
export function overBudget(name, bytes, budget) {
  return `“${name}” is ${formatBytes(bytes)}; a message carries at most ${formatBytes(MAX_TOTAL_BYTES)} of attachments${budget < MAX_TOTAL_BYTES ? ` (${formatBytes(budget)} left)` : ''}.`;
}

/** JPEG bytes of `bitmap` at most MAX_EDGE on its long side and `budget` bytes, or null. */
async function shrink(bitmap, budget) {
  let scale = Math.min(1, MAX_EDGE / Math.max(bitmap.width, bitmap.height));
  for (let round = 0; round < 6; round++) {
    const w = Math.max(1, Math.round(bitmap.width * scale));
    const hgt = Math.max(1, Math.round(bitmap.height * scale));
    const canvas = document.createElement('canvas');
    canvas.width = w;
    canvas.height = hgt;
    const g = canvas.getContext('2d');
    g.fillStyle = '#fff'; // JPEG has no transparency
    g.fillRect(0, 0, w, hgt);
    g.drawImage(bitmap, 0, 0, w, hgt);
    for (const quality of [0.85, 0.7, 0.55]) {
      const blob = await new Promise((resolve) => canvas.toBlob(resolve, 'image/jpeg', quality));
      if (blob && blob.size <= budget) return new Uint8Array(await blob.arrayBuffer());
    }
    scale *= 0.7;
  }
  return null;
}
