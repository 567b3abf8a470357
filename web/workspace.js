// SPDX-License-Identifier: MIT
// A workspace: its summary (Pause/Resume, Fork, Restart, Delete) and tabs for commands,
// services, terminals, files, ports, snapshots and code.
import { api, enc, liveRefresh, remoteWorker } from './api.js';
import { h, replace, badge, fmtTime, fmtMs, showError } from './dom.js';
import { commandsTab, refusedDest } from './commands.js';
import { servicesTab } from './services.js';
import { terminalsTab, terminalView } from './terminals.js';
import { filesTab } from './files.js';
import { portsTab } from './ports.js';
import { snapshotsTab, openForkDialog } from './snapshots.js';
import { codeTab } from './code.js';
import { startUsageFeed, usageCell } from './usage.js';
import { workspaceCharts, runsTimeline } from './charts.js';
import { labelChips, networkText } from './worker.js';

const TABS = [['commands', 'Commands'], ['services', 'Services'], ['terminals', 'Terminals'], ['files', 'Files'], ['ports', 'Ports'], ['snapshots', 'Snapshots'], ['code', 'Code']];

// What a restart would end, counted from the lists.
async function runningCounts(wsPath, signal) {
	const [c, s, t] = await Promise.all([
		api('GET', wsPath + '/commands?limit=1000', undefined, { signal }),
		api('GET', wsPath + '/services', undefined, { signal }),
		api('GET', wsPath + '/terminals', undefined, { signal }),
	]);
	return {
		commands: (c.commands || []).filter((r) => r.status === 'running').length,
		services: (s.services || []).filter((v) => ['starting', 'running', 'backoff'].includes(v.state)).length,
		terminals: (t.terminals || []).filter((x) => ['starting', 'running'].includes(x.state)).length,
	};
}

function restartQuestion(id, n) {
	const plural = (k, word) => `${k} ${word}${k === 1 ? '' : 's'}`;
	const parts = [];
	if (n.commands) parts.push(plural(n.commands, 'running command'));
	if (n.services) parts.push(plural(n.services, 'running service'));
	if (n.terminals) parts.push(plural(n.terminals, 'open terminal'));
	const what = parts.length ? `This ends ${parts.join(', ').replace(/, ([^,]*)$/, ' and $1')}` +
		(n.services ? ' (services set to autostart start again)' : '') + '.' : 'Nothing is running in it.';
	return `Restart workspace ${id}? Its processes are killed and its agent starts again. ${what}`;
}

// Asks before a restart, naming what it ends. True when the person agreed.
export async function confirmRestart(id, signal) {
	let n = null;
	try {
		n = await runningCounts('/v1/workspaces/' + enc(id), signal);
	} catch (e) {
		if (e.name === 'AbortError') return false;
	}
	return confirm(n ? restartQuestion(id, n)
		: `Restart workspace ${id}? Every running command, service and terminal in it ends (what runs could not be listed).`);
}

