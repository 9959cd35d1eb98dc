// Diffs as the page shows them: line by line with old and new line numbers, only the
// changed lines and a few around them, and within a changed line the words that
// changed. Works on a `diff` block's whole old/new texts, an Edit's old/new strings
// or a unified patch. DOM-free (tested in Node); every loop is bounded, so a huge
// file costs a plain all-removed/all-added listing, never a quadratic stall.

/** Cells the line LCS may fill (old × new lines after the common ends); past it the middle is shown removed then added. */
const MAX_LINE_CELLS = 1_000_000;
/** Cells the word LCS of one line pair may fill; past it the whole lines are marked changed. */
const MAX_WORD_CELLS = 40_000;

/** A text's lines for a diff: a final newline ends the last line, it does not start an empty one (no stray "+"). */
export function diffLines(text) {
  const lines = (typeof text === 'string' ? text : '').split('\n');
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** Longest common subsequence of `a` and `b` as pairs [i, j] (ascending); null past `maxCells`. */
function lcs(a, b, maxCells) {
  const n = a.length;
  const m = b.length;
  if (n * m > maxCells) return null;
  // Row-major table of suffix LCS lengths.
  const w = m + 1;
  const t = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      t[i * w + j] = a[i] === b[j] ? t[(i + 1) * w + j + 1] + 1 : Math.max(t[(i + 1) * w + j], t[i * w + j + 1]);
    }
  }
  const pairs = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[i] === b[j]) {
      pairs.push([i, j]);
      i++;
      j++;
    } else if (t[(i + 1) * w + j] >= t[i * w + j + 1]) i++;
    else j++;
  }
  return pairs;
}

/**
 * The line diff of two texts: `[{kind: 'ctx'|'del'|'add', old, new, text}]` where `old`
 * and `new` are 1-based line numbers (null on the side a line is not on). `oldText`
 * null means a new file: every line added.
 */
export function lineDiff(oldText, newText) {
  const a = oldText == null ? [] : diffLines(oldText);
  const b = diffLines(newText);
  if (oldText == null || (a.length === 1 && a[0] === '')) {
    return b.length === 1 && b[0] === '' ? [] : b.map((text, j) => ({ kind: 'add', old: null, new: j + 1, text }));
  }
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const out = [];
  for (let i = 0; i < start; i++) out.push({ kind: 'ctx', old: i + 1, new: i + 1, text: a[i] });
  const midA = a.slice(start, endA);
  const midB = b.slice(start, endB);
  const pairs = lcs(midA, midB, MAX_LINE_CELLS) ?? [];
  let i = 0;
  let j = 0;
  const flush = (toI, toJ) => {
    for (; i < toI; i++) out.push({ kind: 'del', old: start + i + 1, new: null, text: midA[i] });
    for (; j < toJ; j++) out.push({ kind: 'add', old: null, new: start + j + 1, text: midB[j] });
  };
  for (const [pi, pj] of pairs) {
    flush(pi, pj);
    out.push({ kind: 'ctx', old: start + i + 1, new: start + j + 1, text: midA[i] });
    i++;
    j++;
  }
  flush(midA.length, midB.length);
  for (let k = 0; k < a.length - endA; k++) out.push({ kind: 'ctx', old: endA + k + 1, new: endB + k + 1, text: a[endA + k] });
  return out;
}

/**
 * A unified patch as diff lines (numbers from its `@@ -a,b +c,d @@` headers), with
 * `{kind: 'hunk', text}` for each header; the `---`/`+++` file lines are dropped.
 */
