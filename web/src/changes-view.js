// The session's Changes tab (docs/web-client.md, "Files and Changes"): the git working
// tree of the repository holding the session's directory, through the `git` control
// (docs/files-and-git.md). Staged, unstaged and untracked files, each one's diff
// rendered like the edit cards (render.js's unifiedDiff, with line numbers), stage /
// unstage, discard after a confirmation dialog, commit with a message, recent commits,
// and the branches (switch when the tree is clean). Git's refusals (a failing hook, no
// identity, a merge in progress) are shown whole, in the bridge's words.

import { app, currentSession } from './state.js';
import { h, clear, append } from './dom.js';
import { ago } from './session-list.js';
import { unifiedDiff } from './render.js';
import { problem } from './files-view.js';
import { toast } from './status.js';

const WORDS = { M: 'modified', A: 'added', D: 'deleted', R: 'renamed', C: 'copied', U: 'conflict', T: 'type changed', '?': 'untracked' };

/** Bumped on every reload: a reply for an older one is dropped. */
let generation = 0;
/** Per session: the commit message being written, the diffs open (`staged:path`). */
const drafts = new Map();

function ask(sid, op, fields = {}) {
  if (!app.link) return Promise.reject(new Error('This phone is not connected to the computer right now.'));
  return app.link.request({ type: 'git', session_id: sid, op, ...fields });
}

function draft(sid) {
  if (!drafts.has(sid)) drafts.set(sid, { message: '', open: new Set() });
  return drafts.get(sid);
}

export function buildChangesPanel() {
  const panel = h('div', { class: 'tab-panel changes-panel', testid: 'changes-panel', hidden: true });
  const dialog = h('dialog', { class: 'confirm', testid: 'confirm-dialog' });
  document.body.append(dialog);
  app.ui.confirmDialog = dialog;
  return panel;
}

/**
 * Splits `git status` entries into the three lists: staged (the index differs from
 * HEAD), unstaged (the working tree differs from the index) and untracked. A file
 * with both is in both lists; ignored files are in none.
 */
export function groupStatus(entries) {
  const staged = [];
  const unstaged = [];
  const untracked = [];
  for (const e of Array.isArray(entries) ? entries : []) {
    if (!e || typeof e.path !== 'string') continue;
    const x = String(e.index ?? ' ');
    const y = String(e.worktree ?? ' ');
    if (x === '?' || y === '?') untracked.push({ ...e, letter: '?' });
    else if (x === '!' || y === '!') continue;
    else {
      if (x !== ' ') staged.push({ ...e, letter: x });
      if (y !== ' ') unstaged.push({ ...e, letter: y });
    }
  }
  return { staged, unstaged, untracked };
}

/** Asks "Discard …?" in a modal dialog; resolves true when the user confirms. */
export function confirmDialog(title, body, confirmLabel) {
  const dialog = app.ui.confirmDialog;
  return new Promise((resolve) => {
    const done = (v) => {
      dialog.close();
      resolve(v);
    };
    clear(dialog).append(
      h('h3', { class: 'confirm-title' }, title),
      h('p', { class: 'confirm-body' }, body),
      h(
        'div',
        { class: 'confirm-actions' },
        h('button', { type: 'button', class: 'small-btn', testid: 'confirm-cancel', onclick: () => done(false) }, 'Cancel'),
        h('button', { type: 'button', class: 'small-btn danger', testid: 'confirm-ok', onclick: () => done(true) }, confirmLabel),
      ),
    );
    dialog.oncancel = (e) => {
      e.preventDefault();
      done(false);
    };
    dialog.showModal();
  });
}

