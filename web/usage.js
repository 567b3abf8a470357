// SPDX-License-Identifier: MIT
// Live resource use (GET …/usage) while the page is open and visible: the workspace's cpu and
// memory, and each running command's and service's. Any element made by usageCell() shows the
// latest numbers of what it names; the feed fills them after every sample.
import { api } from './api.js';
import { h, replace, fmtMs, fmtBytes } from './dom.js';

const INTERVAL_MS = 2000;

let latest = null; // the newest sample of the workspace on screen, with its cpu rates

// An element showing the use of 'workspace', 'run:ID' or 'service:NAME'.
export function usageCell(key, tag = 'span.usage') {
	const el = h(tag, { 'data-usage': key });
	fill(el);
	return el;
}

function entryOf(key) {
	if (!latest) return null;
	if (key === 'workspace') return latest;
	const [kind, id] = [key.slice(0, key.indexOf(':')), key.slice(key.indexOf(':') + 1)];
	if (kind === 'run') return latest.commands.find((c) => c.id === id) || null;
	if (kind === 'service') return latest.services.find((s) => s.name === id) || null;
	return null;
}

function pct(rate) {
	return rate === undefined || rate === null ? '' : ` (${Math.round(rate * 100)}% of a CPU)`;
}

function fill(el) {
	const e = entryOf(el.dataset.usage);
	if (!e) {
		replace(el, el.dataset.usage === 'workspace' ? '—' : '');
		el.dataset.cpuMs = el.dataset.memoryBytes = '';
		return;
	}
	el.dataset.cpuMs = String(e.cpuMs);
	el.dataset.memoryBytes = String(e.memoryBytes);
	if (el.dataset.usage === 'workspace') {
		const mem = e.memoryLimitBytes ? `${fmtBytes(e.memoryBytes)} of ${fmtBytes(e.memoryLimitBytes)}` : fmtBytes(e.memoryBytes);
		const cpu = `${fmtMs(e.cpuMs)} CPU${pct(e.rate)}${e.cpus ? `, limit ${e.cpus} CPU` : ''}`;
		replace(el, `${cpu} · memory ${mem}`);
	} else {
		replace(el, `${fmtMs(e.cpuMs)} CPU${pct(e.rate)} · ${fmtBytes(e.memoryBytes)}`);
	}
}

function fillAll() {
	for (const el of document.querySelectorAll('[data-usage]')) fill(el);
}

// The cpu share since the previous sample, per entry.
function withRates(s, prev) {
	const dt = prev ? Date.parse(s.sampledAt) - Date.parse(prev.sampledAt) : 0;
	const rate = (now, before) => (before && dt > 0 ? Math.max(0, now.cpuMs - before.cpuMs) / dt : null);
	s.rate = rate(s, prev);
	for (const c of s.commands) c.rate = rate(c, prev?.commands.find((p) => p.id === c.id));
	for (const v of s.services) v.rate = rate(v, prev?.services.find((p) => p.name === v.name && p.attempt === v.attempt));
	return s;
}

// Polls while ctx lives and the page is visible; a hidden page asks nothing, and asks at once
// when shown again. onError(e) gets a failure (409: not ready), onSample() every sample.
export function startUsageFeed(ctx, wsPath, { onError, onSample } = {}) {
	latest = null;
	let busy = false;
	async function tick() {
		if (busy || document.hidden || !ctx.alive) return;
		busy = true;
		try {
			const s = await api('GET', wsPath + '/usage', undefined, { signal: ctx.signal });
			latest = withRates(s, latest);
			fillAll();
			onSample?.(latest);
		} catch (e) {
			if (e.name === 'AbortError') return;
			latest = null;
			fillAll();
			onError?.(e);
		} finally {
			busy = false;
		}
	}
	const onVisible = () => {
		if (!document.hidden) tick();
	};
	document.addEventListener('visibilitychange', onVisible);
	ctx.onClose(() => {
		document.removeEventListener('visibilitychange', onVisible);
		latest = null;
	});
	ctx.every(INTERVAL_MS, tick);
	tick();
}
