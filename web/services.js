// SPDX-License-Identifier: MIT
// Services: start one under a restart policy, the list, one service's attempts and their
// output, live logs (server-sent events read with fetch, so the token goes in a header).
import { api, enc, readEvents, b64decode, liveRefresh } from './api.js';
import { h, replace, badge, fmtTime, fmtMs, fmtBytes, field, showError, outputBlock, secondsToMs, reveal } from './dom.js';
import { logViewer } from './logview.js';
import { usageCell } from './usage.js';

const ACTIVE = ['starting', 'running', 'backoff'];

function attemptEnd(a) {
	if (!a.endedAt) return 'running';
	let s = a.endReason || 'ended';
	if (a.exitCode !== null && a.exitCode !== undefined) s += `, exit ${a.exitCode}`;
	if (a.signal !== null && a.signal !== undefined) s += `, signal ${a.signal}`;
	return s;
}

// The attempts oldest first: the API lists the running one last (state "running", its byte
// counts so far); an older controller listed only ended ones, so the current one is added.
function attemptsOf(s) {
	const list = (s.attempts || []).map((a) => (a.state === 'running' ? { ...a, running: true, pid: a.pid ?? s.mainPid } : a));
	if (s.currentAttempt && !list.some((a) => a.number === s.currentAttempt)) {
		list.push({ number: s.currentAttempt, startedAt: s.currentAttemptStartedAt, running: true, pid: s.mainPid });
	}
	return list;
}

function bytesSoFar(a) {
	return typeof a.stdoutBytes === 'number' ? ` · out ${fmtBytes(a.stdoutBytes)}, err ${fmtBytes(a.stderrBytes)} so far` : '';
}