/** Shows the Changes tab of the current session, read afresh from the bridge. */
export async function showChanges(error = null) {
  const s = currentSession();
  if (!s) return;
  const sid = s.id;
  const panel = app.ui.changesPanel;
  const mine = ++generation;
  if (!panel.firstChild) panel.append(h('p', { class: 'panel-note' }, 'Loading…'));
  const [status, log, branches] = await Promise.allSettled([ask(sid, 'status'), ask(sid, 'log', { limit: 10 }), ask(sid, 'branches')]);
  if (mine !== generation || app.current !== sid) return;
  clear(panel);
  const errorSlot = h('div', { class: 'git-error-slot', testid: 'git-error-slot' }, error);
  if (status.status === 'rejected') {
    const e = status.reason;
    const notRepo = /not in a git repository/.test(e?.message ?? '');
    panel.append(
      problem(notRepo ? 'This session’s folder is not a git repository' : 'Could not read the changes', e, 'git-error'),
      h('button', { type: 'button', class: 'small-btn', onclick: () => showChanges() }, 'Try again'),
    );
    return;
  }
  const st = status.value ?? {};
  const groups = groupStatus(st.entries);
  const tracked = groups.staged.length + groups.unstaged.length;
  const head = h(
    'div',
    { class: 'git-head' },
    h('div', { class: 'git-branch', testid: 'git-branch' }, h('span', { 'aria-hidden': 'true' }, '⎇ '), typeof st.branch === 'string' ? st.branch : 'detached HEAD'),
    h('button', { type: 'button', class: 'small-btn', testid: 'git-refresh', onclick: () => showChanges() }, 'Refresh'),
  );
  panel.append(head);
  if (typeof st.in_progress === 'string') {
    panel.append(h('div', { class: 'panel-warn', testid: 'git-in-progress' }, `A ${st.in_progress} is in progress: finish it in a terminal before committing or switching branches.`));
  }
  append(panel, [errorSlot, commitBox(sid, groups.staged.length, errorSlot)]);
  const none = !tracked && !groups.untracked.length;
  if (none) panel.append(h('p', { class: 'panel-note', testid: 'git-clean' }, 'No changes: the working tree matches the last commit.'));
  section(panel, sid, 'Staged', 'staged', groups.staged, errorSlot);
  section(panel, sid, 'Changes', 'unstaged', groups.unstaged, errorSlot);
  section(panel, sid, 'Untracked', 'untracked', groups.untracked, errorSlot);
  if (st.truncated) panel.append(h('p', { class: 'panel-note' }, 'More files changed than are listed here.'));
  panel.append(commitsSection(log), branchesSection(sid, branches, tracked > 0 || typeof st.in_progress === 'string', errorSlot));
}

function showError(slot, what, e) {
  clear(slot).append(problem(what, e, 'git-error'));
  slot.scrollIntoView({ block: 'nearest' });
}

function commitBox(sid, stagedCount, errorSlot) {
  const d = draft(sid);
  const msg = h('textarea', { class: 'commit-message', testid: 'commit-message', rows: 2, placeholder: 'Commit message', 'aria-label': 'Commit message', oninput: () => update() });
  msg.value = d.message;
  const label = stagedCount ? `Commit ${stagedCount} file${stagedCount === 1 ? '' : 's'}` : 'Commit';
  const btn = h('button', { type: 'button', class: 'primary commit-btn', testid: 'commit' }, label);
  const update = () => {
    d.message = msg.value;
    btn.disabled = !stagedCount || !msg.value.trim();
  };
  update();
  btn.addEventListener('click', async () => {
    btn.disabled = true;
    btn.textContent = 'Committing…';
    try {
      const r = await ask(sid, 'commit', { message: msg.value });
      d.message = '';
      toast(`Committed ${String(r?.commit ?? '').slice(0, 7)}.`);
      await showChanges();
    } catch (e) {
      btn.textContent = label;
      update();
      showError(errorSlot, 'The commit was not made', e);
    }
  });
  return h('div', { class: 'commit-box' }, msg, btn, stagedCount ? null : h('div', { class: 'panel-note small' }, 'Stage the files to commit first.'));
}

function section(panel, sid, title, kind, entries, errorSlot) {
  if (!entries.length) return;
  panel.append(
    h('h2', { class: 'git-section' }, `${title} (${entries.length})`),
    h('ul', { class: 'change-list', testid: `changes-${kind}` }, entries.map((e) => changeRow(sid, kind, e, errorSlot))),
  );
}

