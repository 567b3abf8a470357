// SPDX-License-Identifier: MIT
// Sandboxes when this controller knows other workers (GET /v1/workers): each worker with its
// state, version, capacity and workspace count; a worker that did not answer shows as down
// with the error, the others stay usable. Opening one lists its workspaces (#/workers/NAME).
import { api, enc, setFleet } from './api.js';
import { h, replace, badge, fmtBytes, showError } from './dom.js';

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
	replace(root, h('section.card',
		h('div.card-head', h('h2', 'Workers'),
			h('button#refresh-workers', { type: 'button', on: { click: () => load() } }, 'Refresh')),
		err, list));

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
