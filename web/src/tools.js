// Tool cards per kind. A `tool_call` carries the agent's own tool name and input
// (protocol/src/blocks.rs); the page tells the kind from the name each adapter passes
// on (Claude Code's `Bash`/`Edit`/`Read`…, Codex's `shell`/`apply_patch`, Gemini's
// `run_shell_command`/`replace`, OpenCode's `bash`/`edit`, an ACP agent's tool kind
// `execute`/`edit`/`read`/`search`/`fetch`) and, failing that, from the input's shape
// (a `command`, an `old_string`…). Each kind shows its input as a person reads it —
// shell: the command; edit/write: an inline diff; read/search: path, range, pattern;
// fetch: the URL; sub-agent: its task, with its own calls nested — and the generic
// card lists the input's fields. The same bodies serve permission cards.

import { h, copyText } from './dom.js';
import { lineDiff, parseUnified, withContext, markWords, diffStats } from './diff.js';
import { safeHref } from './markdown.js';

const NAMES = {
  shell: /^(bash|shell|exec|exec_command|execute|run_shell_command|run_terminal_cmd|run_command|terminal|local_shell|command|powershell)$/i,
  edit: /^(edit|multiedit|multi_edit|str_replace|str_replace_editor|str_replace_based_edit_tool|replace|edit_file|apply_patch|patch|search_replace|notebookedit)$/i,
  write: /^(write|write_file|create|create_file|writefile)$/i,
  read: /^(read|read_file|view|view_file|cat|read_many_files|notebookread|readfile)$/i,
  search: /^(grep|glob|search|find|ls|list|list_dir|list_directory|search_file_content|codebase_search|file_search|grep_search|find_files)$/i,
  fetch: /^(webfetch|web_fetch|fetch|websearch|web_search|google_web_search|browse|open_url)$/i,
  agent: /^(task|agent|subagent|sub_agent|spawn_agent|dispatch_agent)$/i,
};

/** The label of each kind on a card. */
export const KIND_LABEL = {
  shell: 'Shell',
  edit: 'Edit',
  write: 'Write',
  read: 'Read',
  search: 'Search',
  fetch: 'Web',
  agent: 'Sub-agent',
  generic: 'Tool',
};

const ICON = { shell: '$', edit: '✎', write: '✚', read: '▤', search: '⌕', fetch: '⇅', agent: '◈', generic: '⚙' };

function obj(v) {
  return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
}

function first(input, keys) {
  for (const k of keys) if (typeof input[k] === 'string' && input[k]) return input[k];
  return null;
}

/** argv as one shell line, each argument quoted when it needs it. */
export function shellLine(argv) {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(' ');
}

/** The command of a shell tool's input: a string, or argv (`["bash", "-lc", "…"]` shows the script). */
export function commandOf(input) {
  const c = obj(input).command ?? obj(input).cmd ?? obj(input).argv;
  if (typeof c === 'string') return c;
  if (Array.isArray(c) && c.every((a) => typeof a === 'string')) {
    if (c.length === 3 && /(^|\/)(ba|z)?sh$/.test(c[0]) && /^-l?c$/.test(c[1])) return c[2];
    return shellLine(c);
  }
  return null;
}

/** The file a tool works on. */
export function pathOf(input) {
  const i = obj(input);
  const p = first(i, ['file_path', 'filePath', 'path', 'absolute_path', 'notebook_path', 'target_file', 'file', 'filename']);
  if (p) return p;
  if (Array.isArray(i.locations) && typeof i.locations[0] === 'string') return i.locations[0];
  if (Array.isArray(i.changes) && typeof i.changes[0]?.path === 'string') return i.changes[0].path;
  return null;
}

/** The kind of card for a tool: shell, edit, write, read, search, fetch, agent or generic. */
export function toolKind(name, input) {
  const n = typeof name === 'string' ? name.trim() : '';
  for (const [kind, re] of Object.entries(NAMES)) if (re.test(n)) return kind;
  const i = obj(input);
  if (typeof i.old_string === 'string' || typeof i.oldString === 'string' || Array.isArray(i.edits)) return 'edit';
  if (commandOf(i) != null && !pathOf(i)) return 'shell';
  if (typeof i.url === 'string') return 'fetch';
  if (typeof i.content === 'string' && pathOf(i)) return 'write';
  if (typeof i.pattern === 'string') return 'search';
  return 'generic';
}

