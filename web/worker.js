// SPDX-License-Identifier: MIT
// The worker page: what the worker is, whether it is ready (each check), its workspaces.
import { api, enc, liveRefresh } from './api.js';
import { h, replace, badge, fmtTime, fmtMs, field, showError, shortImage, secondsToMs } from './dom.js';
import { confirmRestart } from './workspace.js';
import { workerCharts, sparkCell, startSparklines } from './charts.js';

function limitsText(ws) {
	const p = [];
	p.push(ws.cpus ? `${ws.cpus} CPU` : 'CPU ∞');
	p.push(ws.memoryMb ? `${ws.memoryMb} MB` : 'mem ∞');
	p.push(ws.pidsLimit ? `${ws.pidsLimit} pids` : 'pids ∞');
	return p.join(' · ');
}

// The network a workspace's commands see: its mode, or the worker's own for a host workspace.
export function networkText(ws) {
	return ws.adapter === 'host' ? 'host' : ws.network ?? '—';
}

// Labels as chips "key=value", every one text (a label is the client's: never markup).
export function labelChips(labels) {
	const keys = Object.keys(labels || {}).sort();
	if (!keys.length) return h('span.muted', '—');
	return h('span.labels', keys.map((k) => h('span.label-chip', { 'data-key': k }, `${k}=${labels[k]}`)));
}

const STATES = ['creating', 'ready', 'paused', 'stopped', 'failed', 'deleting'];

// The list's filters, as GET /v1/workspaces takes them: name, labels ("team=x, tier": each
// KEY=VALUE or KEY, comma-separated, all of them must hold) and state. onChange(filter) after each change.
export function filterForm(idPrefix, onChange) {
	const name = h('input#' + idPrefix + '-name', { type: 'search', placeholder: 'name', spellcheck: 'false', autocomplete: 'off' });
	const label = h('input#' + idPrefix + '-label', { type: 'search', placeholder: 'team=x, tier (all must hold)', spellcheck: 'false', autocomplete: 'off' });
	const state = h('select#' + idPrefix + '-state', h('option', { value: '' }, 'any state'), STATES.map((st) => h('option', { value: st }, st)));
	let timer = null;
	const changed = () => {
		clearTimeout(timer);
		timer = setTimeout(() => onChange(current()), 250);
	};
	const current = () => ({ name: name.value.trim(), labels: label.value.split(',').map((l) => l.trim()).filter(Boolean), state: state.value });
	name.addEventListener('input', changed);
	label.addEventListener('input', changed);
	state.addEventListener('change', changed);
	const form = h('form.filters#' + idPrefix, {
		role: 'search',
		on: { submit: (ev) => { ev.preventDefault(); clearTimeout(timer); onChange(current()); } },
	}, field('Name', name), field('Labels', label), field('State', state));
	form.current = current;
	return form;
}

// "?label=team%3Dx&name=web": the filter as the list's query ('' when none).
export function filterQuery(f) {
	const q = new URLSearchParams();
	for (const l of f?.labels || []) q.append('label', l);
	if (f?.name) q.set('name', f.name);
	if (f?.state) q.set('state', f.state);
	const s = q.toString();
	return s ? '?' + s : '';
}

export function filterActive(f) {
	return !!(f && (f.name || f.state || f.labels.length));
}

