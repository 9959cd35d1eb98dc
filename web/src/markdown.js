// A small Markdown splitter: the bridge never splits a text at code fences, so the
// page does. It finds fenced code blocks (``` or ~~~, with an info string), pipe
// tables (a header row, a `---|---` delimiter row, body rows), headings, list items
// and paragraphs. Everything stays text: the renderer builds DOM nodes with
// textContent, never innerHTML. DOM-free (tested in Node).

/**
 * Splits Markdown into segments:
 * `{kind: 'code', lang, text, closed}`, `{kind: 'table', header: [...], align: [...], rows: [[...]]}`,
 * `{kind: 'heading', level, text}`, `{kind: 'list', ordered, items: [...]}`, `{kind: 'para', text}`.
 * An unclosed fence (a message still streaming) runs to the end.
 */
export function splitMarkdown(src) {
  const lines = String(src ?? '').replace(/\r\n?/g, '\n').split('\n');
  const out = [];
  let para = [];
  const flushPara = () => {
    if (para.length) {
      out.push({ kind: 'para', text: para.join('\n') });
      para = [];
    }
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)?.*$/.exec(line);
    if (fence) {
      flushPara();
      const marker = fence[1];
      const body = [];
      let closed = false;
      let j = i + 1;
      for (; j < lines.length; j++) {
        const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(lines[j]);
        if (close && close[1][0] === marker[0] && close[1].length >= marker.length) {
          closed = true;
          break;
        }
        body.push(lines[j]);
      }
      out.push({ kind: 'code', lang: fence[2] || '', text: body.join('\n'), closed });
      i = j;
      continue;
    }
    if (isTableRow(line) && i + 1 < lines.length && isDelimiterRow(lines[i + 1])) {
      const header = cells(line);
      const align = cells(lines[i + 1]).map((d) =>
        /^:-+:$/.test(d) ? 'center' : /^-+:$/.test(d) ? 'right' : /^:-+$/.test(d) ? 'left' : '',
      );
      if (align.length === header.length) {
        flushPara();
        const rows = [];
        let j = i + 2;
        for (; j < lines.length && isTableRow(lines[j]); j++) rows.push(cells(lines[j]));
        out.push({ kind: 'table', header, align, rows });
        i = j - 1;
        continue;
      }
    }
    if (/^\s*$/.test(line)) {
      flushPara();
      continue;
    }
    const heading = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      flushPara();
      out.push({ kind: 'heading', level: heading[1].length, text: heading[2] });
      continue;
    }
    const item = /^ {0,3}([-*+]|\d{1,9}[.)])\s+(.*)$/.exec(line);
    if (item) {
      flushPara();
      const ordered = /\d/.test(item[1]);
      const last = out[out.length - 1];
      if (last && last.kind === 'list' && last.ordered === ordered && last.open) {
        last.items.push(item[2]);
      } else {
        out.push({ kind: 'list', ordered, items: [item[2]], open: true });
      }
      continue;
    }
    const last = out[out.length - 1];
    if (!para.length && last && last.kind === 'list' && last.open && /^\s+\S/.test(line)) {
      last.items[last.items.length - 1] += '\n' + line.trim();
      continue;
    }
    para.push(line);
  }
  flushPara();
  for (const s of out) delete s.open;
  return out;
}

function isTableRow(line) {
  return /^\s*\|?.*\|.*\|?\s*$/.test(line) && line.includes('|');
}

function isDelimiterRow(line) {
  const cs = cells(line);
  return cs.length > 0 && cs.every((d) => /^:?-+:?$/.test(d));
}

function cells(line) {
  let s = line.trim();
  if (s.startsWith('|')) s = s.slice(1);
  if (s.endsWith('|') && !s.endsWith('\\|')) s = s.slice(0, -1);
  const out = [];
  let cur = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\' && s[i + 1] === '|') {
      cur += '|';
      i++;
    } else if (s[i] === '|') {
      out.push(cur.trim());
      cur = '';
    } else {
      cur += s[i];
    }
  }
  out.push(cur.trim());
  return out;
}

/** The schemes a link may use: anything else (javascript:, data:, file:…) stays text. */
const SAFE_SCHEMES = new Set(['http:', 'https:', 'mailto:']);

/** `url` when it is an absolute http, https or mailto URL; null otherwise. */
export function safeHref(url) {
  if (typeof url !== 'string' || url.length > 2048) return null;
  let parsed;
  try {
    parsed = new URL(url.trim());
  } catch {
    return null;
  }
  return SAFE_SCHEMES.has(parsed.protocol) ? parsed.href : null;
}

/** A bare URL's end: trailing punctuation and an unbalanced ")" belong to the sentence. */
function trimUrl(url) {
  let u = url;
  for (;;) {
    if (/[.,;:!?'"*_]$/.test(u)) u = u.slice(0, -1);
    else if (u.endsWith(')') && (u.match(/\(/g)?.length ?? 0) < (u.match(/\)/g)?.length ?? 0)) u = u.slice(0, -1);
    else return u;
  }
}

/**
 * Splits inline text into spans: `{kind: 'code'|'strong'|'em'|'text', text}` and
 * `{kind: 'link', text, href}`. Links are `[text](url)` and bare `http(s)://` URLs,
 * only with a safe scheme (safeHref): an unsafe `[text](url)` leaves its text.
 * Code spans are never searched for links. Everything else is text.
 */
export function splitInline(text) {
  const out = [];
  const re =
    /(`+)([\s\S]*?[^`])\1(?!`)|\[([^\]\n]+)\]\(\s*<?((?:[^\s()<>]|\([^\s()<>]*\))+)>?(?:\s+"[^"\n]*")?\s*\)|\b(https?:\/\/[^\s<>`]+)|\*\*([^*\n]+?)\*\*|(?<![\w*])\*([^*\s][^*\n]*?)\*(?![\w*])|(?<![\w_])_([^_\s][^_\n]*?)_(?![\w_])/gu;
  let last = 0;
  let m;
  const pushText = (t) => {
    if (!t) return;
    const prev = out[out.length - 1];
    if (prev && prev.kind === 'text') prev.text += t;
    else out.push({ kind: 'text', text: t });
  };
  while ((m = re.exec(text))) {
    if (m.index > last) pushText(text.slice(last, m.index));
    if (m[2] !== undefined) out.push({ kind: 'code', text: m[2].replace(/^ (.*) $/, '$1') });
    else if (m[3] !== undefined) {
      const href = safeHref(m[4]);
      if (href) out.push({ kind: 'link', text: m[3], href });
      else pushText(m[3]);
    } else if (m[5] !== undefined) {
      const url = trimUrl(m[5]);
      const href = safeHref(url);
      if (href) out.push({ kind: 'link', text: url, href });
      else pushText(url);
      re.lastIndex = m.index + url.length;
    } else if (m[6] !== undefined) out.push({ kind: 'strong', text: m[6] });
    else out.push({ kind: 'em', text: m[7] ?? m[8] });
    last = re.lastIndex;
  }
  if (last < text.length) pushText(text.slice(last));
  return out;
}