/** A tool name for people: `mcp__github__create_issue` → `github · create_issue`. */
export function displayName(name) {
  const n = typeof name === 'string' && name ? name : 'tool';
  const mcp = /^mcp__([^_]+(?:_[^_]+)*?)__(.+)$/.exec(n);
  return mcp ? `${mcp[1]} · ${mcp[2]}` : n;
}

/** The one line a card's header shows after its kind. */
export function toolSummary(kind, input, title) {
  const i = obj(input);
  switch (kind) {
    case 'shell':
      return commandOf(i) ?? title ?? '';
    case 'edit':
    case 'write':
    case 'read':
      return pathOf(i) ?? title ?? '';
    case 'search':
      return [first(i, ['pattern', 'query', 'glob']), pathOf(i)].filter(Boolean).join(' in ') || title || '';
    case 'fetch':
      return first(i, ['url', 'query']) ?? title ?? '';
    case 'agent':
      return first(i, ['description', 'title', 'prompt']) ?? title ?? '';
    default:
      return title ?? first(i, ['description', 'title', 'query', 'path', 'name']) ?? '';
  }
}

/** A Copy button for `text` (shown in `shown`); screen readers hear "Copy <what>" (and then "Copied <what>"). */
export function copyButton(text, shown, what, testid) {
  const btn = h('button', { type: 'button', class: 'copy-btn', 'aria-label': `Copy ${what}`, testid }, 'Copy');
  btn.addEventListener('click', async (e) => {
    e.preventDefault();
    e.stopPropagation();
    const how = await copyText(text, shown);
    const said = how === 'copied' ? 'Copied' : 'Selected';
    btn.textContent = said;
    btn.setAttribute('aria-label', `${said} ${what}`);
    btn.dataset.copied = how;
  });
  return btn;
}

/** A shell command, whole and wrapped, with a Copy button. */
export function commandView(command, testid = 'shell-command') {
  const code = h('code', null, command);
  return h('div', { class: 'command shell-cmd', testid }, h('pre', null, h('span', { class: 'prompt', 'aria-hidden': 'true' }, '$ '), code), copyButton(command, code, 'command', `${testid}-copy`));
}

/** Lines past which a diff starts collapsed behind "Show all". */
const DIFF_COLLAPSED_LINES = 24;

function lineEl(l) {
  if (l.kind === 'skip') return h('div', { class: 'dl skip' }, h('span', { class: 'ln' }), h('span', { class: 'ln' }), h('span', { class: 'dt' }, `⋯ ${l.count} unchanged line${l.count > 1 ? 's' : ''}`));
  if (l.kind === 'hunk') return h('div', { class: 'dl hunk' }, h('span', { class: 'ln' }), h('span', { class: 'ln' }), h('span', { class: 'dt' }, l.text));
  const sign = l.kind === 'add' ? '+' : l.kind === 'del' ? '-' : ' ';
  const text = l.words ? l.words.map((w) => (w.changed ? h('mark', null, w.text) : w.text)) : l.text;
  return h(
    'div',
    { class: `dl ${l.kind}` },
    h('span', { class: 'ln', 'aria-hidden': 'true' }, l.old ?? ''),
    h('span', { class: 'ln', 'aria-hidden': 'true' }, l.new ?? ''),
    h('span', { class: 'dt' }, h('span', { class: 'sign', 'aria-hidden': 'true' }, sign), text),
  );
}

/**
 * An inline diff: `{oldText, newText}` (oldText null: a new file) or `{patch}`, with
 * line numbers, word-level marks, only the changes and 3 lines around them, and
 * collapsed past 24 lines.
 */
