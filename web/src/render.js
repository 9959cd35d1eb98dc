// Blocks → DOM. Every rendered block is an element with data-testid="block",
// data-seq and data-block-type; text comes from the network and is only ever set
// with textContent (through dom.h).

import { h, copyText } from './dom.js';
import { splitMarkdown, splitInline } from './markdown.js';
import { attachmentsView } from './attachments-shown.js';

function inline(text) {
  return splitInline(text).map((s) => {
    if (s.kind === 'code') return h('code', null, s.text);
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
        frag.appendChild(
          h(
            'div',
            { class: 'code-block' },
            seg.lang ? h('div', { class: 'code-lang' }, seg.lang) : null,
            h('pre', null, h('code', null, seg.text)),
          ),
        );
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

function str(v, fallback = '') {
  return typeof v === 'string' ? v : fallback;
}

function json(v) {
  if (v == null) return '';
  if (typeof v === 'string') return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
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

/** A text's lines for a diff: a final newline ends the last line, it does not start an empty one (no stray "+"). */
export function diffLines(text) {
  const lines = str(text).split('\n');
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  return lines;
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

function toolSummary(input) {
  if (input && typeof input === 'object') {
    for (const k of ['command', 'file_path', 'path', 'pattern', 'url', 'query', 'description']) {
      if (typeof input[k] === 'string') return input[k];
    }
  }
  return '';
}

/** argv as one shell line, each argument quoted when it needs it. */
export function shellLine(argv) {
  return argv.map((a) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(' ');
}

/** A command to copy: the text, and a Copy button (selects the text where the clipboard is unavailable). */
export function copyableCommand(text, testid) {
  const code = h('code', null, text);
  const btn = h('button', { type: 'button', class: 'copy-btn', testid: `${testid}-copy` }, 'Copy');
  btn.addEventListener('click', async () => {
    const how = await copyText(text, code);
    btn.textContent = how === 'copied' ? 'Copied' : 'Selected: copy it';
  });
  return h('div', { class: 'command', testid }, h('pre', null, code), btn);
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
      const title = str(block.title) || toolSummary(block.input);
      const card = shell(
        block,
        `tool status-${status}`,
        h(
          'details',
          { class: 'tool-card' },
          h(
            'summary',
            null,
            h('span', { class: `tool-status ${status}`, 'aria-label': status }, status === 'running' ? '…' : status === 'done' ? '✓' : '✕'),
            h('span', { class: 'tool-name' }, str(block.name, 'tool')),
            title ? h('span', { class: 'tool-title' }, title) : null,
          ),
          block.input != null ? h('pre', { class: 'tool-input' }, json(block.input)) : null,
          h('div', { class: 'tool-result-slot' }),
        ),
      );
      card.dataset.toolId = str(block.id);
      return card;
    }
    case 'tool_result':
      return shell(
        block,
        `tool-result${block.is_error ? ' is-error' : ''}`,
        h('div', { class: 'label' }, block.is_error ? 'Result (error)' : 'Result'),
        h('pre', null, str(block.output)),
      );
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
          block.input != null ? h('pre', { class: 'perm-input' }, json(block.input)) : null,
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
      let body;
      if (change.format === 'unified') {
        body = h(
          'pre',
          { class: 'diff-body' },
          str(change.patch)
            .split('\n')
            .map((l) => h('span', { class: l.startsWith('+') && !l.startsWith('+++') ? 'add' : l.startsWith('-') && !l.startsWith('---') ? 'del' : l.startsWith('@@') ? 'hunk' : null }, l + '\n')),
        );
      } else {
        body = h(
          'div',
          null,
          typeof change.old_text === 'string' ? h('pre', { class: 'diff-body' }, diffLines(change.old_text).map((l) => h('span', { class: 'del' }, `-${l}\n`))) : h('div', { class: 'label' }, 'New file'),
          h('pre', { class: 'diff-body' }, diffLines(change.new_text).map((l) => h('span', { class: 'add' }, `+${l}\n`))),
        );
      }
      return shell(block, 'diff', h('details', { open: true }, h('summary', null, `✎ ${str(block.path, 'file')}`), body));
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