export function servicesTab(root, ctx, wsPath) {
	const name = h('input#svc-name', { type: 'text', required: true, pattern: '[a-z0-9][a-z0-9._\\-]{0,62}', placeholder: 'web', spellcheck: 'false' });
	const command = h('input#svc-command', { type: 'text', required: true, placeholder: 'node server.js (foreground: no &)', spellcheck: 'false' });
	const cwd = h('input#svc-cwd', { type: 'text', placeholder: 'workspace directory', spellcheck: 'false' });
	const policy = h('select#svc-policy', ['no', 'on-failure', 'always'].map((p) => h('option', { value: p, selected: p === 'on-failure' }, p)));
	const maxRestarts = h('input#svc-max', { type: 'number', min: 0, max: 1000000, value: '5' });
	const delay = h('input#svc-delay', { type: 'number', min: 0, max: 3600, step: 'any', value: '1' });
	const autostart = h('input#svc-autostart', { type: 'checkbox' });
	const ferr = h('div.error', { hidden: true, role: 'alert' });
	const startBtn = h('button.primary#svc-start', { type: 'submit' }, 'Start service');
	const form = h('form.card#svc-form', {
		on: {
			submit: async (ev) => {
				ev.preventDefault();
				const delayMs = delay.value === '' ? 0 : secondsToMs(delay.value);
				if (delayMs === null || delayMs > 3600000) {
					showError(ferr, new Error(`Delay: "${delay.value}" is not a number of seconds from 0 to 3600.`));
					delay.focus();
					return;
				}
				const body = {
					name: name.value.trim(), command: command.value,
					restart: { policy: policy.value, maxRestarts: Number(maxRestarts.value || 0), delayMs },
					autostart: autostart.checked,
				};
				if (cwd.value.trim()) body.cwd = cwd.value.trim();
				startBtn.disabled = true;
				try {
					const s = await api('POST', wsPath + '/services', body);
					showError(ferr, null);
					select(s.name, true);
				} catch (e) {
					showError(ferr, e);
				} finally {
					startBtn.disabled = false;
				}
			},
		},
	},
	h('h2', 'Start a service'),
	h('div.row', field('Name', name), field('Command (foreground)', command, 'Do not append & or daemonize.')),
	h('div.row', field('Restart policy', policy), field('Max restarts', maxRestarts), field('Delay (s)', delay), field('Working directory', cwd)),
	h('label.checkbox', autostart, ' start again after the workspace restarts'),
	ferr,
	h('div.actions', startBtn));

	const lerr = h('div.error', { hidden: true, role: 'alert' });
	const list = h('div#services', h('p.muted', 'Loading…'));
	const detail = h('section.card#svc-detail', { hidden: true });
	replace(root, form,
		h('section.card', h('div.card-head', h('h2', 'Services'),
			h('button#svc-refresh', { type: 'button', on: { click: () => loadList() } }, 'Refresh')), lerr, list),
		detail);

	let selected = null;
	let lastKey = null;
	let followed = null; // the attempt number last followed automatically
	let logAbort = null;
	const openAttempts = new Set();
	ctx.onClose(() => logAbort?.abort());

	async function act(s, what) {
		if (what === 'delete' && !confirm(`Delete service ${s.name}? It is stopped and its attempts are forgotten.`)) return;
		try {
			const path = wsPath + '/services/' + enc(s.name);
			if (what === 'delete') await api('DELETE', path);
			else await api('POST', path + '/' + what);
			showError(lerr, null);
			if (what === 'delete' && selected === s.name) {
				selected = null;
				detail.hidden = true;
			}
		} catch (e) {
			showError(lerr, e);
		}
		loadList();
		loadDetail(true);
	}

	async function loadList() {
		let svcs;
		try {
			svcs = (await api('GET', wsPath + '/services', undefined, { signal: ctx.signal })).services || [];
			showError(lerr, null);
		} catch (e) {
			if (e.name !== 'AbortError') showError(lerr, e);
			return;
		}
		if (!svcs.length) {
			replace(list, h('p.muted', 'No services yet.'));
			return;
		}
		replace(list, h('div.table-scroll', h('table.list#svc-table',
			h('thead', h('tr', ['Service', 'State', 'Using now', 'Restarts', 'Attempts', 'Policy', 'Command', ''].map((t) => h('th', t)))),
			h('tbody', svcs.map((s) => h('tr', { 'data-name': s.name, class: s.name === selected ? 'selected' : '' },
				h('td', h('a', { href: '#', on: { click: (ev) => { ev.preventDefault(); select(s.name); } } }, s.name)),
				h('td', badge(s.state), s.stopping ? h('span.muted', ' stopping…') : null, s.reason ? h('div.reason', s.reason) : null),
				ACTIVE.includes(s.state) ? usageCell('service:' + s.name, 'td.svc-usage') : h('td.svc-usage'),
				h('td.svc-restarts', String(s.restartCount ?? 0)),
				h('td.svc-attempts', String(attemptsOf(s).length)),
				h('td', `${s.restart?.policy ?? 'no'} (max ${s.restart?.maxRestarts ?? '—'})`),
				h('td.mono.cmd', { title: s.command }, s.command),
				h('td.actions',
					h('button', { type: 'button', on: { click: () => select(s.name) } }, 'Details'),
					ACTIVE.includes(s.state) && !s.stopping ? h('button', { type: 'button', on: { click: () => act(s, 'stop') } }, 'Stop') : null,
					h('button', { type: 'button', on: { click: () => act(s, 'restart') } }, 'Restart'),
					h('button.danger', { type: 'button', on: { click: () => act(s, 'delete') } }, 'Delete'))))))));
	}

	function select(n, inView) {
		if (selected !== n) {
			logAbort?.abort();
			logAbort = null;
			openAttempts.clear();
			logs = null; // another service: its own logs, nothing of the previous one's
			lastKey = null;
		}
		if (selected !== n) followed = null;
		selected = n;
		// the list above redrawn first: a row more moves the detail down
		Promise.all([loadList(), loadDetail(true)]).then(() => {
			// its live logs below the list, else out of sight
			if (inView && selected === n && !detail.hidden) reveal(detail, detail.querySelector('.logview'));
		});
	}

	async function loadDetail(force) {
		if (!selected) return;
		const n = selected;
		let s;
		try {
			s = await api('GET', wsPath + '/services/' + enc(n), undefined, { signal: ctx.signal });
		} catch (e) {
			if (e.name === 'AbortError') return;
			detail.hidden = false;
			replace(detail, h('div.error', e.message));
			return;
		}
		if (selected !== n) return;
		shownState = s.state;
		// A running attempt's byte counts change all the time: updated in place, not redrawn.
		const key = JSON.stringify([s.updatedAt, s.state, s.stopping, s.currentAttempt, s.attempts.length, s.attempts.at(-1)?.endedAt]);
		if (!force && key === lastKey && !detail.hidden) {
			for (const a of attemptsOf(s)) {
				const el = a.running && detail.querySelector(`.attempt.running[data-attempt="${a.number}"] .attempt-bytes`);
				if (el) replace(el, bytesSoFar(a));
			}
			return;
		}
		lastKey = key;
		renderDetail(s);
		// Each running attempt's output is followed once, as soon as it runs (a follow
		// before that, while "starting", would end at once: no attempt is running yet).
		if (s.state === 'running' && s.currentAttempt && followed !== s.currentAttempt && !logAbort) {
			followed = s.currentAttempt;
			followLogs(n);
		}
	}

	let logs = null; // the log viewer of the selected service
	function renderDetail(s) {
		detail.hidden = false;
		for (const d of detail.querySelectorAll('details[data-attempt]')) {
			if (d.open) openAttempts.add(d.dataset.attempt);
			else openAttempts.delete(d.dataset.attempt);
		}
		const r = s.restart || {};
		const attempts = attemptsOf(s);
		const logsBtn = h('button#svc-follow', { type: 'button', on: { click: () => followLogs(s.name) } }, logAbort ? 'Following…' : 'Follow live logs');
		if (!logs) logs = logViewer({ id: 'svc-logs', name: 'service-' + s.name });
		replace(detail,
			h('div.card-head', h('h2', 'Service ', h('span.mono', s.name), ' ', badge(s.state)),
				h('div.actions', logsBtn)),
			s.reason ? h('div.reason', s.reason) : null,
			h('dl.kv',
				h('dt', 'Command'), h('dd.mono', s.command),
				h('dt', 'Restart'), h('dd', `${r.policy}, at most ${r.maxRestarts} restarts, ${r.delayMs} ms delay${r.backoff ? `, backoff ×${r.backoff.multiplier} up to ${r.backoff.maxDelayMs} ms` : ''}`),
				h('dt', 'Restarts made'), h('dd', String(s.restartCount)),
				h('dt', 'Current attempt'), h('dd', s.currentAttempt ? `#${s.currentAttempt} since ${fmtTime(s.currentAttemptStartedAt)}, pid ${s.mainPid ?? '—'}` : '—'),
				s.nextRestartAt ? [h('dt', 'Next restart'), h('dd', fmtTime(s.nextRestartAt))] : null),
			h('h3', 'Live logs'), logs.el,
			h('h3', `Attempts (${attempts.length})`),
			attempts.length ? h('div.attempts', [...attempts].reverse().map((a) => a.running ? h('div.attempt.running', { 'data-attempt': String(a.number) },
				h('span.mono', `#${a.number}`), ' ', h('span.end', 'running'),
				h('span.muted', ` · since ${fmtTime(a.startedAt)} · pid ${a.pid ?? '—'}`, h('span.attempt-bytes', bytesSoFar(a)), ' · its output: live logs above')) : h('details.attempt', { 'data-attempt': String(a.number), open: openAttempts.has(String(a.number)) },
				h('summary', h('span.mono', `#${a.number}`), ' ', h('span.end', attemptEnd(a)),
					h('span.muted', ` · ${fmtTime(a.startedAt)} · ${fmtMs(a.durationMs)} · out ${fmtBytes(a.stdoutBytes)}, err ${fmtBytes(a.stderrBytes)}`)),
				a.reason ? h('div.reason', a.reason) : null,
				a.outputDropped ? h('div.reason', 'output dropped: the agent held too many results while the controller was away') : null,
				h('h4', 'stdout'), outputBlock(a, 'stdout'),
				h('h4', 'stderr'), outputBlock(a, 'stderr')))) : h('p.muted', 'No attempts yet.'));
	}

	async function followLogs(n) {
		logAbort?.abort();
		const ac = (logAbort = new AbortController());
		ctx.signal.addEventListener('abort', () => ac.abort(), { once: true });
		const view = logs;
		view.clear();
		const btn = detail.querySelector('#svc-follow');
		if (btn) replace(btn, 'Following…');
		const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
		try {
			await readEvents(wsPath + '/services/' + enc(n) + '/logs?follow=1', (ev, data) => {
				let d;
				try { d = JSON.parse(data); } catch { return; }
				if (ev === 'output') {
					const text = (decoders[d.stream] || decoders.stdout).decode(b64decode(d.data), { stream: true });
					view.write(d.stream === 'stderr' ? 'stderr' : 'stdout', text);
				} else if (ev === 'gap') {
					view.note(`\n[${fmtBytes(d.bytes)} of ${d.stream} not shown]\n`);
				} else if (ev === 'end') {
					view.note(`\n[end of the logs; the service is ${d.state ?? 'gone'}]\n`);
				}
			}, ac.signal);
		} catch (e) {
			if (e.name !== 'AbortError') view.note(`\n[logs: ${e.message}]\n`);
		}
		if (logAbort === ac) logAbort = null;
		const b = detail.querySelector('#svc-follow');
		if (b) replace(b, 'Follow live logs');
		loadDetail(true);
	}

	// While the shown service runs, its counts are asked every 2 s (the page visible).
	let shownState = null;
	ctx.every(2000, () => {
		if (!document.hidden && selected && ACTIVE.includes(shownState)) loadDetail(false);
	});

	loadList();
	// State changes come as events; a slow poll besides.
	liveRefresh(ctx, { workspace: decodeURIComponent(wsPath.split('/')[3]), types: 'service' }, () => {
		loadList();
		loadDetail(false);
	}, 10000);
}
