// SPDX-License-Identifier: MIT
// Files: the workspace's tree (each directory listed when it is opened), an editor for text
// files (CodeMirror when the build bundled it, else a textarea), save with conflict detection
// (If-Match of the etag the file was opened with), upload, download, new file and folder,
// rename, delete, and live refresh from the watch stream. The agent inside the sandbox does
// every file operation; names, link targets and contents come from the sandbox and only ever
// go into the page as text.
import { api, enc, getToken, readEvents, ApiError, routed } from './api.js';
import { h, replace, append, fmtBytes, fmtTime, showError } from './dom.js';

const EDIT_MAX = 2 * 1024 * 1024; // larger files are offered for download, not edited
const BINARY_SNIFF = 8192; // a NUL byte in this many leading bytes: binary

// Control characters and bidirectional overrides in a name are shown escaped, so a file cannot
// pose as another in the tree or a confirmation.
export function shown(name) {
	return String(name).replace(/[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]/g,
		(c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

function sameTag(a, b) {
	const strong = (t) => String(t ?? '').replace(/^W\//, '');
	return !!a && strong(a) === strong(b);
}

function parentOf(p) {
	const i = p.lastIndexOf('/');
	return i <= 0 ? '/' : p.slice(0, i);
}

function baseName(p) {
	return p.slice(p.lastIndexOf('/') + 1);
}

function join(dir, name) {
	return dir === '/' ? '/' + name : dir + '/' + name;
}

function within(p, dir) {
	return p === dir || p.startsWith(dir === '/' ? '/' : dir + '/');
}

async function errorOf(status, statusText, body) {
	let code = null, message = `HTTP ${status} ${statusText}`, field = null;
	try {
		const j = JSON.parse(body);
		if (j && j.error) {
			code = j.error.code ?? null;
			message = j.error.message || message;
			field = j.error.field ?? null;
		}
	} catch {}
	return new ApiError(status, code, message, field);
}

// fetch with the token; a response that is not 2xx is thrown as the API's error.
async function request(method, url, { body, headers = {}, signal } = {}) {
	const hd = { ...headers };
	const t = getToken();
	if (t) hd.Authorization = 'Bearer ' + t;
	let res;
	try {
		res = await fetch(routed(url), { method, headers: hd, body, signal, cache: 'no-store' });
	} catch (e) {
		if (e.name === 'AbortError') throw e;
		throw new ApiError(0, 'network', `cannot reach the controller: ${e.message}`);
	}
	if (!res.ok) throw await errorOf(res.status, res.statusText, await res.text().catch(() => ''));
	return res;
}

// A streamed PUT of a File (the browser reads it from disk as it sends); onProgress(sent, total).
function upload(url, file, onProgress, signal) {
	return new Promise((resolve, reject) => {
		const x = new XMLHttpRequest();
		x.open('PUT', routed(url));
		const t = getToken();
		if (t) x.setRequestHeader('Authorization', 'Bearer ' + t);
		x.setRequestHeader('Content-Type', 'application/octet-stream');
		x.upload.onprogress = (e) => onProgress(e.loaded, e.total);
		x.onload = async () => {
			if (x.status >= 200 && x.status < 300) {
				try {
					resolve(JSON.parse(x.responseText));
				} catch {
					resolve(null);
				}
			} else reject(await errorOf(x.status, x.statusText, x.responseText));
		};
		x.onerror = () => reject(new ApiError(0, 'network', 'cannot reach the controller: the upload failed'));
		x.onabort = () => reject(new DOMException('aborted', 'AbortError'));
		signal?.addEventListener('abort', () => x.abort(), { once: true });
		x.send(file);
	});
}

let cmModule; // a promise: the CodeMirror bundle, or null when the build has none
function loadCodeMirror() {
	if (!cmModule) cmModule = import('./vendor/codemirror.mjs').catch(() => null);
	return cmModule;
}

// The line break a text keeps when edited: CRLF when every line ends so, else LF (a lone CR
// stays a character of its line). Either way the bytes saved are the bytes opened.
function lineBreakOf(text) {
	const crlf = (text.match(/\r\n/g) || []).length;
	return crlf > 0 && crlf === (text.match(/\n/g) || []).length && crlf === (text.match(/\r/g) || []).length ? '\r\n' : '\n';
}

// The fallback editor: a textarea. Its value normalises line breaks to LF, so a CRLF text is
// turned back on save, and a text with other carriage returns is shown read-only.
function textareaEditor(parent, { doc, onChange, onSave }) {
	const ta = h('textarea#files-text', { spellcheck: 'false', wrap: 'off', autocomplete: 'off' });
	const note = h('p.muted#files-readonly', { hidden: true }, 'This file has carriage returns the plain editor cannot keep: it is shown read-only. Download it to edit it.');
	const ed = {
		language: null,
		readOnly: false,
		crlf: false,
		text: () => (ed.crlf ? ta.value.replace(/\n/g, '\r\n') : ta.value),
		setText(t) {
			ed.crlf = lineBreakOf(t) === '\r\n';
			ed.readOnly = ta.readOnly = !ed.crlf && t.includes('\r');
			note.hidden = !ed.readOnly;
			ta.value = ed.crlf ? t.replace(/\r\n/g, '\n') : t;
		},
		focus: () => ta.focus(),
		destroy: () => ta.remove(),
	};
	ed.setText(doc);
	ta.addEventListener('input', () => onChange());
	ta.addEventListener('keydown', (e) => {
		if (e.key === 's' && (e.ctrlKey || e.metaKey)) {
			e.preventDefault();
			onSave();
		}
	});
	replace(parent, note, ta);
	return ed;
}

// <dialog>: a title, text, an optional input, buttons [value, label, cls]. Resolves to
// {value, input}; Escape or closing is 'cancel'.
function ask(host, { title, body, input, buttons }) {
	return new Promise((resolve) => {
		const field = input ? h('input#files-dialog-input', { type: 'text', spellcheck: 'false', autocomplete: 'off', value: input.value ?? '' }) : null;
		const dlg = h('dialog.files-dialog#files-dialog', { 'aria-labelledby': 'files-dialog-title' },
			h('form', { method: 'dialog' },
				h('h2#files-dialog-title', title),
				body ? h('div.files-dialog-body', body) : null,
				field ? h('label.field', h('span.label', input.label), field) : null,
				h('div.actions', buttons.map(([value, label, cls]) =>
					h('button', { type: 'submit', value, class: cls || '' }, label)),
				h('button', { type: 'submit', value: 'cancel' }, 'Cancel'))));
		dlg.addEventListener('close', () => {
			dlg.remove();
			resolve({ value: dlg.returnValue || 'cancel', input: field ? field.value : null });
		});
		host.append(dlg);
		dlg.showModal();
		if (field) {
			field.focus();
			const dot = field.value.lastIndexOf('.');
			field.setSelectionRange(0, dot > 0 ? dot : field.value.length);
			// Enter in the field submits with the first button, not Cancel.
			field.addEventListener('keydown', (e) => {
				if (e.key === 'Enter') {
					e.preventDefault();
					dlg.close(buttons[0][0]);
				}
			});
		}
	});
}

export function filesTab(root, ctx, wsPath) {
	const err = h('div.error#files-error', { hidden: true, role: 'alert' });
	const watchState = h('span.badge#files-watch', { 'data-state': 'connecting' }, 'connecting');
	const target = h('span.mono#files-target');
	const uploadInput = h('input#files-upload-input', { type: 'file', multiple: true, hidden: true });
	const progress = h('div.files-progress#files-progress', { hidden: true });
	const btn = (id, label, fn, cls) => h('button#' + id, { type: 'button', class: cls || '', on: { click: fn } }, label);
	const renameBtn = btn('files-rename', 'Rename', () => renameSelected());
	const deleteBtn = btn('files-delete', 'Delete', () => deleteSelected(), 'danger');
	const downloadBtn = btn('files-download', 'Download', () => download(selected));
	const tree = h('ul.files-tree#files-tree', { role: 'tree' });
	const pane = h('section.card.files-pane#files-pane', h('p.muted', 'Choose a file in the tree.'));
	const treeCard = h('section.card.files-side',
		h('div.card-head', h('h2', 'Files'), watchState),
		h('div.files-toolbar',
			btn('files-new-file', 'New file', () => create('file')),
			btn('files-new-folder', 'New folder', () => create('dir')),
			btn('files-upload', 'Upload', () => uploadInput.click()),
			btn('files-refresh', 'Refresh', () => (home ? refreshAll() : start()))),
		h('div.files-toolbar', renameBtn, deleteBtn, downloadBtn),
		h('p.files-where.muted', 'In ', target, ' · drop files here to upload'),
		progress,
		h('div.files-tree-box', tree));
	replace(root, err, h('div.files-layout#files', treeCard, pane), uploadInput);

	let home = null; // the tree's root: the workspace directory
	const nodes = new Map(); // path → {entry, li, row, group, expanded, loaded}
	let selected = null; // the selected path
	let open = null; // the file in the editor: {path, etag, editor, dirty, saving, notice}

	// ---- the tree ----

	// A path as shown: relative to the workspace directory when beneath it.
	function nice(p) {
		if (!home || p === home) return p;
		return within(p, home) ? p.slice(home === '/' ? 1 : home.length + 1) : p;
	}

	function typeOf(path) {
		return nodes.get(path)?.entry.type ?? null;
	}

	// The directory new files, folders and uploads go into: the selected one, or the selected
	// file's.
	function targetDir() {
		if (!selected) return home;
		const n = nodes.get(selected);
		return n && (n.entry.type === 'dir' || n.isDir) ? selected : parentOf(selected);
	}

	function updateToolbar() {
		replace(target, targetDir() ? shown(nice(targetDir())) : '…');
		const n = selected ? nodes.get(selected) : null;
		const isRoot = !selected || selected === home;
		renameBtn.disabled = isRoot;
		deleteBtn.disabled = isRoot;
		downloadBtn.disabled = !n || n.isDir || (n.entry.type !== 'file' && n.entry.type !== 'symlink');
	}

	function select(path) {
		selected = path;
		for (const n of nodes.values()) n.row.classList.toggle('selected', n.entry.path === path);
		updateToolbar();
	}

	function label(e) {
		const icon = e.type === 'dir' ? '▸' : e.type === 'symlink' ? '↪' : e.type === 'file' ? '' : '◦';
		return [
			h('span.files-twisty', { 'aria-hidden': 'true' }, icon),
			h('span.files-name', shown(e.name)),
			e.type === 'symlink' ? h('span.files-link.muted', ' → ' + shown(e.linkTarget ?? '?')) : null,
			e.type === 'file' ? h('span.files-size.muted', fmtBytes(e.size)) : null,
			!['file', 'dir', 'symlink'].includes(e.type) ? h('span.files-size.muted', e.type) : null,
		];
	}

	function makeNode(e) {
		const row = h('button.files-row', { type: 'button', title: shown(e.path) });
		const li = h('li', { role: 'treeitem', 'data-path': e.path, 'data-type': e.type }, row);
		const n = { entry: e, li, row, group: null, expanded: false, loaded: false, isDir: e.type === 'dir' };
		replace(row, label(e));
		row.addEventListener('click', () => activate(n));
		nodes.set(e.path, n);
		return n;
	}

	function setExpanded(n, on) {
		n.expanded = on;
		n.li.setAttribute('aria-expanded', String(on));
		const tw = n.row.querySelector('.files-twisty');
		if (tw && n.isDir) tw.textContent = on ? '▾' : '▸';
		if (n.group) n.group.hidden = !on;
	}

	async function activate(n) {
		select(n.entry.path);
		if (n.isDir) {
			if (n.expanded && n.entry.path !== home) setExpanded(n, false);
			else await expand(n);
		} else if (n.entry.type === 'symlink') {
			// A link to a directory opens as one; to anything else, as a file.
			if (await expand(n, true)) return;
			openFile(n.entry.path);
		} else if (n.entry.type === 'file') {
			openFile(n.entry.path);
		} else {
			showError(err, new Error(`${shown(nice(n.entry.path))} is a ${n.entry.type}: only regular files open here`));
		}
	}

	// Lists the directory n and shows it; quietNotDir: a link that is not a directory is no error.
	async function expand(n, quietNotDir = false) {
		const path = n.entry.path;
		let list;
		try {
			list = await api('GET', wsPath + '/files/list?path=' + enc(path), undefined, { signal: ctx.signal });
		} catch (e) {
			if (e.name === 'AbortError') return false;
			if (quietNotDir && e.status === 400) return false;
			showError(err, e);
			return false;
		}
		if (!nodes.has(path) || nodes.get(path) !== n) return false;
		n.isDir = true;
		n.loaded = true;
		if (!n.group) n.group = h('ul', { role: 'group' });
		if (!n.group.parentNode) n.li.append(n.group);
		const keep = new Set();
		// The agent answers from inside the sandbox: a child's path is made here from its
		// directory and name, and a name that is no single path component is left out.
		const entries = (Array.isArray(list.entries) ? list.entries : [])
			.filter((e) => e && typeof e.name === 'string' && e.name !== '' && e.name !== '.' && e.name !== '..' && !/[/\0]/.test(e.name))
			.map((e) => ({ ...e, path: join(path, e.name) }))
			.sort((a, b) => (b.type === 'dir') - (a.type === 'dir') || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
		const items = entries.map((e) => {
			keep.add(e.path);
			let c = nodes.get(e.path);
			if (c && c.entry.type !== e.type) {
				forget(e.path);
				c = null;
			}
			if (!c) c = makeNode(e);
			else {
				c.entry = e;
				replace(c.row, label(e));
				if (c.isDir) setExpanded(c, c.expanded);
			}
			return c.li;
		});
		for (const p of [...nodes.keys()]) {
			if (p !== path && parentOf(p) === path && !keep.has(p)) forget(p);
		}
		replace(n.group, items, list.truncated ? h('li.muted.files-more', `only the first ${entries.length} entries are listed`) : null,
			entries.length === 0 ? h('li.muted.files-more', 'empty') : null);
		for (const c of nodes.values()) if (c.entry.path === selected) c.row.classList.add('selected');
		setExpanded(n, true);
		updateToolbar();
		return true;
	}

	// Drops path and everything under it from the tree.
	function forget(path) {
		for (const p of [...nodes.keys()]) {
			if (within(p, path)) {
				nodes.get(p).li.remove();
				nodes.delete(p);
			}
		}
		if (selected && within(selected, path)) select(nodes.has(parentOf(path)) ? parentOf(path) : home);
	}

	// Lists again every directory shown (open ones only; closed ones when they open).
	async function refreshAll() {
		for (const n of [...nodes.values()]) {
			if (n.isDir && n.loaded && (n.expanded || n.entry.path === home) && nodes.get(n.entry.path) === n) await expand(n);
		}
		checkOpen();
	}

	async function relist(dir) {
		const n = nodes.get(dir);
		if (n && n.loaded && n.expanded) await expand(n);
		else if (n && n.loaded) n.loaded = false; // listed again when it opens
	}

	// The tree's root: the workspace's working directory as the sandbox names it (the
	// workspace's workdir; relative paths resolve against it).
	async function start() {
		let dir = null;
		try {
			dir = (await api('GET', wsPath, undefined, { signal: ctx.signal })).workdir;
		} catch (e) {
			if (e.name !== 'AbortError') showError(err, e);
			return;
		}
		if (typeof dir !== 'string' || !dir.startsWith('/')) {
			showError(err, new Error('the workspace has no working directory'));
			return;
		}
		dir = dir.replace(/(.)\/+$/, '$1');
		home = dir;
		const n = makeNode({ name: dir, path: dir, type: 'dir' });
		replace(n.row, label({ name: baseName(dir) || '/', path: dir, type: 'dir' }));
		n.row.classList.add('files-root');
		replace(tree, n.li);
		select(home);
		if (await expand(n)) showError(err, null);
		watch();
	}

	// ---- the editor ----

	function setState(state, text) {
		const el = pane.querySelector('#files-state');
		if (!el) return;
		el.dataset.state = state;
		el.textContent = text;
	}

	function dirtyChanged() {
		if (!open) return;
		if (open.dirty) setState('modified', 'modified');
		else if (open.savedAt) setState('saved', 'saved ' + fmtTime(open.savedAt));
		else setState('unchanged', 'unchanged');
	}

	function showNotice(kind, text, actions = []) {
		const el = pane.querySelector('#files-notice');
		if (!el) return;
		el.hidden = !kind;
		el.dataset.kind = kind || '';
		replace(el, text, ' ', actions);
	}

	function closeEditor() {
		if (open?.editor) open.editor.destroy();
		open = null;
		replace(pane, h('p.muted', 'Choose a file in the tree.'));
	}

	// Reads path for the editor: {text, etag} or {refusal} (binary, too large).
	async function readText(path) {
		let res;
		try {
			res = await request('GET', wsPath + '/files?path=' + enc(path) + '&maxBytes=' + EDIT_MAX, { signal: ctx.signal });
		} catch (e) {
			if (e.status === 413) return { refusal: 'is larger than 2 MiB: too large to edit here' };
			throw e;
		}
		const etag = res.headers.get('ETag');
		const bytes = new Uint8Array(await res.arrayBuffer());
		if (bytes.length > EDIT_MAX) return { refusal: 'is larger than 2 MiB: too large to edit here' };
		if (bytes.subarray(0, BINARY_SNIFF).includes(0)) return { refusal: 'is binary (it has NUL bytes)', size: bytes.length };
		let text;
		try {
			text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes);
		} catch {
			return { refusal: 'is not UTF-8 text', size: bytes.length };
		}
		return { text, etag, size: bytes.length };
	}

	async function openFile(path) {
		if (open?.path === path && open.editor) {
			open.editor.focus();
			return;
		}
		if (open?.dirty) {
			const r = await ask(root, {
				title: 'Unsaved changes',
				body: `${shown(nice(open.path))} has changes that are not saved.`,
				buttons: [['discard', 'Discard them', 'danger']],
			});
			if (r.value !== 'discard') return;
		}
		closeEditor();
		const loading = (open = { path, loading: true });
		replace(pane, h('p.muted', 'Opening ', h('span.mono', shown(nice(path))), '…'));
		let got;
		try {
			got = await readText(path);
		} catch (e) {
			if (e.name === 'AbortError' || open !== loading) return;
			open = null;
			replace(pane, h('p.muted', 'Could not open ', h('span.mono', shown(nice(path))), '.'));
			showError(err, e);
			return;
		}
		if (open !== loading) return;
		showError(err, null);
		if (got.refusal) {
			open = null;
			replace(pane,
				h('div.card-head', h('h2.mono#files-open-path', shown(nice(path)))),
				h('p#files-refusal', shown(baseName(path)), ' ', got.refusal, '. ', got.size !== undefined ? `(${fmtBytes(got.size)}) ` : ''),
				h('div.actions', h('button.primary#files-offer-download', { type: 'button', on: { click: () => download(path) } }, 'Download it')));
			return;
		}
		const box = h('div.files-editor#files-editor');
		const state = h('span.badge#files-state', { 'data-state': 'unchanged' }, 'unchanged');
		const saveBtn = h('button.primary#files-save', { type: 'button', on: { click: () => save(false) } }, 'Save');
		replace(pane,
			h('div.card-head',
				h('h2.mono#files-open-path', { title: shown(path) }, shown(nice(path))),
				h('div.actions', state, saveBtn,
					h('button#files-editor-download', { type: 'button', on: { click: () => download(open?.path ?? path) } }, 'Download'),
					h('button#files-close', { type: 'button', on: { click: () => close() } }, 'Close'))),
			h('div.files-notice#files-notice', { hidden: true, role: 'status' }),
			box);
		const o = (open = { path, etag: got.etag, editor: null, dirty: false, saving: false, savedAt: null });
		const opts = {
			doc: got.text,
			name: baseName(path),
			onChange: () => {
				if (open !== o || o.settingText) return;
				if (!o.dirty) {
					o.dirty = true;
					dirtyChanged();
				}
			},
			onSave: () => save(false),
		};
		const cm = await loadCodeMirror();
		if (open !== o) return;
		if (cm) {
			// The editor keeps the file's line breaks (see lineBreakOf).
			o.editor = cm.createEditor(box, { ...opts, lineSeparator: lineBreakOf(got.text) });
			box.dataset.renderer = 'codemirror';
		} else {
			o.editor = textareaEditor(box, opts);
			box.dataset.renderer = 'textarea';
		}
		box.dataset.language = o.editor.language ?? 'text';
		updateSaveButton(o);
		o.editor.focus();
		if (o.pendingCheck) checkOpen();
	}

	async function close() {
		if (open?.dirty) {
			const r = await ask(root, { title: 'Unsaved changes', body: `${shown(nice(open.path))} has changes that are not saved.`, buttons: [['discard', 'Discard them', 'danger']] });
			if (r.value !== 'discard') return;
		}
		closeEditor();
	}

	function updateSaveButton(o) {
		const b = pane.querySelector('#files-save');
		if (b) b.disabled = !!o.editor?.readOnly;
	}

	function setText(o, text, etag) {
		o.settingText = true;
		o.editor.setText(text, lineBreakOf(text));
		o.settingText = false;
		updateSaveButton(o);
		o.etag = etag;
		o.dirty = false;
		o.savedAt = null;
		dirtyChanged();
	}

	// Loads the file again into the open editor (what is on disk wins).
	async function reload(o) {
		let got;
		try {
			got = await readText(o.path);
		} catch (e) {
			if (e.name !== 'AbortError') showError(err, e);
			return false;
		}
		if (open !== o) return false;
		if (got.refusal) {
			showNotice('changed', `${shown(nice(o.path))} changed on disk and now ${got.refusal}.`);
			return false;
		}
		setText(o, got.text, got.etag);
		showNotice(null, '');
		return true;
	}

	async function save(force) {
		const o = open;
		if (!o || !o.editor || o.saving || o.editor.readOnly) return;
		o.saving = true;
		setState('saving', 'saving…');
		const text = o.editor.text();
		const headers = { 'Content-Type': 'application/octet-stream' };
		if (!force && o.etag) headers['If-Match'] = o.etag;
		let entry;
		try {
			entry = await (await request('PUT', wsPath + '/files?path=' + enc(o.path), { body: text, headers })).json();
		} catch (e) {
			o.saving = false;
			if (e.name === 'AbortError' || open !== o) return;
			dirtyChanged();
			if (e.status === 412) return conflict(o);
			showError(err, e);
			return;
		}
		o.saving = false;
		const n = nodes.get(o.path);
		if (n && entry?.path === o.path) {
			n.entry = entry;
			replace(n.row, label(entry));
		}
		if (open !== o) return;
		showError(err, null);
		o.etag = entry.etag;
		o.savedAt = new Date().toISOString();
		// Typed while the save ran: still modified.
		o.dirty = o.editor.text() !== text;
		showNotice(null, '');
		dirtyChanged();
		if (o.pendingCheck) checkOpen();
	}

	async function conflict(o) {
		setState('conflict', 'conflict');
		const r = await ask(root, {
			title: 'Changed since you opened it',
			body: [h('span.mono', shown(nice(o.path))), ' changed since you opened it (someone or something else wrote it, or it is gone). Reload it and lose your changes, or overwrite it with yours?'],
			buttons: [['reload', 'Reload (lose my changes)'], ['overwrite', 'Overwrite', 'danger']],
		});
		if (open !== o) return;
		if (r.value === 'reload') await reload(o);
		else if (r.value === 'overwrite') await save(true);
		else dirtyChanged();
	}

	// The open file may have changed on disk: a clean editor reloads, a modified one says so.
	let checking = false;
	async function checkOpen() {
		const o = open;
		if (!o || !o.editor) {
			if (o) o.pendingCheck = true;
			return;
		}
		if (o.saving || checking) {
			o.pendingCheck = true;
			return;
		}
		o.pendingCheck = false;
		checking = true;
		let st = null, gone = false;
		try {
			st = await api('GET', wsPath + '/files/stat?path=' + enc(o.path), undefined, { signal: ctx.signal });
		} catch (e) {
			if (e.status === 404) gone = true;
			else if (e.name !== 'AbortError') showError(err, e);
		}
		checking = false;
		if (open !== o) return;
		if (o.pendingCheck) return checkOpen();
		if (gone) {
			showNotice('deleted', `${shown(nice(o.path))} was deleted or moved away. Saving writes it again.`);
			return;
		}
		if (!st || sameTag(st.etag, o.etag)) return;
		if (!o.dirty) {
			if (await reload(o)) showNotice('reloaded', `${shown(nice(o.path))} changed on disk and was reloaded (${fmtTime(st.mtime)}).`);
			return;
		}
		showNotice('changed', `${shown(nice(o.path))} changed on disk since you opened it.`, [
			h('button#files-notice-reload', { type: 'button', on: { click: () => reload(o) } }, 'Reload (lose my changes)'),
		]);
	}

	// ---- actions ----

	async function download(path) {
		if (!path || typeOf(path) === 'dir') return;
		try {
			const res = await request('GET', wsPath + '/files?path=' + enc(path), { signal: ctx.signal });
			const url = URL.createObjectURL(await res.blob());
			const a = h('a', { href: url, download: baseName(path) || 'download', hidden: true });
			document.body.append(a);
			a.click();
			a.remove();
			setTimeout(() => URL.revokeObjectURL(url), 60000);
			showError(err, null);
		} catch (e) {
			if (e.name !== 'AbortError') showError(err, e);
		}
	}

	async function create(kind) {
		const dir = targetDir();
		if (!dir) return;
		const r = await ask(root, {
			title: kind === 'dir' ? 'New folder' : 'New file',
			body: ['In ', h('span.mono', shown(nice(dir)))],
			input: { label: 'Name', value: '' },
			buttons: [['create', 'Create', 'primary']],
		});
		if (r.value !== 'create' || !r.input) return;
		const path = join(dir, r.input);
		try {
			if (kind === 'dir') await api('POST', wsPath + '/files/mkdir', { path, parents: false });
			else await request('PUT', wsPath + '/files?path=' + enc(path) + '&exclusive=1', { body: '', headers: { 'Content-Type': 'application/octet-stream' } });
			showError(err, null);
		} catch (e) {
			showError(err, e);
			return;
		}
		await relist(dir);
		const d = nodes.get(dir);
		if (d && !d.expanded) await expand(d);
		if (nodes.has(path)) select(path);
		if (kind === 'file') openFile(path);
	}

	async function renameSelected() {
		const from = selected;
		if (!from || from === home) return;
		const r = await ask(root, {
			title: 'Rename',
			body: [h('span.mono', shown(nice(from))), h('br'), 'A name moves it within its folder; a path (absolute, or relative to the workspace directory) moves it there.'],
			input: { label: 'New name', value: baseName(from) },
			buttons: [['rename', 'Rename', 'primary']],
		});
		if (r.value !== 'rename' || !r.input || r.input === baseName(from)) return;
		const to = r.input.includes('/') ? r.input : join(parentOf(from), r.input);
		let entry;
		try {
			entry = await api('POST', wsPath + '/files/rename', { from, to, overwrite: false });
		} catch (e) {
			if (e.status !== 409) return showError(err, e);
			const again = await ask(root, {
				title: 'Replace?',
				body: [h('span.mono', shown(nice(to))), ' exists. Replace it with ', h('span.mono', shown(nice(from))), '?'],
				buttons: [['replace', 'Replace', 'danger']],
			});
			if (again.value !== 'replace') return;
			try {
				entry = await api('POST', wsPath + '/files/rename', { from, to, overwrite: true });
			} catch (e2) {
				return showError(err, e2);
			}
		}
		showError(err, null);
		const dest = entry?.path ?? to;
		if (open && within(open.path, from)) {
			open.path = dest + open.path.slice(from.length);
			const t = pane.querySelector('#files-open-path');
			if (t) {
				t.textContent = shown(nice(open.path));
				t.title = shown(open.path);
			}
		}
		forget(from);
		await relist(parentOf(from));
		if (parentOf(dest) !== parentOf(from)) await relist(parentOf(dest));
		select(nodes.has(dest) ? dest : parentOf(from));
	}

	async function deleteSelected() {
		const path = selected;
		const n = path ? nodes.get(path) : null;
		if (!n || path === home) return;
		const e = n.entry;
		let body, recursive = false;
		if (n.isDir && e.type === 'dir') {
			let list;
			try {
				list = await api('GET', wsPath + '/files/list?path=' + enc(path), undefined, { signal: ctx.signal });
			} catch (x) {
				return showError(err, x);
			}
			recursive = list.entries.length > 0;
			const names = list.entries.slice(0, 20).map((c) => shown(c.name) + (c.type === 'dir' ? '/' : ''));
			body = list.entries.length
				? ['Delete the folder ', h('span.mono', shown(nice(path))), ' and everything in it? It holds ',
					`${list.entries.length}${list.truncated ? '+' : ''} ${list.entries.length === 1 ? 'entry' : 'entries'}`,
					' (folders with all they hold):', h('ul.files-doomed#files-doomed', names.map((x) => h('li.mono', x))),
					list.entries.length > names.length ? h('p.muted', `and ${list.entries.length - names.length} more`) : null]
				: ['Delete the empty folder ', h('span.mono', shown(nice(path))), '?'];
		} else if (e.type === 'symlink') {
			body = ['Delete the symbolic link ', h('span.mono', shown(nice(path))), ' (→ ', shown(e.linkTarget ?? '?'), ')? What it points to stays.'];
		} else {
			body = ['Delete ', e.type === 'file' ? 'the file ' : `the ${e.type} `, h('span.mono', shown(nice(path))),
				e.type === 'file' ? ` (${fmtBytes(e.size)})` : '', '?'];
		}
		const r = await ask(root, { title: 'Delete', body, buttons: [['delete', 'Delete', 'danger']] });
		if (r.value !== 'delete') return;
		try {
			await api('DELETE', wsPath + '/files?path=' + enc(path) + (recursive ? '&recursive=1' : ''));
		} catch (x) {
			return showError(err, x);
		}
		showError(err, null);
		if (open && within(open.path, path)) closeEditor();
		forget(path);
		await relist(parentOf(path));
	}

	async function uploadFiles(files, dir) {
		if (!dir) return;
		for (const f of files) {
			const path = join(dir, f.name);
			const url = wsPath + '/files?path=' + enc(path);
			const show = (sent, total) => {
				progress.hidden = false;
				replace(progress, `Uploading ${shown(f.name)}: ${fmtBytes(sent)} of ${fmtBytes(total)}`);
			};
			try {
				show(0, f.size);
				try {
					await upload(url + '&exclusive=1', f, show, ctx.signal);
				} catch (e) {
					if (e.status !== 409) throw e;
					const r = await ask(root, {
						title: 'Replace?',
						body: [h('span.mono', shown(nice(path))), ' exists. Replace it with the file you upload?'],
						buttons: [['replace', 'Replace', 'danger']],
					});
					if (r.value !== 'replace') continue;
					await upload(url, f, show, ctx.signal);
				}
				showError(err, null);
			} catch (e) {
				if (e.name === 'AbortError') return;
				showError(err, e);
				break;
			} finally {
				progress.hidden = true;
			}
		}
		await relist(dir);
		const d = nodes.get(dir);
		if (d && !d.expanded) await expand(d);
		if (open && parentOf(open.path) === dir) checkOpen();
	}

	uploadInput.addEventListener('change', () => {
		const files = [...uploadInput.files];
		uploadInput.value = '';
		uploadFiles(files, targetDir());
	});

	// Drag and drop: files dropped on a folder go into it, elsewhere into the target folder.
	const hasFiles = (e) => [...(e.dataTransfer?.types || [])].includes('Files');
	for (const zone of [treeCard, pane]) {
		zone.addEventListener('dragover', (e) => {
			if (!hasFiles(e)) return;
			e.preventDefault();
			e.dataTransfer.dropEffect = 'copy';
			zone.classList.add('files-drop');
		});
		zone.addEventListener('dragleave', () => zone.classList.remove('files-drop'));
		zone.addEventListener('drop', (e) => {
			if (!hasFiles(e)) return;
			e.preventDefault();
			zone.classList.remove('files-drop');
			const items = [...(e.dataTransfer.items || [])];
			if (items.some((i) => i.webkitGetAsEntry?.()?.isDirectory)) {
				showError(err, new Error('Folders cannot be uploaded: drop files (make the folder with New folder).'));
				return;
			}
			const li = e.target.closest?.('li[data-path]');
			const n = li && tree.contains(li) ? nodes.get(li.dataset.path) : null;
			const dir = n ? (n.isDir ? n.entry.path : parentOf(n.entry.path)) : targetDir();
			uploadFiles([...e.dataTransfer.files], dir);
		});
	}

	// ---- the watch ----

	const touched = new Set(); // directories to list again
	let checkWanted = false;
	let flushTimer = null;
	function flushSoon() {
		if (flushTimer) return;
		flushTimer = setTimeout(async () => {
			flushTimer = null;
			const dirs = [...touched];
			touched.clear();
			for (const d of dirs) if (ctx.alive) await relist(d);
			if (checkWanted) {
				checkWanted = false;
				checkOpen();
			}
		}, 150);
	}
	ctx.onClose(() => clearTimeout(flushTimer));

	function onWatch(type, data) {
		let d;
		try {
			d = JSON.parse(data);
		} catch {
			return;
		}
		if (type === 'ready') {
			setWatch('live', 'live');
			return;
		}
		if (type === 'overflow') {
			for (const n of nodes.values()) if (n.isDir && n.loaded) touched.add(n.entry.path);
			checkWanted = true;
			flushSoon();
			return;
		}
		if (typeof d.path !== 'string') return;
		for (const p of [d.path, typeof d.to === 'string' ? d.to : null]) {
			if (!p) continue;
			if (nodes.has(parentOf(p))) touched.add(parentOf(p));
			if (open && (p === open.path || within(open.path, p))) checkWanted = true;
		}
		flushSoon();
	}

	function setWatch(state, text) {
		watchState.dataset.state = state;
		watchState.className = 'badge ' + (state === 'live' ? 'good' : state === 'error' ? 'bad' : 'neutral');
		watchState.title = text;
		watchState.textContent = state === 'live' ? 'live' : state;
	}

	async function watch() {
		let delay = 1000;
		while (ctx.alive) {
			setWatch('connecting', 'connecting');
			const began = Date.now();
			try {
				await readEvents(wsPath + '/files/watch?path=' + enc(home) + '&recursive=1', onWatch, ctx.signal);
				setWatch('reconnecting', 'the watch ended');
			} catch (e) {
				if (e.name === 'AbortError' || !ctx.alive) return;
				setWatch('error', e.message);
			}
			// Events were missed while it was down: list again what is shown.
			if (Date.now() - began > 30000) delay = 1000;
			await new Promise((r) => {
				const t = setTimeout(r, delay);
				ctx.signal.addEventListener('abort', () => (clearTimeout(t), r()), { once: true });
			});
			delay = Math.min(delay * 2, 15000);
			if (!ctx.alive) return;
			await refreshAll();
		}
	}

	// Leaving with unsaved changes asks first (the browser's own question).
	const beforeUnload = (e) => {
		if (open?.dirty) e.preventDefault();
	};
	window.addEventListener('beforeunload', beforeUnload);
	ctx.onClose(() => {
		window.removeEventListener('beforeunload', beforeUnload);
		open?.editor?.destroy();
	});

	start();
}
