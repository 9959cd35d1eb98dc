// DOM helpers. Strings always become text nodes: untrusted text never reaches
// innerHTML.

/**
 * `h('div', {class: 'x', dataset: {seq: 3}, onclick: f}, 'text', child, [more])`.
 * Attributes named `on…` with a function become listeners; `dataset` sets data-*;
 * `testid` sets data-testid; `false`/`null` attributes are skipped.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === false || v == null) continue;
      if (k === 'dataset') {
        for (const [dk, dv] of Object.entries(v)) if (dv != null) el.dataset[dk] = String(dv);
      } else if (k === 'testid') {
        el.dataset.testid = v;
      } else if (k.startsWith('on') && typeof v === 'function') {
        el.addEventListener(k.slice(2), v);
      } else if (k === 'class') {
        el.className = v;
      } else if (k === 'value') {
        el.value = v;
      } else if (v === true) {
        el.setAttribute(k, '');
      } else {
        el.setAttribute(k, String(v));
      }
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

export function $(sel, root = document) {
  return root.querySelector(sel);
}

/**
 * Copies `text` (shown in `el`). The Clipboard API exists only in secure contexts
 * (not on a LAN page over http), so the text is also selected, and copied with
 * `execCommand` where that still works: the user can copy the selection by hand.
 * Returns 'copied' or 'selected'.
 */
export async function copyText(text, el) {
  if (el) {
    const range = document.createRange();
    range.selectNodeContents(el);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  }
  try {
    if (window.isSecureContext && navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return 'copied';
    }
  } catch {
    /* refused: fall back to the selection */
  }
  try {
    if (el && document.execCommand('copy')) return 'copied';
  } catch {
    /* not supported */
  }
  return 'selected';
}
