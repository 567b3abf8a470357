// SPDX-License-Identifier: MIT
// Sandboxes when this controller knows other workers (GET /v1/workers): each worker with its
// state, version, capacity and workspace count; a worker that did not answer shows as down
// with the error, the others stay usable. Opening one lists its workspaces (#/workers/NAME).
import { api, enc, setFleet } from './api.js';
import { h, replace, badge, fmtBytes, showError } from './dom.js';
import { filterForm, filterQuery, filterActive, labelChips, networkText } from './worker.js';

function capacityText(c) {
	if (!c) return '—';
	const p = [];
	if (c.workspaces) p.push(`${c.workspaces.free ?? '—'} of ${c.workspaces.max ?? '—'} workspaces free`);
	if (c.memoryBytes) p.push(`${fmtBytes(c.memoryBytes.available ?? 0)} of ${fmtBytes(c.memoryBytes.total ?? 0)} memory available`);
	if (c.cpus) p.push(`${c.cpus} CPU`);
	return p.join(' · ') || '—';
}

// The list as the app keeps it: {self, names}.
export function fleetOf(workers) {
	const self = workers.find((w) => w.self);
	return { self: self ? self.name : null, names: workers.map((w) => w.name) };
}

export function fleetView(root, ctx) {
	ctx.setCrumbs([]);
	const err = h('div.error', { hidden: true, role: 'alert' });
	const list = h('div#workers', h('p.muted', 'Loading the workers…'));
	let filter = null, names = null, self = null;
	const found = h('div#fleet-results', h('p.muted', 'Searching every worker…'));
	replace(root, h('section.card',
		h('div.card-head', h('h2', 'Workers'),
			h('button#refresh-workers', { type: 'button', on: { click: () => load() } }, 'Refresh')),
		err, list),
	h('section.card',
		h('div.card-head', h('h2', 'Workspaces of every worker')),
		filterForm('fleet-filter', (f) => {
			filter = f;
			search();
		}),
		found));

	// The list's filters asked of every worker that is up, at once (GET /v1/workspaces here,
	// through /v1/workers/NAME/v1/workspaces elsewhere); a worker that fails is named, the
	// others shown.
	async function search() {
		if (!names) return;
		const asked = filter, q = filterQuery(asked);
		const answers = await Promise.all(names.map(async (name) => {
			const path = name === self ? '/v1/workspaces' + q : '/v1/workers/' + enc(name) + '/v1/workspaces' + q;
			try {
				return { name, wss: (await api('GET', path, undefined, { signal: ctx.signal })).workspaces || [] };
			} catch (e) {
				return { name, error: e };
			}
		}));
		if (!ctx.alive || asked !== filter) return;
		const rows = answers.flatMap((a) => (a.wss || []).map((ws) => h('tr', { 'data-id': ws.id, 'data-worker': a.name },
			h('td', a.name),
			h('td', h('a.mono', { href: '#/w/' + enc(ws.id) }, ws.id)),
			h('td.ws-name', ws.name ?? '—'),
			h('td.ws-labels', labelChips(ws.labels)),
			h('td', badge(ws.state)),
			h('td.ws-network', networkText(ws)))));
		const failed = answers.filter((a) => a.error && a.error.name !== 'AbortError');
		replace(found,
			failed.map((a) => h('div.error.fleet-unreachable', { 'data-worker': a.name }, `worker ${a.name}: ${a.error.message}`)),
			rows.length ? h('div.table-scroll', h('table.list#fleet-ws-table',
				h('thead', h('tr', ['Worker', 'Workspace', 'Name', 'Labels', 'State', 'Network'].map((t) => h('th', t)))),
				h('tbody', rows)))
				: h('p.muted#fleet-none', filterActive(asked) ? 'No workspace of any worker matches these filters.' : 'No workspaces on any worker.'));
	}

	async function load() {
		let workers;
		try {
			workers = (await api('GET', '/v1/workers', undefined, { signal: ctx.signal })).workers || [];
			showError(err, null);
		} catch (e) {
			if (e.name !== 'AbortError') showError(err, e);
			return;
		}
		if (!ctx.alive) return;
		setFleet(fleetOf(workers));
		names = workers.filter((w) => w.state === 'up').map((w) => w.name); // a down one would hold the answer
		self = workers.find((w) => w.self)?.name ?? null;
		search();
		replace(list, h('div.table-scroll', h('table.list#workers-table',
			h('thead', h('tr', ['Worker', 'State', 'Version', 'Capacity', 'Workspaces'].map((t) => h('th', t)))),
			h('tbody', workers.map((w) => h('tr', { 'data-worker': w.name, 'data-state': w.state },
				h('td', h('a.mono', { href: '#/workers/' + enc(w.name) }, w.name), w.self ? h('span.muted', ' (this controller)') : null),
				h('td', badge(w.state === 'up' ? 'up' : 'down', w.state === 'up' ? 'ok' : 'error'),
					w.error ? h('div.reason.worker-error', w.error) : null),
				h('td', w.version ?? '—'),
				h('td', capacityText(w.capacity)),
				h('td', w.workspaces ?? '—')))))));
	}

	load();
	ctx.every(10000, load);
}
