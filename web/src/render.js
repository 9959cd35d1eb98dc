// Blocks → DOM. Every rendered block is an element with data-testid="block",
// data-seq and data-block-type; text comes from the network and is only ever set
// with textContent (through dom.h); highlighted code is highlight.js's token stream
// rebuilt as text nodes (highlight.js's toLines).

import { h } from './dom.js';
import { splitMarkdown, splitInline } from './markdown.js';
import { highlightedCode, languageFor } from './highlight.js';
import { diffLines } from './diff.js';
import { toolKind, toolSummary, toolHeader, inputView, resultView, diffView, shellLine, copyButton } from './tools.js';

export { diffLines, shellLine };
import { attachmentsView } from './attachments-shown.js';

function inline(text) {
  return splitInline(text).map((s) => {
    if (s.kind === 'code') return h('code', null, s.text);
    if (s.kind === 'link') return h('a', { href: s.href, rel: 'noopener noreferrer', target: '_blank' }, s.text);
    if (s.kind === 'strong') return h('strong', null, s.text);
    if (s.kind === 'em') return h('em', null, s.text);
    return s.text;
  });
}

/** Markdown text as DOM: paragraphs, headings, lists, code blocks, tables. */
export function markdown(text) {
  const frag = h('div', { class: 'md' });
  for (const seg of splitMarkdown(text)) {
    switch (seg.kind) {
      case 'code':
        frag.appendChild(codeBlock(seg.text, seg.lang));
        break;
      case 'table': {
        const cell = (tag, t, i) => h(tag, { class: seg.align[i] ? `al-${seg.align[i]}` : null }, inline(t));
        frag.appendChild(
          h(
            'div',
            { class: 'table-wrap' },
            h(
              'table',
              null,
              h('thead', null, h('tr', null, seg.header.map((t, i) => cell('th', t, i)))),
              h(
                'tbody',
                null,
                seg.rows.map((r) => h('tr', null, seg.header.map((_, i) => cell('td', r[i] ?? '', i)))),
              ),
            ),
          ),
        );
        break;
      }
      case 'heading':
        frag.appendChild(h(`h${Math.min(6, seg.level + 2)}`, null, inline(seg.text)));
        break;
      case 'list':
        frag.appendChild(h(seg.ordered ? 'ol' : 'ul', null, seg.items.map((it) => h('li', null, inline(it)))));
        break;
      default:
        frag.appendChild(h('p', null, inline(seg.text)));
    }
  }
  return frag;
}

/** A fenced code block: highlighted when its language is known (highlight.js's tokens built as text nodes), with a Copy button. */
function codeBlock(text, lang) {
  const code = highlightedCode(text, lang);
  const language = languageFor(lang);
  if (language) code.dataset.language = language;
  return h(
    'div',
    { class: 'code-block', testid: 'code-block' },
    h('div', { class: 'code-head' }, h('span', { class: 'code-lang' }, lang || 'text'), copyButton(text, code, lang ? `${lang} code` : 'code', 'code-copy')),
    h('pre', null, code),
  );
}

function str(v, fallback = '') {
  return typeof v === 'string' ? v : fallback;
}

function usageLine(u) {
  if (!u || typeof u !== 'object') return null;
  const parts = [];
  if (Number.isFinite(u.input_tokens)) parts.push(`in ${u.input_tokens}`);
  if (Number.isFinite(u.output_tokens)) parts.push(`out ${u.output_tokens}`);
  if (Number.isFinite(u.cache_read_tokens)) parts.push(`cache ${u.cache_read_tokens}`);
  if (Number.isFinite(u.cost_usd)) parts.push(`$${u.cost_usd.toFixed(4)}`);
  return parts.length ? parts.join(' · ') : null;
}

const HUNK = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;

/**
 * A unified diff's lines (as `git diff` prints them, several files allowed), each
 * `{kind, old, new, text}`: `kind` is `add`, `del`, `ctx`, `hunk` or `meta` (a file
 * header, "\ No newline at end of file"); `old` / `new` are the line numbers the hunk
 * headers give (null where the line has none). The counts of each hunk header decide
 * where it ends, so a removed line reading `-- x` is not taken for a header.
 */
export function diffRows(patch) {
  const rows = [];
  let oldNo = 0;
  let newNo = 0;
  let oldLeft = 0;
  let newLeft = 0;
  for (const text of diffLines(patch)) {
    const inHunk = oldLeft > 0 || newLeft > 0;
    const m = inHunk ? null : HUNK.exec(text);
    if (m) {
      oldNo = Number(m[1]);
      newNo = Number(m[3]);
      oldLeft = m[2] == null ? 1 : Number(m[2]);
      newLeft = m[4] == null ? 1 : Number(m[4]);
      rows.push({ kind: 'hunk', old: null, new: null, text });
    } else if (inHunk && text.startsWith('+')) {
      rows.push({ kind: 'add', old: null, new: newNo++, text });
      newLeft -= 1;
    } else if (inHunk && text.startsWith('-')) {
      rows.push({ kind: 'del', old: oldNo++, new: null, text });
      oldLeft -= 1;
    } else if (inHunk && !text.startsWith('\\')) {
      rows.push({ kind: 'ctx', old: oldNo++, new: newNo++, text });
      oldLeft -= 1;
      newLeft -= 1;
    } else {
      rows.push({ kind: 'meta', old: null, new: null, text });
    }
  }
  return rows;
}