export function diffView(change, path) {
  const all = change.patch != null ? parseUnified(change.patch) : lineDiff(change.oldText, change.newText);
  const lines = markWords(change.patch != null ? all : withContext(all));
  const { added, removed } = diffStats(all);
  const body = h('div', { class: 'diff-lines', role: 'group', 'aria-label': `Changes to ${path || 'the file'}` }, lines.map(lineEl));
  const long = lines.length > DIFF_COLLAPSED_LINES;
  const el = h(
    'div',
    { class: `inline-diff${long ? ' collapsed' : ''}`, testid: 'inline-diff' },
    h('div', { class: 'diff-head' }, path ? h('span', { class: 'diff-path' }, path) : null, h('span', { class: 'diff-stat' }, h('span', { class: 'plus' }, `+${added}`), ' ', h('span', { class: 'minus' }, `−${removed}`)), change.oldText === null ? h('span', { class: 'diff-badge' }, 'new file') : null),
    body,
  );
  if (long) {
    const more = h('button', { type: 'button', class: 'show-all', testid: 'diff-show-all' }, `Show all ${lines.length} lines`);
    more.addEventListener('click', () => {
      el.classList.remove('collapsed');
      more.remove();
    });
    el.append(more);
  }
  return el;
}

function field(label, value) {
  return value == null || value === '' ? null : h('div', { class: 'kv' }, h('span', { class: 'k' }, label), h('span', { class: 'v' }, value));
}

function scalar(v) {
  if (v == null) return '—';
  if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v) && v.every((x) => x == null || typeof x !== 'object')) return v.join(', ');
  return null;
}

/** The fields of an input as label/value rows; nested values as indented rows (never JSON). */
function fieldsView(input, depth = 0) {
  const entries = Object.entries(obj(input)).slice(0, 40);
  return h(
    'div',
    { class: 'kvs' },
    entries.map(([k, v]) => {
      const s = scalar(v);
      if (s != null) return h('div', { class: 'kv' }, h('span', { class: 'k' }, k), s.includes('\n') ? h('pre', { class: 'v' }, s) : h('span', { class: 'v' }, s));
      if (depth >= 2) return field(k, '…');
      const inner = Array.isArray(v) ? Object.fromEntries(v.slice(0, 40).map((x, n) => [String(n + 1), x])) : v;
      return h('div', { class: 'kv nested' }, h('span', { class: 'k' }, k), fieldsView(inner, depth + 1));
    }),
  );
}

function rangeOf(i) {
  const offset = Number.isSafeInteger(i.offset) ? i.offset : Number.isSafeInteger(i.start_line) ? i.start_line : null;
  const limit = Number.isSafeInteger(i.limit) ? i.limit : null;
  const end = Number.isSafeInteger(i.end_line) ? i.end_line : offset != null && limit != null ? offset + limit - 1 : null;
  if (offset != null && end != null) return `lines ${offset}–${end}`;
  if (offset != null) return `from line ${offset}`;
  if (limit != null) return `first ${limit} lines`;
  return null;
}

/** What an Edit's input changes: `[{oldText, newText}]` (MultiEdit: one per edit). */
function editsOf(i) {
  const one = (e) => {
    const o = e.old_string ?? e.oldString ?? e.old_str;
    const n = e.new_string ?? e.newString ?? e.new_str;
    return typeof o === 'string' && typeof n === 'string' ? { oldText: o, newText: n } : null;
  };
  if (Array.isArray(i.edits)) return i.edits.map((e) => one(obj(e))).filter(Boolean);
  const e = one(i);
  return e ? [e] : [];
}

