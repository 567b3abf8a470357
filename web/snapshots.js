// SPDX-License-Identifier: MIT
// Pause, snapshots and fork on the workspace page: the Snapshots tab (the workspace's snapshots;
// take one, delete one, create a workspace from one), the Fork dialog (one snapshot, N new
// workspaces, shown as links when they are made), and the words for a request the controller
// refused because the workspace is paused (409 "paused"), with a Resume button.
import { api, enc, followEvents } from './api.js';
import { h, replace, badge, fmtTime, fmtMs, fmtBytes, field, showError, shortImage } from './dom.js';

export const FORK_MAX = 100;

// err: the box a refusal goes in. A 409 "paused" says what it means and offers resume() (the
// workspace page's, which redraws the page); anything else is shown as showError() shows it.
export function showRefusal(box, err, resume) {
	delete box.dataset.code;
	if (!err || err.status !== 409 || err.code !== 'paused' || !resume) {
		showError(box, err);
		return;
	}
	const btn = h('button.primary.resume-here', {
		type: 'button',
		on: {
			click: async () => {
				btn.disabled = true;
				try {
					await resume();
					delete box.dataset.code;
					showError(box, null);
				} catch (e) {
					showError(box, e);
				}
			},
		},
	}, 'Resume');
	box.hidden = false;
	box.dataset.code = 'paused';
	replace(box,
		h('div', 'This workspace is paused: its processes are frozen and nothing new starts in it until it is resumed. Resume it, then try again.'),
		h('div.actions', btn),
		h('div.muted', `${err.message} (HTTP 409, paused)`));
}

// The Fork dialog: how many (1 … FORK_MAX), then the new workspaces as links. onDone(answer)
// after a fork.
export function openForkDialog(host, ctx, id, onDone) {
	const wsPath = '/v1/workspaces/' + enc(id);
	const count = h('input#fork-count', { type: 'number', min: 1, max: FORK_MAX, step: 1, value: '1', required: true });
	const err = h('div.error#fork-error', { hidden: true, role: 'alert' });
	const result = h('div#fork-result', { hidden: true, role: 'status' });
	const go = h('button.primary#fork-go', { type: 'submit' }, 'Fork');
	const close = h('button#fork-close', { type: 'button', on: { click: () => dlg.close() } }, 'Close');
	const dlg = h('dialog.files-dialog#fork-dialog', { 'aria-labelledby': 'fork-title' },
		h('form', {
			novalidate: true,
			on: { submit: (ev) => { ev.preventDefault(); fork(); } },
		},
		h('h2#fork-title', 'Fork workspace ', h('span.mono', id)),
		h('p.files-dialog-body', 'One snapshot of this workspace (it is paused while the snapshot is read), then that many new workspaces made from it, each on its own from then on.'),
		field('How many', count, `1 to ${FORK_MAX}`),
		err,
		result,
		h('div.actions', go, close)));
	const stopClose = ctx.onClose(() => dlg.close());
	dlg.addEventListener('close', () => {
		stopClose();
		dlg.remove();
	});

	async function fork() {
		const n = Number(count.value);
		if (!/^\d+$/.test(count.value.trim()) || n < 1 || n > FORK_MAX) {
			showError(err, new Error(`How many: "${count.value}" is not a whole number from 1 to ${FORK_MAX}.`));
			count.focus();
			return;
		}
		go.disabled = true;
		replace(go, 'Forking…');
		showError(err, null);
		try {
			const a = await api('POST', wsPath + '/fork', { count: n });
			showResult(a);
			onDone?.(a);
		} catch (e) {
			showError(err, e);
		} finally {
			go.disabled = false;
			replace(go, 'Fork');
		}
	}

	function showResult(a) {
		const made = a.workspaces || [];
		result.hidden = false;
		replace(result,
			h('p', `${made.length} new workspace${made.length === 1 ? '' : 's'} from snapshot `, h('span.mono#fork-snapshot', a.snapshot ?? '—'),
				a.pausedMs !== undefined ? ` (${id} was paused ${fmtMs(a.pausedMs)} for it)` : '', ':'),
			h('ul.fork-list', made.map((w) => h('li', { 'data-id': w.id },
				h('a.mono.fork-link', { href: '#/w/' + enc(w.id), on: { click: () => dlg.close() } }, w.id), ' ', badge(w.state)))));
	}

	host.append(dlg);
	dlg.showModal();
	count.focus();
	count.select();
	return dlg;
}