/** A unified diff as the edit cards show it: one row per line, old and new line numbers beside it. */
export function unifiedDiff(patch, testid = null) {
  return h(
    'div',
    { class: 'diff-body numbered', testid },
    diffRows(patch).map((r) =>
      h(
        'div',
        { class: `dl ${r.kind}` },
        h('span', { class: 'ln', 'aria-hidden': 'true' }, r.old ?? ''),
        h('span', { class: 'ln', 'aria-hidden': 'true' }, r.new ?? ''),
        h('span', { class: 'dt' }, r.text),
      ),
    ),
  );
}

function shell(block, cls, ...children) {
  return h(
    'div',
    {
      class: `block ${cls}`,
      testid: 'block',
      dataset: { seq: block.seq, blockType: block.type },
    },
    ...children,
  );
}

/** A command to copy: the text, and a Copy button (selects the text where the clipboard is unavailable). */
export function copyableCommand(text, testid) {
  const code = h('code', null, text);
  return h('div', { class: 'command', testid }, h('pre', null, code), copyButton(text, code, 'command', `${testid}-copy`));
}

/**
 * One block's element. `ctx`:
 * - `onPermission(block, optionId)`: an option was chosen
 * - `answered(requestId)`: the option id chosen for it, or undefined
 * - `resolved(block)`: true when the request is no longer waiting (turn ended)
 */