function changeRow(sid, kind, e, errorSlot) {
  const d = draft(sid);
  const key = `${kind}:${e.path}`;
  const diffSlot = h('div', { class: 'cr-diff', hidden: true });
  const toggle = h(
    'button',
    { type: 'button', class: 'cr-toggle', testid: 'change-toggle', 'aria-expanded': 'false', onclick: () => flip() },
    h('span', { class: `cr-letter l-${e.letter === '?' ? 'q' : e.letter}`, title: WORDS[e.letter] ?? e.letter, 'aria-label': WORDS[e.letter] ?? e.letter }, e.letter),
    h('span', { class: 'cr-path' }, e.orig_path ? `${e.orig_path} → ${e.path}` : e.path),
  );
  const flip = async (open = diffSlot.hidden) => {
    diffSlot.hidden = !open;
    toggle.setAttribute('aria-expanded', String(open));
    if (open) d.open.add(key);
    else d.open.delete(key);
    if (!open) return;
    clear(diffSlot).append(h('p', { class: 'panel-note' }, 'Loading the diff…'));
    try {
      const r = await ask(sid, 'diff', { path: e.path, staged: kind === 'staged' });
      const text = typeof r?.diff === 'string' ? r.diff : '';
      append(clear(diffSlot), [
        text
          ? h('div', { class: 'block diff' }, h('details', { open: true }, h('summary', null, `✎ ${e.path}${kind === 'staged' ? ' (staged)' : ''}`), unifiedDiff(text, 'diff-body')))
          : h('p', { class: 'panel-note' }, 'No textual changes (a mode change, or a binary file).'),
        r?.truncated ? h('p', { class: 'panel-note' }, 'The diff is cut: it is longer than 256 KiB.') : null,
      ]);
    } catch (err) {
      clear(diffSlot).append(problem('Could not show the diff', err, 'git-error'));
    }
  };
  const act = async (op, fields, what) => {
    try {
      await ask(sid, op, fields);
      clear(errorSlot);
      await showChanges();
    } catch (err) {
      showError(errorSlot, what, err);
    }
  };
  const actions = [];
  if (kind === 'staged') {
    actions.push(h('button', { type: 'button', class: 'small-btn', testid: 'unstage', onclick: () => act('unstage', { paths: [e.path] }, `Could not unstage ${e.path}`) }, 'Unstage'));
  } else {
    actions.push(
      h(
        'button',
        {
          type: 'button',
          class: 'small-btn icon danger-ink',
          testid: 'discard',
          'aria-label': `Discard the changes to ${e.path}`,
          onclick: async () => {
            const untracked = kind === 'untracked';
            const ok = await confirmDialog(
              untracked ? `Delete ${e.path}?` : `Discard the changes to ${e.path}?`,
              untracked
                ? 'This file is not tracked by git: it will be deleted from the computer. This cannot be undone.'
                : 'Its staged and unstaged changes are thrown away and the file goes back to the last commit. This cannot be undone.',
              untracked ? 'Delete' : 'Discard',
            );
            if (ok) act('discard', { path: e.path, confirmed: true }, `Could not discard ${e.path}`);
          },
        },
        kind === 'untracked' ? '✕' : '↺',
      ),
      h('button', { type: 'button', class: 'small-btn', testid: 'stage', onclick: () => act('stage', { paths: [e.path] }, `Could not stage ${e.path}`) }, 'Stage'),
    );
  }
  if (d.open.has(key)) flip(true);
  return h('li', { class: 'change-row', testid: 'change-row', dataset: { path: e.path, kind } }, h('div', { class: 'cr-main' }, toggle, ...actions), diffSlot);
}

function commitsSection(log) {
  const wrap = h('div', { class: 'git-log' }, h('h2', { class: 'git-section' }, 'Recent commits'));
  if (log.status === 'rejected') return wrap.appendChild(problem('Could not read the commits', log.reason, 'git-log-error')) && wrap;
  const commits = Array.isArray(log.value?.commits) ? log.value.commits : [];
  if (!commits.length) return wrap.appendChild(h('p', { class: 'panel-note' }, 'No commits yet.')) && wrap;
  wrap.append(
    h(
      'ul',
      { class: 'commit-list', testid: 'commit-list' },
      commits.map((c) =>
        h(
          'li',
          { class: 'commit-row', testid: 'commit-row', dataset: { commit: String(c?.commit ?? '') } },
          h('div', { class: 'cm-subject' }, String(c?.subject ?? '')),
          h('div', { class: 'cm-meta' }, [String(c?.commit ?? '').slice(0, 7), String(c?.author ?? ''), Number.isFinite(c?.time) ? ago(c.time) : ''].filter(Boolean).join(' · ')),
        ),
      ),
    ),
  );
  return wrap;
}

function branchesSection(sid, branches, dirty, errorSlot) {
  const wrap = h('div', { class: 'git-branches' }, h('h2', { class: 'git-section' }, 'Branches'));
  if (branches.status === 'rejected') {
    wrap.append(problem('Could not list the branches', branches.reason, 'git-branches-error'));
    return wrap;
  }
  const list = Array.isArray(branches.value?.branches) ? branches.value.branches : [];
  if (dirty && list.length > 1) wrap.append(h('p', { class: 'panel-note small' }, 'Commit or discard the changes to tracked files to switch branches.'));
  wrap.append(
    h(
      'ul',
      { class: 'branch-list', testid: 'branch-list' },
      list.map((b) =>
        h(
          'li',
          { class: `branch-row${b?.current ? ' current' : ''}`, testid: 'branch-row', dataset: { branch: String(b?.name ?? '') } },
          h('span', { class: 'br-name' }, String(b?.name ?? ''), b?.upstream ? h('span', { class: 'br-up' }, ` → ${b.upstream}`) : null),
          b?.current
            ? h('span', { class: 'br-current' }, 'current')
            : h(
                'button',
                {
                  type: 'button',
                  class: 'small-btn',
                  testid: 'switch-branch',
                  disabled: dirty,
                  onclick: async () => {
                    try {
                      await ask(sid, 'switch', { branch: String(b.name) });
                      toast(`Switched to ${b.name}.`);
                      clear(errorSlot);
                      await showChanges();
                    } catch (e) {
                      showError(errorSlot, `Could not switch to ${b.name}`, e);
                    }
                  },
                },
                'Switch',
              ),
        ),
      ),
    ),
  );
  return wrap;
}