// The Snapshots tab. hooks.workspace(): the workspace's JSON as the page last read it;
// hooks.resume(): resumes it (the page redraws). It sets hooks.reloadSnapshots, which the Fork
// dialog calls when its snapshot is made.
export function snapshotsTab(root, ctx, id, hooks) {
	const wsPath = '/v1/workspaces/' + enc(id);
	const err = h('div.error#snap-error', { hidden: true, role: 'alert' });
	const notice = h('div.notice#snap-notice', { hidden: true, role: 'status' });
	const list = h('div#snap-list', h('p.muted', 'Loading…'));
	const name = h('input#snap-name', { type: 'text', maxlength: 128, placeholder: 'e.g. after npm install', spellcheck: 'false', autocomplete: 'off' });
	const memory = h('input#snap-memory', { type: 'checkbox' });
	const take = h('button.primary#snap-take', { type: 'submit' }, 'Take snapshot');
	const form = h('form.card#snap-form', { novalidate: true, on: { submit: (ev) => { ev.preventDefault(); takeSnapshot(); } } },
		h('h2', 'Take a snapshot'),
		h('p.muted', 'HOME and the changes to the root filesystem, read while the workspace is paused for a moment, kept as an image. A host workspace\'s snapshot holds its workspace directory only.'),
		field('Name', name, 'optional, up to 128 characters'),
		h('label.checkbox', memory, ' Memory too: the processes, restored running (where this worker can checkpoint)'),
		h('div.actions', take));
	replace(root, err, notice,
		h('section.card', h('div.card-head', h('h2', 'Snapshots'),
			h('button#snap-refresh', { type: 'button', on: { click: () => load() } }, 'Refresh')), list),
		form);

	function say(...parts) {
		notice.hidden = false;
		replace(notice, h('div', parts), h('div.actions', h('button', { type: 'button', on: { click: () => showError(notice, null) } }, 'Hide')));
	}

	async function takeSnapshot() {
		const body = { memory: memory.checked };
		const n = name.value.trim();
		if (n) body.name = n;
		take.disabled = true;
		replace(take, 'Taking…');
		try {
			const s = await api('POST', wsPath + '/snapshots', body);
			showError(err, null);
			name.value = '';
			say('Snapshot ', h('span.mono', s.id), s.name ? ` (${s.name})` : '', ` taken: ${fmtBytes(s.sizeBytes)}`,
				s.pausedMs !== undefined ? `, the workspace paused ${fmtMs(s.pausedMs)} for it.` : '.');
		} catch (e) {
			showRefusal(err, e, hooks.resume);
		} finally {
			take.disabled = false;
			replace(take, 'Take snapshot');
		}
		load();
	}

	async function remove(s) {
		if (!confirm(`Delete snapshot ${s.name ? s.name + ' (' + s.id + ')' : s.id}? Its image goes too, unless another image shares its layers.`)) return;
		try {
			await api('DELETE', '/v1/snapshots/' + enc(s.id));
			showError(err, null);
		} catch (e) {
			showError(err, e.status === 409 ? withHint(e, ' A workspace still runs on it: delete that workspace first.') : e);
		}
		load();
	}

	// A new workspace from the snapshot, with this workspace's adapter; shown as a link.
	async function createFrom(s, btn) {
		const body = { snapshot: s.id };
		const ws = hooks.workspace();
		if (ws?.adapter) body.adapter = ws.adapter;
		btn.disabled = true;
		try {
			const made = await api('POST', '/v1/workspaces', body);
			showError(err, null);
			say('Workspace ', h('a.mono#snap-created', { href: '#/w/' + enc(made.id) }, made.id), ' created from snapshot ', h('span.mono', s.id), '.');
		} catch (e) {
			showError(err, e);
		} finally {
			btn.disabled = false;
		}
	}

	function table(mine) {
		if (!mine.length) return h('p.muted', 'No snapshot of this workspace.');
		return h('div.table-scroll', h('table.list#snap-table',
			h('thead', h('tr', ['Name', 'Snapshot', 'Created', 'Size', 'Memory', 'Image', ''].map((t) => h('th', t)))),
			h('tbody', mine.map((s) => {
				const createBtn = h('button.snap-create', { type: 'button', on: { click: () => createFrom(s, createBtn) } }, 'Create workspace from it');
				return h('tr', { 'data-id': s.id },
					h('td.snap-name', s.name || h('span.muted', '(unnamed)')),
					h('td.mono', s.id),
					h('td', fmtTime(s.createdAt)),
					h('td', fmtBytes(s.sizeBytes)),
					h('td', s.memory ? 'yes' : 'no'),
					h('td.mono', { title: s.image || '' }, shortImage(s.image)),
					h('td.actions', createBtn,
						h('button.danger.snap-delete', { type: 'button', on: { click: () => remove(s) } }, 'Delete')));
			}))));
	}

	let lastKey = null;
	async function load() {
		let all;
		try {
			all = (await api('GET', '/v1/snapshots', undefined, { signal: ctx.signal })).snapshots || [];
		} catch (e) {
			if (e.name === 'AbortError') return;
			showError(err, e);
			replace(list, h('p.muted', 'The snapshots could not be listed.'));
			lastKey = null;
			return;
		}
		const mine = all.filter((s) => s.workspaceId === id);
		const key = JSON.stringify(mine);
		if (key === lastKey) return;
		lastKey = key;
		replace(list, table(mine));
	}

	load();
	hooks.reloadSnapshots = load;
	ctx.onClose(() => delete hooks.reloadSnapshots);
	// A snapshot made or deleted elsewhere (the CLI, a fork) comes as an event of this workspace.
	let pending = null;
	ctx.onClose(followEvents({ workspace: id }, (ev) => {
		if (pending || !(/^snapshot/.test(ev.type) || ev.type === 'gap')) return;
		pending = setTimeout(() => {
			pending = null;
			if (ctx.alive) load();
		}, 250);
	}));
	ctx.onClose(() => clearTimeout(pending));
	ctx.every(30000, load);
}

function withHint(e, hint) {
	const out = new Error((e.message || '') + hint);
	out.status = e.status;
	out.code = e.code;
	out.field = e.field;
	return out;
}