/** The body of a card for a tool's input: what a person needs to read before and after it ran. */
export function inputView(kind, name, input) {
  const i = obj(input);
  const path = pathOf(i);
  switch (kind) {
    case 'shell': {
      const cmd = commandOf(i);
      return h('div', { class: 'tool-body' }, cmd != null ? commandView(cmd) : null, field('cwd', first(i, ['cwd', 'workdir', 'dir'])), field('why', first(i, ['description', 'justification'])));
    }
    case 'edit': {
      const edits = editsOf(i);
      if (!edits.length) {
        const files = Array.isArray(i.changes) ? i.changes.map((c) => `${obj(c).kind ?? 'change'} ${obj(c).path ?? '?'}`).join('\n') : null;
        return h('div', { class: 'tool-body' }, files ? h('pre', { class: 'files' }, files) : path ? field('file', path) : fieldsView(i));
      }
      return h('div', { class: 'tool-body input-diff' }, edits.map((e) => diffView(e, path)));
    }
    case 'write': {
      const content = first(i, ['content', 'contents', 'text', 'file_text']);
      return h('div', { class: 'tool-body input-diff' }, content != null ? diffView({ oldText: null, newText: content }, path) : field('file', path));
    }
    case 'read':
      return h('div', { class: 'tool-body' }, field('file', path), field('range', rangeOf(i)));
    case 'search':
      return h('div', { class: 'tool-body' }, field('pattern', first(i, ['pattern', 'query', 'regex'])), field('in', path), field('files', first(i, ['glob', 'include', 'type'])));
    case 'fetch': {
      const url = first(i, ['url']);
      const href = safeHref(url);
      return h(
        'div',
        { class: 'tool-body' },
        url ? h('div', { class: 'kv' }, h('span', { class: 'k' }, 'url'), href ? h('a', { class: 'v', href, rel: 'noopener noreferrer', target: '_blank' }, url) : h('span', { class: 'v' }, url)) : null,
        field('query', first(i, ['query'])),
        field('asks', first(i, ['prompt'])),
      );
    }
    case 'agent':
      return h('div', { class: 'tool-body' }, field('agent', first(i, ['subagent_type', 'agent', 'agent_type'])), field('task', first(i, ['prompt', 'task', 'message'])));
    default:
      return h('div', { class: 'tool-body' }, fieldsView(i));
  }
}

/** Output lines, not counting a final newline. */
function lineCount(text) {
  const t = text.replace(/\n$/, '');
  return t ? t.split('\n').length : 0;
}

/** A shell result's exit status when the output names it ("Exit code 2", "exit status 1"). */
export function exitStatus(output) {
  const m = /\bexit(?:ed with)? (?:code|status)[ :]*(-?\d+)\b/i.exec(output.slice(-400));
  return m ? Number(m[1]) : null;
}

/** The count a search's output shows: "Found N files" or one match per line. */
export function matchCount(output) {
  const m = /^Found (\d+) (file|match|line)/im.exec(output);
  if (m) return Number(m[1]);
  return output.split('\n').filter((l) => l.trim() && !/^No (matches|files) found/i.test(l)).length;
}

/** Output lines past which it starts collapsed. */
const OUTPUT_COLLAPSED_LINES = 12;

function outputPre(text, cls) {
  const pre = h('pre', { class: `tool-output ${cls ?? ''}` }, text);
  if (lineCount(text) <= OUTPUT_COLLAPSED_LINES) return pre;
  pre.classList.add('clipped');
  const more = h('button', { type: 'button', class: 'show-all', testid: 'output-show-all' }, `Show all ${lineCount(text)} lines`);
  more.addEventListener('click', () => {
    pre.classList.remove('clipped');
    more.remove();
  });
  return h('div', null, pre, more);
}

/** A tool's result inside its card, shown for its kind. */
export function resultView(kind, output, isError) {
  const text = typeof output === 'string' ? output : '';
  const status = [];
  if (kind === 'shell') {
    const code = exitStatus(text);
    status.push(isError ? `Failed${code != null ? ` · exit ${code}` : ''}` : code != null ? `exit ${code}` : 'Succeeded');
  } else if (kind === 'search' && !isError) {
    const n = matchCount(text);
    status.push(`${n} result${n === 1 ? '' : 's'}`);
  } else if (kind === 'read' && !isError) {
    status.push(`${lineCount(text)} lines read`);
  } else status.push(isError ? 'Failed' : 'Result');
  return h('div', { class: `result-view${isError ? ' failed' : ''}`, testid: 'tool-output' }, h('div', { class: 'result-status' }, status.join(' · ')), text ? outputPre(text, kind === 'shell' ? 'mono' : '') : null);
}

/** A card's header: status, kind, name when it says more than the kind, and the one-line summary. */
export function toolHeader(kind, name, summary, status) {
  const shown = displayName(name);
  return [
    h('span', { class: `tool-status ${status}`, role: 'img', 'aria-label': status === 'running' ? 'running' : status === 'done' ? 'done' : 'failed' }, status === 'running' ? '…' : status === 'done' ? '✓' : '✕'),
    h('span', { class: 'tool-kind', 'aria-hidden': 'true' }, ICON[kind]),
    h('span', { class: 'tool-name' }, kind === 'generic' ? shown : KIND_LABEL[kind]),
    summary ? h('span', { class: 'tool-title' }, summary) : null,
  ];
}
