// SPDX-License-Identifier: MIT
// Commands: run one, follow its output live over the output WebSocket, the history.
import { api, enc, openSocket, liveRefresh } from './api.js';
import { h, replace, append, badge, fmtTime, fmtMs, fmtBytes, field, showError, outputText, secondsToMs, reveal } from './dom.js';
import { logViewer } from './logview.js';
import { usageCell } from './usage.js';
import { showRefusal } from './snapshots.js';

const TERMINAL = ['exited', 'killed', 'timed_out', 'cancelled', 'failed_to_start', 'lost'];

function statusKey(run) {
	if (run.status === 'exited') return run.exitCode === 0 ? 'exited-0' : 'exited-bad';
	return run.status;
}

// How long a running run has run, from its start to now.
function elapsedText(run) {
	const t = Date.parse(run.startedAt || run.createdAt);
	return isNaN(t) ? '—' : fmtMs(Math.max(0, Math.floor((Date.now() - t) / 1000) * 1000));
}

// A clock element for a running run; tick() updates every such element on the page.
function elapsedCell(run, tag = 'span.elapsed') {
	return h(tag, { 'data-elapsed-since': run.startedAt || run.createdAt }, elapsedText(run));
}

function tickElapsed() {
	for (const el of document.querySelectorAll('[data-elapsed-since]')) {
		replace(el, elapsedText({ startedAt: el.dataset.elapsedSince }));
	}
}

// A refused destination as the CLI prints it: a name asked (DNS), or address:port/proto.
export function refusedDest(d) {
	if (d.name) return `${d.name} (DNS)`;
	return d.port ? `${d.address}:${d.port}/${d.proto}` : `${d.address}/${d.proto}`;
}

// What the workspace's network refused while the run ran (runs on a workspace with a network).
function deniedText(run) {
	const n = run.network;
	if (!n) return '—';
	if (!n.denied) return '0';
	return n.lastDenied ? `${n.denied}, the last ${refusedDest(n.lastDenied)}` : String(n.denied);
}

// The facts of a finished (or running) run, as a definition list.
export function runFacts(run) {
	const running = run.status === 'running';
	return h('dl.kv.facts',
		h('dt', 'Status'), h('dd', badge(run.status, statusKey(run))),
		h('dt', 'Exit code'), h('dd#run-exit', run.exitCode ?? '—'),
		run.signal !== null && run.signal !== undefined ? [h('dt', 'Signal'), h('dd', String(run.signal) + (run.oomKilled ? ' (OOM killed)' : ''))] : null,
		run.reason ? [h('dt', 'Reason'), h('dd', run.reason)] : null,
		running ? [h('dt', 'Elapsed'), elapsedCell(run, 'dd#run-elapsed')] : [h('dt', 'Duration'), h('dd', fmtMs(run.durationMs))],
		running ? [h('dt', 'Using now'), usageCell('run:' + run.id, 'dd#run-usage')] : [
			h('dt', 'CPU'), h('dd', fmtMs(run.cpuMs)),
			h('dt', 'Peak memory'), h('dd', fmtBytes(run.peakMemoryBytes))],
		run.network ? [h('dt', 'Network refused'), h('dd#run-denied', { class: run.network.denied ? 'denied' : '' }, deniedText(run))] : null,
		h('dt', 'Output'), h('dd#run-bytes', `stdout ${fmtBytes(run.stdoutBytes)}, stderr ${fmtBytes(run.stderrBytes)}${run.truncated ? ' (truncated: head and tail kept)' : ''}`),
		h('dt', 'Started'), h('dd', fmtTime(run.startedAt || run.createdAt)));
}