export function workspaceView(root, ctx, id, tab, sub) {
	if (!TABS.some(([t]) => t === tab)) tab = 'commands';
	const base = '#/w/' + enc(id);
	const crumbs = [[id, base]];
	if (tab === 'terminals' && sub) crumbs.push(['Terminals', base + '/terminals'], [sub, null]);
	else crumbs.push([TABS.find(([t]) => t === tab)[1], null]);
	ctx.setCrumbs(crumbs);

	const summary = h('section.card#ws-summary', h('p.muted', 'Loading the workspace…'));
	const err = h('div.error', { hidden: true, role: 'alert' });
	const body = h('div.tab-body');
	const usage = h('section.card#ws-charts');
	replace(root,
		summary,
		usage,
		h('nav.tabs', { role: 'tablist' }, TABS.map(([t, label]) =>
			h('a.tab', { href: base + '/' + t, role: 'tab', 'aria-selected': String(t === tab), class: t === tab ? 'active' : '', 'data-tab': t }, label))),
		err,
		body);

	let ws = null, net = null;
	async function load() {
		try {
			ws = await api('GET', '/v1/workspaces/' + enc(id), undefined, { signal: ctx.signal });
		} catch (e) {
			if (e.name === 'AbortError') return;
			if (e.status === 404) notFound(e);
			else if (!ws) unreachable(e);
			else showError(err, e);
			return;
		}
		net = null;
		if (ws.network === 'bridge' || ws.network === 'restricted') {
			try {
				net = await api('GET', '/v1/workspaces/' + enc(id) + '/network', undefined, { signal: ctx.signal });
			} catch (e) {
				if (e.name === 'AbortError') return;
				net = { error: e.message };
			}
		}
		showError(err, null);
		render();
	}

	// Gone (deleted, or never there): nothing of the workspace stays on the page, and every
	// poll, stream and socket of the view ends.
	function notFound(e) {
		ctx.close();
		ctx.setCrumbs([[id, null]]);
		replace(root, h('section.card#ws-not-found',
			h('h2', 'Workspace not found'),
			h('p', 'No workspace ', h('span.mono', id), ' exists on this worker: it was deleted, or the address is wrong.'),
			h('p.muted', e.message),
			h('div.actions', h('a.button#ws-back', { href: '#/' }, 'Back to the workspaces'))));
	}

	// Never loaded (its worker is down, or the controller failed to answer): the page says so,
	// naming the worker, instead of "Loading…", and offers to try again.
	function unreachable(e) {
		const worker = remoteWorker();
		const down = worker && (e.status === 502 || e.status === 504 || e.status === 0);
		ctx.close();
		ctx.setCrumbs([[id, null]]);
		replace(root, h('section.card#ws-unreachable', { 'data-worker': worker ?? '' },
			h('h2', down ? `Worker ${worker} is down` : 'The workspace could not be loaded'),
			h('p', down
				? ['Workspace ', h('span.mono', id), ` is on worker ${worker}, which did not answer.`]
				: ['Workspace ', h('span.mono', id), ' could not be loaded.']),
			h('p.muted#ws-unreachable-error', e.message),
			h('div.actions',
				h('button#ws-retry', { type: 'button', on: { click: () => window.dispatchEvent(new HashChangeEvent('hashchange')) } }, 'Try again'),
				h('a.button#ws-back', { href: '#/' }, 'Back to the workspaces'))));
	}

	// The network row: mode, then address and counters when the worker told them.
	function networkDetails() {
		if (!net) return [h('dt', 'Network'), h('dd#ws-network', networkText(ws))];
		if (net.error) return [h('dt', 'Network'), h('dd#ws-network', ws.network, ' ', h('span.muted', `(${net.error})`))];
		const c = net.counters;
		const rules = net.egress?.allow ?? [];
		return [
			h('dt', 'Network'), h('dd#ws-network', net.mode, net.address ? ` · ${net.address}` : '', net.gateway ? ` via ${net.gateway}` : ''),
			c ? [h('dt', 'Traffic'), h('dd#ws-net-counters',
				`${c.allowed} connections allowed · ${c.denied} denied · DNS ${c.dnsAllowed} answered, ${c.dnsRefused} refused`)] : null,
			net.mode === 'restricted' ? [h('dt', 'Allowed'), h('dd.mono#ws-net-allow', rules.length
				? rules.map((r) => (r.cidr ?? r.domain) + (r.ports ? ':' + r.ports.join(',') : '') + (r.proto ? '/' + r.proto : '')).join('  ')
				: 'nothing (default deny)')] : null,
			net.refused ? [h('dt', 'Refused'), h('dd#ws-net-refused', refusedList(net.refused))] : null,
		];
	}

	// The last destinations the network refused (the API keeps 100), most recent first.
	function refusedList(refused) {
		if (!refused.length) return h('span.muted', 'nothing since the controller started');
		const shown = refused.slice(0, 10);
		return [h('ul.refused', shown.map((d) => h('li', { 'data-dest': refusedDest(d) },
			h('span.mono', refusedDest(d)), ` ×${d.count} · last ${fmtTime(d.lastAt)}`,
			d.class ? h('span.muted', { title: `the worker blocks this class for every workspace; an operator opens it with --network-allow ${d.class}` }, ` · ${d.class}`) : null))),
		refused.length > shown.length ? h('span.muted', `and ${refused.length - shown.length} more (GET …/network)`) : null];
	}

	async function act(what, btn) {
		if (what === 'delete' && !confirm(`Delete workspace ${id}? Its HOME and every run go with it.`)) return;
		if (what === 'restart' && !(await confirmRestart(id, ctx.signal))) return;
		if (btn) btn.disabled = true;
		try {
			if (what === 'delete') {
				await api('DELETE', '/v1/workspaces/' + enc(id));
				location.hash = '#/';
				return;
			}
			// restart, pause, resume: each answers with the workspace
			ws = await api('POST', '/v1/workspaces/' + enc(id) + '/' + what);
			showError(err, null);
			render();
		} catch (e) {
			showError(err, e);
			if (btn) btn.disabled = false;
		}
	}

	// For a tab's "paused" refusal: resumes, redraws the summary; throws the API's error.
	async function resume() {
		ws = await api('POST', '/v1/workspaces/' + enc(id) + '/resume');
		showError(err, null);
		render();
	}

	// What the idle clock does: "pause after 10 min 0 s", or never.
	function idleText() {
		if (!ws.idleTimeoutMs) return 'nothing (no idle timeout)';
		return `${ws.idleAction === 'pause' ? 'pause' : 'stop'} after ${fmtMs(ws.idleTimeoutMs)} idle`;
	}

	// Name and labels, edited as a JSON merge patch (PATCH /v1/workspaces/{id}): a label
	// removed is null, one added or changed its value, the others untouched; the controller's
	// refusal (a name taken: 409, a label it does not take: 400) is shown in the form. The
	// form outlives the summary's redraws, so what is typed stays.
	let editor = null;
	function labelRow(k, v) {
		const row = h('div.label-row',
			h('input.label-key', { type: 'text', value: k, placeholder: 'key', spellcheck: 'false', 'aria-label': 'label key' }),
			h('input.label-value', { type: 'text', value: v, placeholder: 'value', spellcheck: 'false', 'aria-label': 'label value' }),
			h('button.label-remove', { type: 'button', on: { click: () => row.remove() } }, 'Remove'));
		return row;
	}
	function openEditor() {
		const name = h('input#edit-name', { type: 'text', value: ws.name ?? '', placeholder: 'no name', spellcheck: 'false', autocomplete: 'off' });
		const rows = h('div#edit-labels', Object.keys(ws.labels || {}).sort().map((k) => labelRow(k, ws.labels[k])));
		const eerr = h('div.error#edit-error', { hidden: true, role: 'alert' });
		const save = h('button.primary#edit-save', { type: 'submit' }, 'Save');
		editor = h('form.card.edit#ws-edit-form', {
			on: {
				submit: async (ev) => {
					ev.preventDefault();
					let patch;
					try {
						patch = mergePatch(ws, name.value.trim(), [...rows.querySelectorAll('.label-row')]
							.map((r) => [r.querySelector('.label-key').value.trim(), r.querySelector('.label-value').value]));
					} catch (e) {
						showError(eerr, e);
						return;
					}
					if (!patch) {
						closeEditor();
						return;
					}
					save.disabled = true;
					try {
						ws = await api('PATCH', '/v1/workspaces/' + enc(id), patch);
						closeEditor();
						render();
					} catch (e) {
						showError(eerr, e);
					} finally {
						save.disabled = false;
					}
				},
			},
		},
		h('h3', 'Name and labels'),
		h('label.field', h('span.label', 'Name'), name, h('span.hint', 'a-z, 0-9, ".", "_", "-"; unique among your workspaces; empty: none')),
		h('span.label', 'Labels'), rows,
		h('div.actions',
			h('button#edit-add-label', { type: 'button', on: { click: () => rows.append(labelRow('', '')) } }, 'Add label'),
			h('button#edit-cancel', { type: 'button', on: { click: () => { closeEditor(); render(); } } }, 'Cancel'),
			save),
		eerr);
		render();
		name.focus();
	}
	function closeEditor() {
		editor = null;
	}

	function render() {
		const paused = ws.state === 'paused';
		const forkable = ws.state === 'ready' || paused;
		const limits = [ws.cpus ? `${ws.cpus} CPU` : 'CPU unlimited', ws.memoryMb ? `${ws.memoryMb} MB` : 'memory unlimited',
			ws.pidsLimit ? `${ws.pidsLimit} processes` : 'processes unlimited'].join(' · ');
		replace(summary,
			h('div.card-head',
				h('h2', 'Workspace ', h('span.mono#ws-id', ws.id), ' ', h('span#ws-state', badge(ws.state))),
				h('div.actions',
					h('button#ws-edit', { type: 'button', disabled: !!editor, on: { click: () => openEditor() } }, 'Edit name and labels…'),
					// Pause while ready; Resume in its place while paused.
					paused ? h('button.primary#ws-resume', { type: 'button', on: { click: (ev) => act('resume', ev.currentTarget) } }, 'Resume')
						: h('button#ws-pause', {
							type: 'button', disabled: ws.state !== 'ready',
							title: ws.state === 'ready' ? 'freeze every process of the workspace' : `a ${ws.state} workspace cannot be paused`,
							on: { click: (ev) => act('pause', ev.currentTarget) },
						}, 'Pause'),
					h('button#ws-fork', {
						type: 'button', disabled: !forkable,
						title: forkable ? 'new workspaces from a snapshot of this one' : `a ${ws.state} workspace cannot be forked`,
						on: { click: () => openForkDialog(root, ctx, id, () => hooks.reloadSnapshots?.()) },
					}, 'Fork…'),
					h('button#ws-restart', { type: 'button', on: { click: () => act('restart') } }, 'Restart'),
					h('button.danger#ws-delete', { type: 'button', on: { click: () => act('delete') } }, 'Delete'))),
			ws.reason ? h('div.reason', ws.reason) : null,
			h('dl.kv',
				h('dt', 'Name'), h('dd#ws-name', ws.name ?? h('span.muted', 'none')),
				h('dt', 'Labels'), h('dd#ws-labels', labelChips(ws.labels)),
				h('dt', 'Adapter'), h('dd#ws-adapter', ws.adapter),
				ws.adapter === 'container' ? [
					h('dt', 'Image'), h('dd.mono', ws.image ?? '—'),
					h('dt', 'Runtime'), h('dd', ws.runtime ?? '—'),
					networkDetails(),
					h('dt', 'Seccomp'), h('dd.mono', ws.seccompProfile ?? '—'),
				] : [h('dt', 'Network'), h('dd#ws-network', networkText(ws), h('span.muted', ' (the worker\'s own)'))],
				h('dt', 'Limits'), h('dd', limits),
				h('dt', 'Resource use'), h('dd#ws-usage', usageCell('workspace')),
				h('dt', 'Working dir'), h('dd.mono', ws.workdir ?? '—'),
				paused ? [h('dt', 'Paused since'), h('dd#ws-paused-at', fmtTime(ws.pausedAt), ws.pauseReason ? h('span.muted', ` (${ws.pauseReason})`) : null)] : null,
				h('dt', 'When idle'), h('dd#ws-idle', idleText()),
				ws.autoResume !== undefined ? [h('dt', 'Auto-resume'), h('dd#ws-auto-resume', ws.autoResume
					? 'yes: a command, terminal or file write resumes it' : 'no: a command on it while paused is refused')] : null,
				ws.snapshot ? [h('dt', 'From snapshot'), h('dd.mono', ws.snapshot)] : null,
				h('dt', 'Created'), h('dd', fmtTime(ws.createdAt))),
			editor);
	}

	const wsPath = '/v1/workspaces/' + enc(id);
	load();
	// run events too: the refused destinations change while commands run
	liveRefresh(ctx, { workspace: id, types: 'workspace,run' }, () => {
		load();
		timeline.reload();
	});
	startUsageFeed(ctx, wsPath);
	workspaceCharts(ctx, usage, wsPath);
	const timeline = runsTimeline(ctx, usage.appendChild(h('div#ws-runs')), wsPath, base + '/commands');
	const hooks = { workspace: () => ws, resume };
	if (tab === 'commands') commandsTab(body, ctx, wsPath, hooks);
	else if (tab === 'services') servicesTab(body, ctx, wsPath);
	else if (tab === 'files') filesTab(body, ctx, wsPath);
	else if (tab === 'ports') portsTab(body, ctx, wsPath);
	else if (tab === 'snapshots') snapshotsTab(body, ctx, id, hooks);
	else if (tab === 'code') codeTab(body, ctx, wsPath);
	else if (sub) terminalView(body, ctx, wsPath, sub, base);
	else terminalsTab(body, ctx, wsPath, base);
}

// The merge patch from what the editor holds ([key, value] rows), or null when nothing changed.
// Throws on a row it cannot send (no key, a key twice); the rest is the controller's to judge.
export function mergePatch(ws, name, rows) {
	const patch = {};
	if ((name || null) !== (ws.name ?? null)) patch.name = name || null;
	const now = {};
	for (const [k, v] of rows) {
		if (!k && !v) continue;
		if (!k) throw new Error(`the label with value "${v}" has no key`);
		if (k in now) throw new Error(`label "${k}" is there twice`);
		now[k] = v;
	}
	const was = ws.labels || {};
	const labels = {};
	for (const k of Object.keys(was)) if (!(k in now)) labels[k] = null;
	for (const [k, v] of Object.entries(now)) if (was[k] !== v) labels[k] = v;
	if (Object.keys(labels).length) patch.labels = labels;
	return Object.keys(patch).length ? patch : null;
}