export function renderBlock(block, ctx = {}) {
  switch (block.type) {
    case 'agent_info': {
      const bits = [str(block.name, str(block.agent_id, 'agent'))];
      if (typeof block.version === 'string') bits.push(block.version);
      if (typeof block.model === 'string') bits.push(block.model);
      // The adapter starts again after a bridge restart (or a crash) with the same
      // agent: that is not news, so only the first start says "Session started".
      const el = shell(block, 'meta', h('span', null, `Session started · ${bits.join(' · ')}`));
      if (ctx.startedBefore?.(block)) el.hidden = true;
      return el;
    }
    case 'user_message': {
      const atts = Array.isArray(block.attachments) ? block.attachments : [];
      return shell(
        block,
        'user',
        h('div', { class: 'bubble' }, str(block.text)),
        attachmentsView(atts),
      );
    }
    case 'text':
      return shell(block, `assistant${block.done ? '' : ' streaming'}`, markdown(str(block.text)));
    case 'thinking':
      return shell(
        block,
        `thinking${block.done ? '' : ' streaming'}`,
        h('details', { open: !block.done }, h('summary', null, block.done ? 'Thought' : 'Thinking…'), h('div', { class: 'thinking-text' }, str(block.text))),
      );
    case 'tool_call': {
      const status = ['running', 'done', 'error'].includes(block.status) ? block.status : 'running';
      const kind = toolKind(block.name, block.input);
      const summary = toolSummary(kind, block.input, str(block.title) || null);
      const card = shell(
        block,
        `tool status-${status} kind-${kind}`,
        h(
          'details',
          { class: 'tool-card', open: kind === 'edit' || kind === 'write' || kind === 'agent' },
          h('summary', null, toolHeader(kind, block.name, summary, status)),
          block.title && kind !== 'generic' && block.title !== summary ? h('div', { class: 'tool-desc' }, str(block.title)) : null,
          inputView(kind, block.name, block.input),
          h('div', { class: 'tool-diff-slot' }),
          h('div', { class: 'tool-children' }),
          h('div', { class: 'tool-result-slot' }),
        ),
      );
      card.dataset.toolId = str(block.id);
      card.dataset.toolKind = kind;
      if (typeof block.parent_id === 'string') card.dataset.parentId = block.parent_id;
      return card;
    }
    case 'tool_result': {
      const kind = ctx.toolKind?.(str(block.tool_call_id)) ?? 'generic';
      return shell(block, `tool-result${block.is_error ? ' is-error' : ''}`, resultView(kind, block.output, block.is_error === true));
    }
    case 'permission_request': {
      const chosen = ctx.answered?.(block.request_id);
      const waiting = chosen === undefined && !ctx.resolved?.(block);
      const options = Array.isArray(block.options) ? block.options.filter((o) => o && typeof o.id === 'string') : [];
      return shell(
        block,
        `permission${waiting ? ' waiting' : ''}`,
        h(
          'div',
          { class: 'permission-card', testid: 'permission-card', dataset: { requestId: str(block.request_id), state: waiting ? 'waiting' : 'answered' } },
          h('div', { class: 'perm-title' }, `Allow ${str(block.tool, 'tool')}?`),
          h('div', { class: 'perm-input' }, inputView(toolKind(block.tool, block.input), block.tool, block.input)),
          h(
            'div',
            { class: 'perm-options' },
            options.map((o) =>
              h(
                'button',
                {
                  type: 'button',
                  class: `perm-option kind-${str(o.kind)}${chosen === o.id ? ' chosen' : ''}`,
                  testid: 'permission-option',
                  dataset: { optionId: o.id },
                  disabled: !waiting,
                  onclick: () => ctx.onPermission?.(block, o.id),
                },
                str(o.label, o.id),
              ),
            ),
          ),
          chosen !== undefined ? h('div', { class: 'perm-answer', testid: 'perm-answer' }, `Answered: ${str(options.find((o) => o.id === chosen)?.label, chosen)}`) : null,
        ),
      );
    }
    case 'plan': {
      const entries = Array.isArray(block.entries) ? block.entries : [];
      const icon = { completed: '☑', in_progress: '▶', pending: '☐' };
      return shell(
        block,
        'plan',
        h('div', { class: 'label' }, 'Plan'),
        h('ol', null, entries.map((e) => h('li', { class: `plan-${str(e?.status)}` }, `${icon[e?.status] ?? '☐'} ${str(e?.content)}`))),
      );
    }
    case 'diff': {
      const change = block.change && typeof block.change === 'object' ? block.change : {};
      const view =
        change.format === 'unified'
          ? diffView({ patch: str(change.patch) }, str(block.path))
          : diffView({ oldText: typeof change.old_text === 'string' ? change.old_text : null, newText: str(change.new_text) }, str(block.path));
      return shell(block, 'diff', view);
    }
    case 'progress': {
      const pct =
        Number.isFinite(block.current) && Number.isFinite(block.total) && block.total > 0
          ? Math.max(0, Math.min(100, Math.round((100 * block.current) / block.total)))
          : null;
      return shell(
        block,
        `progress${block.done ? ' done' : ''}`,
        h('div', null, `${block.done ? '✓' : '…'} ${str(block.message)}`),
        pct != null ? h('progress', { max: 100, value: pct }) : null,
      );
    }
    case 'bg_task':
      return shell(
        block,
        `bg-task status-${str(block.status)}`,
        h('details', null, h('summary', null, `⚙ ${str(block.title)} — ${str(block.status)}`), typeof block.output === 'string' ? h('pre', null, block.output) : null),
      );
    case 'error':
      return shell(block, 'error', h('div', null, `⚠ ${str(block.message)}`), block.code ? h('div', { class: 'label' }, str(block.code)) : null);
    case 'session_summary':
      return shell(
        block,
        'meta summary',
        h('span', null, [str(block.title), usageLine(block.usage)].filter(Boolean).join(' · ') || 'Summary'),
      );
    case 'session_state': {
      const parked = block.state === 'parked';
      const queued = Number.isSafeInteger(block.queued) && block.queued > 0 ? block.queued : 0;
      const head = parked
        ? `A terminal is driving this conversation — terminull is observing; your messages will wait (${queued} queued)`
        : `terminull drives this conversation again${queued ? ` — sending your ${queued} queued message${queued > 1 ? 's' : ''}` : ''}`;
      const detail = [str(block.message), Number.isSafeInteger(block.owner_pid) ? `terminal process ${block.owner_pid}` : ''].filter(Boolean).join(' · ');
      const argv = Array.isArray(block.resume_command) && block.resume_command.length && block.resume_command.every((a) => typeof a === 'string') ? block.resume_command : null;
      const el = shell(
        block,
        `session-state ${parked ? 'parked' : 'live'}`,
        h('div', { class: 'state-head' }, `${parked ? '⌨' : '↩'} ${head}`),
        detail ? h('div', { class: 'label' }, detail) : null,
        argv ? h('div', { class: 'label' }, 'Continue it in a terminal with:') : null,
        argv ? copyableCommand(shellLine(argv), 'resume-command') : null,
      );
      el.dataset.state = parked ? 'parked' : 'live';
      return el;
    }
    case 'session_end': {
      const reason = str(block.reason, 'completed');
      const bits = [`Turn ${reason === 'completed' ? 'finished' : reason}`];
      const u = usageLine(block.usage);
      if (u) bits.push(u);
      if (typeof block.message === 'string') bits.push(block.message);
      const el = shell(block, `meta end reason-${reason}`, h('span', null, bits.join(' · ')));
      el.dataset.reason = reason;
      return el;
    }
    default:
      return shell(block, 'meta unknown', h('span', null, `(${str(block.type)} block)`));
  }
}