// hooks.resume(): the workspace page's resume, offered when a run is refused as paused.
export function commandsTab(root, ctx, wsPath, hooks = {}) {
	const command = h('textarea#cmd', { rows: 2, placeholder: 'echo hello  (Ctrl+Enter runs)', spellcheck: 'false', required: true });
	const cwd = h('input#cmd-cwd', { type: 'text', placeholder: 'workspace directory', spellcheck: 'false' });
	const timeout = h('input#cmd-timeout', { type: 'number', min: 0.001, max: 86400, step: 'any', placeholder: 'worker default' });
	const stdin = h('input#cmd-stdin', { type: 'text', placeholder: 'none', spellcheck: 'false' });
	const ferr = h('div.error#cmd-error', { hidden: true, role: 'alert' });
	const runBtn = h('button.primary#run', { type: 'submit' }, 'Run');
	const form = h('form.card#cmd-form', { novalidate: true, on: { submit: (ev) => { ev.preventDefault(); start(); } } },
		h('h2', 'Run a command'),
		field('Command (/bin/sh -c)', command),
		h('div.row', field('Working directory', cwd), field('Timeout (s)', timeout), field('stdin', stdin)),
		ferr,
		h('div.actions', runBtn));
	command.addEventListener('keydown', (ev) => {
		if (ev.key === 'Enter' && (ev.ctrlKey || ev.metaKey)) {
			ev.preventDefault();
			start();
		}
	});
	const detail = h('section.card#run-detail', { hidden: true });
	const herr = h('div.error', { hidden: true, role: 'alert' });
	const history = h('div#history', h('p.muted', 'Loading…'));
	replace(root, form, detail,
		h('section.card', h('div.card-head', h('h2', 'History'),
			h('button#history-refresh', { type: 'button', on: { click: () => loadHistory() } }, 'Refresh')), herr, history));

	let selected = null; // run id shown in detail
	let socket = null;
	const closeSocket = () => {
		if (socket) {
			socket.onclose = socket.onmessage = socket.onerror = null;
			try { socket.close(1000); } catch {}
			socket = null;
		}
	};
	ctx.onClose(closeSocket);

	async function start() {
		const body = { command: command.value };
		if (!body.command.trim()) return;
		if (cwd.value.trim()) body.cwd = cwd.value.trim();
		if (timeout.value !== '') {
			const ms = secondsToMs(timeout.value);
			if (ms === null || ms < 1 || ms > 86400000) {
				showError(ferr, new Error(`Timeout: "${timeout.value}" is not a number of seconds from 0.001 to 86400.`));
				timeout.focus();
				return;
			}
			body.timeoutMs = ms;
		}
		if (stdin.value !== '') body.stdin = stdin.value;
		runBtn.disabled = true;
		try {
			const run = await api('POST', wsPath + '/commands', body);
			showError(ferr, null);
			show(run, true);
			loadHistory();
		} catch (e) {
			showRefusal(ferr, e, hooks.resume);
		} finally {
			runBtn.disabled = false;
		}
	}

	// Shows a run: live when running, its stored output when finished. reveal: scrolled into
	// view (below the form and the usage, it would start out of sight).
	function show(run, reveal) {
		closeSocket();
		selected = run.id;
		detail.hidden = false;
		if (TERMINAL.includes(run.status) && run.stdout !== undefined) renderFinished(run);
		else if (TERMINAL.includes(run.status)) fetchAndRender(run.id, reveal);
		else follow(run);
		if (reveal) revealOutput();
	}

	function revealOutput() {
		reveal(detail, detail.querySelector('.logview'));
	}

	function header(run, extra) {
		return h('div.card-head',
			h('h2', 'Run ', h('span.mono', run.id)),
			h('div.actions', extra));
	}

	async function fetchAndRender(id, reveal) {
		try {
			const run = await api('GET', wsPath + '/commands/' + enc(id), undefined, { signal: ctx.signal });
			if (selected !== id) return;
			renderFinished(run);
			if (reveal) revealOutput();
		} catch (e) {
			if (e.name !== 'AbortError') replace(detail, h('div.error', e.message));
		}
	}

	function renderFinished(run) {
		const view = logViewer({ id: 'run-stored', name: 'run-' + run.id });
		for (const stream of ['stdout', 'stderr']) {
			const head = outputText(run, stream), tail = outputText(run, stream + 'Tail');
			view.write(stream, head);
			if (tail) {
				const kept = new TextEncoder().encode(head).length + new TextEncoder().encode(tail).length;
				view.note(`\n… ${fmtBytes((run[stream + 'Bytes'] ?? 0) - kept)} of ${stream} not kept …\n`);
				view.write(stream, tail);
			}
		}
		replace(detail,
			header(run, null),
			h('pre.cmdline', '$ ' + run.command),
			h('div#run-status', { 'data-status': run.status }, runFacts(run)),
			h('h3', 'Output'), view.el);
	}

	function follow(run) {
		const view = logViewer({ id: 'run-output', name: 'run-' + run.id });
		const out = view.pre;
		const facts = h('div#run-status', { 'data-status': run.status }, runFacts(run));
		const state = h('span.muted', 'connecting…');
		const cancel = h('button.danger#cancel', {
			type: 'button',
			on: {
				click: async () => {
					cancel.disabled = true;
					try {
						const r = await api('POST', wsPath + '/commands/' + enc(run.id) + '/cancel');
						replace(facts, runFacts(r));
						facts.dataset.status = r.status;
					} catch (e) {
						view.note(`\n[cancel: ${e.message}]\n`);
					}
				},
			},
		}, 'Cancel');
		replace(detail, header(run, [state, ' ', cancel]), h('pre.cmdline', '$ ' + run.command), facts, h('h3', 'Output'), view.el);
		const decoders = { 1: new TextDecoder(), 2: new TextDecoder() };
		// The byte counts so far, from where each chunk ends in its stream (a gap's end too).
		const written = { 1: run.stdoutBytes ?? 0, 2: run.stderrBytes ?? 0 };
		const counted = (stream, end) => {
			if (end <= written[stream]) return;
			written[stream] = end;
			const el = facts.querySelector('#run-bytes');
			if (el) replace(el, `stdout ${fmtBytes(written[1])}, stderr ${fmtBytes(written[2])} so far`);
		};
		const ws = (socket = openSocket(wsPath + '/commands/' + enc(run.id) + '/output'));
		let ended = false;
		ws.onopen = () => replace(state, 'live');
		ws.onmessage = (m) => {
			if (typeof m.data === 'string') {
				let msg;
				try { msg = JSON.parse(m.data); } catch { return; }
				if (msg.type === 'gap') {
					view.note(`\n[${fmtBytes(msg.bytes)} of ${msg.stream} not shown]\n`);
					if (typeof msg.offset === 'number') counted(msg.stream === 'stderr' ? 2 : 1, msg.offset + msg.bytes);
				} else if (msg.type === 'end') {
					ended = true;
					for (const [s, d] of Object.entries(decoders)) {
						const rest = d.decode();
						if (rest) view.write(s === '2' ? 'stderr' : 'stdout', rest);
					}
					replace(facts, runFacts(msg.run));
					facts.dataset.status = msg.run.status;
					replace(state, 'finished');
					cancel.remove();
					loadHistory();
				} else if (msg.type === 'error') {
					view.note(`\n[${msg.error?.message || 'error'}]\n`);
				}
				return;
			}
			const b = new Uint8Array(m.data);
			if (b.length < 9) return;
			const stream = b[0];
			if (stream === 1 || stream === 2) counted(stream, Number(new DataView(b.buffer, b.byteOffset, 9).getBigUint64(1)) + b.length - 9);
			const text = (decoders[stream] || decoders[1]).decode(b.subarray(9), { stream: true });
			view.write(stream === 2 ? 'stderr' : 'stdout', text);
		};
		ws.onclose = (ev) => {
			if (socket === ws) socket = null;
			if (ended) return;
			replace(state, `live output closed (${ev.code}); waiting for the result…`);
			waitFinal(run.id, facts, state, cancel);
		};
	}

	// Without the socket: long-poll the run until it is terminal.
	async function waitFinal(id, facts, state, cancel) {
		while (ctx.alive && selected === id) {
			try {
				const r = await api('GET', wsPath + '/commands/' + enc(id) + '?waitMs=30000', undefined, { signal: ctx.signal });
				if (TERMINAL.includes(r.status)) {
					if (selected === id) renderFinished(r);
					loadHistory();
					return;
				}
			} catch (e) {
				if (e.name === 'AbortError') return;
				replace(state, e.message);
				return;
			}
		}
	}

	async function loadHistory() {
		let runs;
		try {
			runs = (await api('GET', wsPath + '/commands?limit=50', undefined, { signal: ctx.signal })).commands || [];
			showError(herr, null);
		} catch (e) {
			if (e.name !== 'AbortError') showError(herr, e);
			return;
		}
		if (!runs.length) {
			replace(history, h('p.muted', 'No commands yet.'));
			return;
		}
		replace(history, h('div.table-scroll', h('table.list#history-table',
			h('thead', h('tr', ['Command', 'Status', 'Exit', 'Started', 'Duration', 'CPU', 'Refused', ''].map((t) => h('th', t)))),
			h('tbody', runs.map((r) => h('tr', { 'data-id': r.id, class: r.id === selected ? 'selected' : '' },
				h('td.mono.cmd', { title: r.command }, r.command.length > 80 ? r.command.slice(0, 80) + '…' : r.command),
				h('td', badge(r.status, statusKey(r))),
				h('td', r.exitCode ?? (r.signal ? 'sig ' + r.signal : '—')),
				h('td', fmtTime(r.startedAt || r.createdAt)),
				r.status === 'running' ? elapsedCell(r, 'td') : h('td', fmtMs(r.durationMs)),
				r.status === 'running' ? usageCell('run:' + r.id, 'td') : h('td', fmtMs(r.cpuMs)),
				h('td.refused-count', { title: deniedText(r), class: r.network?.denied ? 'denied' : '' }, r.network ? String(r.network.denied) : '—'),
				h('td.actions',
					h('button', { type: 'button', on: { click: () => show(r, true) } }, 'Output'),
					r.status === 'running' ? h('button.danger', {
						type: 'button',
						on: {
							click: async () => {
								try {
									await api('POST', wsPath + '/commands/' + enc(r.id) + '/cancel');
								} catch (e) {
									showError(herr, e);
								}
								loadHistory();
							},
						},
					}, 'Cancel') : null)))))));
	}

	loadHistory();
	// Runs starting and ending come as events; a slow poll besides.
	liveRefresh(ctx, { workspace: decodeURIComponent(wsPath.split('/')[3]), types: 'run' }, loadHistory);
	ctx.every(1000, tickElapsed);
}