export function workerView(root, ctx) {
	ctx.setCrumbs([]);
	const info = h('section.card#worker-info', h('p.muted', 'Loading the worker…'));
	const checks = h('section.card#ready', h('p.muted', 'Checking…'));
	const err = h('div.error', { hidden: true, role: 'alert' });
	const list = h('div#workspaces', h('p.muted', 'Loading workspaces…'));
	const createBox = h('div#create-box');
	const usage = h('section.card#worker-charts');
	let filter = null;
	const filters = filterForm('filter', (f) => {
		filter = f;
		refresh();
	});
	replace(root,
		h('div.grid2', info, checks),
		h('section.card',
			h('div.card-head', h('h2', 'Workspaces'),
				h('button#refresh', { type: 'button', on: { click: () => refresh() } }, 'Refresh')),
			filters, err, list),
		usage,
		createBox);

	let worker = null, images = [], snapshots = null, ready = null, formBuilt = false;

	async function loadWorker() {
		try {
			[worker, ready] = await Promise.all([
				api('GET', '/v1/worker', undefined, { signal: ctx.signal }),
				api('GET', '/v1/ready', undefined, { signal: ctx.signal, okStatuses: [503] }),
			]);
		} catch (e) {
			if (e.name !== 'AbortError') replace(info, h('div.error', e.message));
			return;
		}
		try {
			images = (await api('GET', '/v1/images', undefined, { signal: ctx.signal })).images || [];
		} catch (e) {
			if (e.name === 'AbortError') return;
			images = [];
		}
		snapshots = await loadSnapshots();
		if (!ctx.alive) return;
		renderWorker();
		if (!formBuilt) {
			formBuilt = true;
			replace(createBox, createForm());
		}
	}

	function renderWorker() {
		const l = worker.limits || {};
		replace(info,
			h('h2', 'Worker ', h('span#worker-name', worker.name)),
			h('dl.kv',
				h('dt', 'Version'), h('dd', worker.version ?? '—'),
				h('dt', 'Adapters'), h('dd', (worker.adapters || []).join(', ') || '—'),
				h('dt', 'Default adapter'), h('dd', ready?.defaultAdapter ?? '—'),
				worker.defaultImage !== undefined ? [h('dt', 'Default image'), worker.defaultImage
					? h('dd.mono#worker-default-image', worker.defaultImage)
					: h('dd#worker-default-image.warn', 'none: a container workspace must name its image (a create without one is refused)')] : null,
				h('dt', 'OCI runtime'), h('dd', worker.runtime ?? '—'),
				h('dt', 'cgroup'), h('dd', worker.cgroup ?? '—'),
				h('dt', 'Workspaces'), h('dd', `${worker.workspaces ?? '—'} of ${l.maxWorkspaces ?? '—'}`),
				h('dt', 'Commands'), h('dd', `timeout ${l.defaultTimeoutMs !== undefined ? fmtMs(l.defaultTimeoutMs) : '—'} by default, ${l.maxRunningPerWorkspace ?? '—'} running per workspace`)));
		replace(checks,
			h('h2', 'Ready ', badge(ready.ready ? 'ready' : 'not ready', ready.ready ? 'ok' : 'error')),
			h('ul.checks', (ready.checks || []).map((c) =>
				// A check the operator turned off (--lxcfs off) is a choice, not a failure.
				h('li.check', { 'data-check': c.name, class: c.disabled ? 'off' : c.ok ? 'ok' : 'bad' },
					h('span.mark', c.disabled ? '–' : c.ok ? '✓' : '✗'),
					h('span.name', c.name),
					h('span.msg', c.message ?? '')))));
	}

	// The snapshots a workspace can be made from; null when the controller lists none (an older
	// one without snapshots).
	async function loadSnapshots() {
		try {
			return (await api('GET', '/v1/snapshots', undefined, { signal: ctx.signal })).snapshots || [];
		} catch {
			return null;
		}
	}

	async function refresh() {
		let wss;
		const asked = filter;
		try {
			wss = (await api('GET', '/v1/workspaces' + filterQuery(asked), undefined, { signal: ctx.signal })).workspaces || [];
			showError(err, null);
		} catch (e) {
			if (e.name !== 'AbortError') showError(err, e);
			return;
		}
		if (!ctx.alive || asked !== filter) return;
		if (!wss.length) {
			replace(list, h('p.muted#ws-none', filterActive(asked) ? 'No workspace matches these filters.' : 'No workspaces yet: create one below.'));
			return;
		}
		replace(list, h('div.table-scroll', h('table.list#ws-table',
			h('thead', h('tr', ['Workspace', 'Name', 'Labels', 'State', 'Adapter', 'Network', 'Image', 'Limits', 'CPU (10 min)', 'Created', ''].map((t) => h('th', t)))),
			h('tbody', wss.map((ws) => h('tr', { 'data-id': ws.id },
				h('td', h('a.mono', { href: '#/w/' + enc(ws.id) }, ws.id)),
				h('td.ws-name', ws.name ?? '—'),
				h('td.ws-labels', labelChips(ws.labels)),
				h('td', badge(ws.state), ws.reason ? h('div.reason', ws.reason) : null),
				h('td', ws.adapter),
				h('td.ws-network', networkText(ws)),
				h('td.mono', { title: ws.image || '' }, ws.adapter === 'container' ? shortImage(ws.image) : '—'),
				h('td', limitsText(ws)),
				sparkCell(ws.id),
				h('td', fmtTime(ws.createdAt)),
				h('td.actions',
					h('button', { type: 'button', on: { click: () => act(ws, 'restart') } }, 'Restart'),
					h('button.danger', { type: 'button', on: { click: () => act(ws, 'delete') } }, 'Delete'))))))));
	}

	async function act(ws, what) {
		if (what === 'delete' && !confirm(`Delete workspace ${ws.id}? Its HOME and every run go with it.`)) return;
		if (what === 'restart' && !(await confirmRestart(ws.id, ctx.signal))) return;
		try {
			if (what === 'delete') await api('DELETE', '/v1/workspaces/' + enc(ws.id));
			else await api('POST', '/v1/workspaces/' + enc(ws.id) + '/restart');
			showError(err, null);
		} catch (e) {
			showError(err, e);
		}
		refresh();
	}

	function createForm() {
		const adapters = worker.adapters || ['host'];
		const adapter = h('select#new-adapter', { name: 'adapter' },
			adapters.map((a) => h('option', { value: a, selected: a === ready?.defaultAdapter }, a)));
		const image = h('select#new-image', { name: 'image' },
			h('option', { value: '' }, 'worker default'),
			images.map((im) => h('option', { value: im.reference || im.digest }, `${im.name || '(unnamed)'} — ${im.digest.slice(0, 19)}…`)));
		const network = h('select#new-network', { name: 'network' },
			h('option', { value: 'none' }, 'none (loopback only)'),
			h('option', { value: 'bridge' }, 'bridge (outbound through NAT)'),
			h('option', { value: 'restricted' }, 'restricted (allow list, default deny)'));
		const allow = h('textarea#new-allow', {
			rows: 3, spellcheck: 'false',
			placeholder: 'one rule a line: github.com, *.npmjs.org:443, 203.0.113.0/24:443,80/tcp (empty: nothing allowed)',
		});
		const allowRow = h('div.container-only#allow-row', field('Allowed destinations', allow));
		// Empty or 0: no CPU limit, and the worker's defaults for memory and processes.
		const l = worker.limits || {};
		const byDefault = (v, unit) => `worker default: ${v === undefined ? '—' : v === 0 ? 'none' : `${v}${unit}`}`;
		const cpus = h('input#new-cpus', { type: 'number', min: 0, max: 1024, step: 'any', placeholder: 'no limit' });
		const mem = h('input#new-memory', { type: 'number', min: 0, max: 1048576, step: 1, placeholder: byDefault(l.defaultMemoryMb, ' MiB') });
		const pids = h('input#new-pids', { type: 'number', min: 0, max: 4194304, step: 1, placeholder: byDefault(l.defaultPidsLimit, '') });
		const env = h('textarea#new-env', { rows: 2, placeholder: 'KEY=value, one a line', spellcheck: 'false' });
		// A snapshot names its image: the image select gives way while one is chosen.
		const snapshotOptions = () => [h('option', { value: '' }, 'none: a fresh workspace'),
			(snapshots || []).map((sn) => h('option', { value: sn.id },
				`${sn.name || '(unnamed)'} — ${sn.id} of ${sn.workspaceId}${sn.memory ? ', with memory' : ''}`))];
		const snapshot = h('select#new-snapshot', { name: 'snapshot' }, snapshotOptions());
		snapshot.addEventListener('focus', async () => {
			const now = await loadSnapshots();
			if (!now || !ctx.alive || JSON.stringify(now) === JSON.stringify(snapshots)) return;
			const was = snapshot.value;
			snapshots = now;
			replace(snapshot, snapshotOptions());
			snapshot.value = snapshots.some((sn) => sn.id === was) ? was : '';
			sync();
		});
		const snapshotRow = h('div.row#snapshot-row', { hidden: snapshots === null },
			field('From snapshot', snapshot, 'its HOME and root filesystem; the snapshot\'s image replaces Image'));
		const autoResume = h('input#new-auto-resume', { type: 'checkbox' });
		const idle = h('input#new-idle', { type: 'number', min: 1, max: 2592000, step: 'any', placeholder: 'never' });
		const idleAction = h('select#new-idle-action', { name: 'idleAction' },
			h('option', { value: 'stop', selected: true }, 'stop'),
			h('option', { value: 'pause' }, 'pause (resumed by Resume, or by a command with auto-resume)'));
		const cerr = h('div.error', { hidden: true, role: 'alert' });
		const button = h('button.primary#create', { type: 'submit' }, 'Create workspace');
		const containerOnly = h('div.row.container-only', field('Image', image), field('Network', network));
		const sync = () => {
			image.disabled = snapshot.value !== '';
			containerOnly.hidden = adapter.value !== 'container';
			allowRow.hidden = adapter.value !== 'container' || network.value !== 'restricted';
		};
		adapter.addEventListener('change', sync);
		network.addEventListener('change', sync);
		// A snapshot is of one adapter (a host snapshot holds HOME only): the form follows it.
		snapshot.addEventListener('change', () => {
			const sn = (snapshots || []).find((x) => x.id === snapshot.value);
			if (sn && sn.adapter && [...adapter.options].some((o) => o.value === sn.adapter)) adapter.value = sn.adapter;
			sync();
		});
		sync();
		return h('form.card#create-form', {
			on: {
				submit: async (ev) => {
					ev.preventDefault();
					const body = { adapter: adapter.value };
					if (snapshot.value) body.snapshot = snapshot.value;
					if (adapter.value === 'container') {
						if (image.value && !body.snapshot) body.image = image.value;
						body.network = network.value;
					}
					if (body.network === 'restricted') {
						try {
							body.egress = { allow: parseAllow(allow.value) };
						} catch (e) {
							showError(cerr, e);
							return;
						}
					}
					if (cpus.value !== '') body.cpus = Number(cpus.value);
					if (mem.value !== '') body.memoryMb = Number(mem.value);
					if (pids.value !== '') body.pidsLimit = Number(pids.value);
					if (idle.value !== '') {
						const ms = secondsToMs(idle.value);
						if (ms === null || ms < 1000 || ms > 2592000000) {
							showError(cerr, new Error(`Idle after: "${idle.value}" is not a number of seconds from 1 to 2592000 (30 days).`));
							return;
						}
						body.idleTimeoutMs = ms;
					}
					if (idleAction.value === 'pause') body.idleAction = 'pause';
					if (autoResume.checked) body.autoResume = true;
					try {
						const e = parseEnv(env.value);
						if (e) body.env = e;
					} catch (e) {
						showError(cerr, e);
						return;
					}
					button.disabled = true;
					replace(button, 'Creating…');
					try {
						const ws = await api('POST', '/v1/workspaces', body);
						showError(cerr, null);
						location.hash = '#/w/' + enc(ws.id);
					} catch (e) {
						showError(cerr, e);
					} finally {
						button.disabled = false;
						replace(button, 'Create workspace');
					}
				},
			},
		},
		h('h2', 'New workspace'),
		h('div.row', field('Adapter', adapter)),
		containerOnly,
		allowRow,
		snapshotRow,
		h('div.row', field('CPUs', cpus), field('Memory (MB)', mem), field('Processes', pids)),
		h('div.row', field('Idle after (s)', idle, 'no command, terminal or service activity for this long'), field('When idle', idleAction)),
		h('label.checkbox', autoResume, ' Auto-resume: a command, terminal or file write on it while paused resumes it first (else it is refused)'),
		field('Environment', env),
		cerr,
		h('div.actions', button));
	}

	loadWorker();
	refresh();
	liveRefresh(ctx, { types: 'workspace' }, refresh);
	workerCharts(ctx, usage, () => worker?.capacity);
	startSparklines(ctx);
}