export function parseUnified(patch) {
  const out = [];
  let oldNo = 0;
  let newNo = 0;
  let inHunk = false;
  for (const line of diffLines(patch)) {
    const hunk = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@(.*)$/.exec(line);
    if (hunk) {
      oldNo = Number(hunk[1]);
      newNo = Number(hunk[2]);
      inHunk = true;
      out.push({ kind: 'hunk', old: null, new: null, text: line });
    } else if (!inHunk) {
      if (/^(---|\+\+\+|diff |index )/.test(line)) continue;
      out.push({ kind: 'ctx', old: null, new: null, text: line });
    } else if (line.startsWith('+')) out.push({ kind: 'add', old: null, new: newNo++, text: line.slice(1) });
    else if (line.startsWith('-')) out.push({ kind: 'del', old: oldNo++, new: null, text: line.slice(1) });
    else if (line.startsWith('\\')) continue; // "\ No newline at end of file"
    else out.push({ kind: 'ctx', old: oldNo++, new: newNo++, text: line.slice(1) });
  }
  return out;
}

/**
 * Only the changed lines and `context` lines around each: unchanged runs further away
 * become `{kind: 'skip', count}`.
 */
export function withContext(lines, context = 3) {
  const changed = lines.map((l) => l.kind !== 'ctx');
  if (!changed.some(Boolean)) return lines;
  const keep = new Array(lines.length).fill(false);
  lines.forEach((_, i) => {
    if (!changed[i]) return;
    for (let k = Math.max(0, i - context); k <= Math.min(lines.length - 1, i + context); k++) keep[k] = true;
  });
  const out = [];
  let skipped = 0;
  lines.forEach((l, i) => {
    if (keep[i]) {
      if (skipped) out.push({ kind: 'skip', count: skipped });
      skipped = 0;
      out.push(l);
    } else skipped++;
  });
  if (skipped) out.push({ kind: 'skip', count: skipped });
  return out;
}

/** Words, runs of spaces and single punctuation marks: the units a word diff compares. */
export function tokens(text) {
  return String(text).match(/[\p{L}\p{N}_]+|\s+|[^\p{L}\p{N}_\s]/gu) ?? [];
}

/**
 * The word-level change between two lines: `{old: [{text, changed}], new: [...]}`,
 * neighbouring pieces of the same kind joined. Null when the lines share too little
 * to be worth marking (under a third of their tokens), or are too long to compare.
 */
export function wordDiff(oldLine, newLine) {
  const a = tokens(oldLine);
  const b = tokens(newLine);
  const pairs = lcs(a, b, MAX_WORD_CELLS);
  if (!pairs) return null;
  const common = pairs.reduce((n, [i]) => n + (/\S/.test(a[i]) ? 1 : 0), 0);
  const words = Math.max(a.filter((t) => /\S/.test(t)).length, b.filter((t) => /\S/.test(t)).length);
  if (words === 0 || common * 3 < words) return null;
  const side = (toks, idx) => {
    const inCommon = new Set(idx);
    const out = [];
    toks.forEach((t, k) => {
      const changed = !inCommon.has(k);
      const last = out[out.length - 1];
      if (last && last.changed === changed) last.text += t;
      else out.push({ text: t, changed });
    });
    return out;
  };
  return { old: side(a, pairs.map((p) => p[0])), new: side(b, pairs.map((p) => p[1])) };
}

/**
 * Pairs each run of removed lines with the added lines that follow it (first with
 * first…) and attaches `words` (wordDiff's side) to the lines that pair well.
 * Returns the same lines, some with `words`.
 */
export function markWords(lines) {
  const out = lines.map((l) => ({ ...l }));
  for (let i = 0; i < out.length; ) {
    if (out[i].kind !== 'del') {
      i++;
      continue;
    }
    let d = i;
    while (d < out.length && out[d].kind === 'del') d++;
    let e = d;
    while (e < out.length && out[e].kind === 'add') e++;
    const n = Math.min(d - i, e - d);
    for (let k = 0; k < n; k++) {
      const w = wordDiff(out[i + k].text, out[d + k].text);
      if (w) {
        out[i + k].words = w.old;
        out[d + k].words = w.new;
      }
    }
    i = e;
  }
  return out;
}

/** Lines added and removed. */
export function diffStats(lines) {
  let added = 0;
  let removed = 0;
  for (const l of lines) {
    if (l.kind === 'add') added++;
    else if (l.kind === 'del') removed++;
  }
  return { added, removed };
}
