// SPDX-License-Identifier: MIT
// The Code tab: a notebook on a code context (docs/api.md, "Code contexts"). A language picker,
// cells (a textarea, Run or Shift+Enter, Interrupt), each cell's stdout and stderr as they come
// (the execution's output stream), its results: text/plain, and text/html as text under it (the
// cell made it: never live HTML), image/png as an <img> of a data: URL, an error with its
// traceback. The context is made at the first Run and kept while the page is open; it is deleted
// when the tab is left.
import { api, enc, readEvents, b64decode } from './api.js';
import { h, replace, append, badge, showError } from './dom.js';

// Terminal colours of a traceback (IPython's), which a page shows as text.
const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]/g;

function statusKey(status) {
	return { ok: 'exited-0', error: 'exited-bad', timed_out: 'timed_out', interrupted: 'cancelled' }[status] || status;
}

// One result's output: an image, or the text of its text/plain (else text/html, as text).
function resultView(r) {
	const d = r.data || {};
	if (typeof d['image/png'] === 'string') {
		return h('img.cell-image', { src: 'data:image/png;base64,' + d['image/png'].replace(/\s+/g, ''), alt: d['text/plain'] || 'image/png result' });
	}
	const text = typeof d['text/plain'] === 'string' ? d['text/plain'] : null;
	const html = typeof d['text/html'] === 'string' ? d['text/html'] : null;
	if (text === null && html === null) return h('div.cell-note', `a result of ${Object.keys(d).join(', ') || 'no type'} (not shown)`);
	// An HTML display's text/plain is often only its repr ("<IPython.core.display.HTML
	// object>"): its markup is shown too, as text (open when the text says nothing more).
	const bare = text === null || /^<[\w.]+ object>$/.test(text);
	return [text !== null && h('pre.cell-result', { 'data-type': r.type }, text),
		html !== null && h('details.cell-html', { open: bare }, h('summary', 'text/html (shown as text)'), h('pre', html))];
}

function errorView(e) {
	const lines = (e.traceback && e.traceback.length ? e.traceback : [`${e.name}: ${e.value}`]).map((l) => String(l).replace(ANSI, ''));
	return h('pre.cell-error', lines.join('\n'));
}

export function codeTab(root, ctx, wsPath) {
	let context = null; // {id, language}
	let running = null; // {cell, eid}
	const lang = h('select#code-lang', { 'aria-label': 'Language' },
		h('option', { value: 'python' }, 'Python'), h('option', { value: 'javascript' }, 'JavaScript'));
	const state = h('span#code-context', 'no context yet: the first Run starts one');
	const cells = h('div#code-cells');
	replace(root,
		h('div.code-bar', h('label', 'Language ', lang), ' ', state,
			h('button#code-restart', { type: 'button', on: { click: restart } }, 'Restart'),
			h('button#code-add', { type: 'button', on: { click: () => addCell().querySelector('textarea').focus() } }, 'Add cell')),
		cells);
	lang.addEventListener('change', () => {
		dropContext();
		replace(state, 'no context yet: the first Run starts one');
	});
	ctx.onClose(dropContext);

	function dropContext() {
		if (context) api('DELETE', wsPath + '/contexts/' + enc(context.id)).catch(() => {});
		context = null;
	}

	async function ensureContext() {
		if (context && context.language === lang.value) return context;
		replace(state, `starting a ${lang.value} interpreter…`);
		const c = await api('POST', wsPath + '/contexts', { language: lang.value }, { signal: ctx.signal });
		context = { id: c.id, language: c.language };
		replace(state, 'context ', h('code', c.id), ' ', badge(c.state, c.state));
		return context;
	}

	async function restart() {
		if (!context) return;
		try {
			const c = await api('POST', wsPath + '/contexts/' + enc(context.id) + '/restart', undefined, { signal: ctx.signal });
			replace(state, 'context ', h('code', c.id), ' ', badge(c.state, c.state), ' (restarted: variables gone)');
		} catch (e) {
			showError(state, e);
		}
	}

	function addCell() {
		const input = h('textarea.cell-input', { rows: 4, spellcheck: 'false', placeholder: 'code (Shift+Enter runs it)' });
		const out = h('div.cell-output');
		const status = h('span.cell-status');
		const run = h('button.cell-run', { type: 'button' }, 'Run');
		const stop = h('button.cell-interrupt', { type: 'button', disabled: true }, 'Interrupt');
		const cell = h('div.cell', h('div.cell-head', run, stop, status), input, out);
		run.addEventListener('click', () => runCell(cell));
		stop.addEventListener('click', () => interrupt());
		input.addEventListener('keydown', (ev) => {
			if (ev.key === 'Enter' && ev.shiftKey) {
				ev.preventDefault();
				runCell(cell);
			}
		});
		cell.parts = { input, out, status, run, stop };
		cells.append(cell);
		return cell;
	}

	async function interrupt() {
		if (!running || !context) return;
		try {
			await api('POST', wsPath + '/contexts/' + enc(context.id) + '/interrupt', undefined, { signal: ctx.signal, okStatuses: [409] });
		} catch (e) {
			showError(running.cell.parts.status, e);
		}
	}

	async function runCell(cell) {
		const p = cell.parts;
		if (running) return;
		running = { cell };
		p.run.disabled = true;
		p.stop.disabled = false;
		replace(p.out);
		replace(p.status, badge('running', 'running'));
		const streams = { stdout: h('pre.cell-stdout'), stderr: h('pre.cell-stderr') };
		const dec = { stdout: new TextDecoder(), stderr: new TextDecoder() };
		append(p.out, streams.stdout, streams.stderr);
		try {
			const c = await ensureContext();
			let e = await api('POST', wsPath + '/contexts/' + enc(c.id) + '/execute', { code: p.input.value }, { signal: ctx.signal });
			running.eid = e.id;
			const base = wsPath + '/contexts/' + enc(c.id) + '/executions/' + enc(e.id);
			await readEvents(base + '/output', (name, data) => {
				if (name !== 'output') return;
				const o = JSON.parse(data);
				append(streams[o.stream], dec[o.stream].decode(b64decode(o.data), { stream: true }));
			}, ctx.signal);
			while (e.status === 'running') e = await api('GET', base + '?waitMs=30000', undefined, { signal: ctx.signal });
			showEnded(cell, e, streams);
		} catch (err) {
			if (err.name !== 'AbortError') showError(p.status, err);
		} finally {
			running = null;
			p.run.disabled = false;
			p.stop.disabled = true;
		}
		if (cell === cells.lastElementChild) addCell();
	}

	function showEnded(cell, e, streams) {
		const p = cell.parts;
		// What the stream missed (a follow that began late) is in the recorded execution.
		if (!streams.stdout.textContent && e.stdout && e.encoding !== 'base64') append(streams.stdout, e.stdout);
		if (!streams.stderr.textContent && e.stderr && e.encoding !== 'base64') append(streams.stderr, e.stderr);
		for (const s of Object.values(streams)) if (!s.textContent) s.remove();
		for (const r of e.results || []) append(p.out, resultView(r));
		if (e.error) append(p.out, errorView(e.error));
		replace(p.status, badge(e.status, statusKey(e.status)), e.executionCount ? ` [${e.executionCount}]` : '',
			e.durationMs !== undefined && e.durationMs !== null ? ` ${e.durationMs} ms` : '');
		cell.dataset.status = e.status;
	}

	addCell();
}