export function parseEnv(text) {
	const out = {};
	let n = 0;
	for (const raw of text.split('\n')) {
		const line = raw.trim();
		if (!line || line.startsWith('#')) continue;
		const i = line.indexOf('=');
		if (i <= 0) throw new Error(`environment line "${line}" is not KEY=value`);
		out[line.slice(0, i)] = line.slice(i + 1);
		n++;
	}
	return n ? out : null;
}

// One egress rule a line, as the CLI's --allow takes them: DEST[:PORTS][/tcp|/udp], DEST a name,
// "*." and a name, or an IPv4 address or network. What a DEST may be is the controller's to say.
export function parseAllow(text) {
	const rules = [];
	for (const raw of text.split('\n')) {
		const line = raw.trim();
		if (!line || line.startsWith('#')) continue;
		let rest = line;
		const rule = {};
		const proto = /\/(tcp|udp)$/.exec(rest);
		if (proto) {
			rule.proto = proto[1];
			rest = rest.slice(0, -4);
		}
		const parts = rest.split(':');
		if (parts.length > 2) throw new Error(`rule "${line}": IPv6 egress is not available: workspaces have no IPv6`);
		const dest = parts[0];
		if (!dest) throw new Error(`rule "${line}" has no destination`);
		if (/^[0-9./]+$/.test(dest)) rule.cidr = dest;
		else rule.domain = dest;
		if (parts.length === 2) {
			const ports = parts[1].split(',');
			if (!ports.every((p) => /^[0-9]{1,5}$/.test(p) && Number(p) >= 1 && Number(p) <= 65535))
				throw new Error(`rule "${line}": ports must be numbers from 1 to 65535`);
			rule.ports = ports.map(Number);
		}
		const ordered = {};
		for (const k of ['cidr', 'domain', 'ports', 'proto']) if (k in rule) ordered[k] = rule[k];
		rules.push(ordered);
	}
	return rules;
}
