// SPDX-License-Identifier: MIT
// Usage over time, from the usage history (GET …/usage?since=&step=, GET /v1/worker/usage):
// a workspace's CPU and memory with its limits drawn and the worker's totals (uPlot, bundled by
// the build from npm as /ui/vendor/uplot.mjs), a CPU sparkline per workspace in the list (an
// SVG polyline), and a workspace's runs as a timeline (a bar from start to end per run). The
// charts refresh while their view is open and the page visible, and ask nothing otherwise.
// What each chart shows is kept in window.__charts[name] ({x, cpu, cpuLimit, …}) and on its
// element (data-points, data-limit), for a look from the console or a test.
import { api, enc } from './api.js';
import { h, replace, fmtBytes, fmtMs, fmtTime } from './dom.js';

const SPAN_MS = 15 * 60 * 1000; // the charts' window
const REFRESH_MS = 3000;
const SPARK_SPAN = '10m';
const SPARK_STEP_MS = 30000;
const SPARK_MAX_AGE_MS = 15000; // a row's sparkline is asked again at most this often
const SPARK_CONCURRENCY = 4;

const shown = (window.__charts = window.__charts || {});

let uplot = null;
function loadUPlot() {
	if (!uplot) {
		uplot = import('./vendor/uplot.mjs').then((m) => {
			if (!document.querySelector('link[data-uplot]')) {
				document.head.append(h('link', { rel: 'stylesheet', href: '/ui/vendor/uPlot.min.css', 'data-uplot': '' }));
			}
			return m.default;
		}).catch(() => null);
	}
	return uplot;
}

// A point's time in seconds (uPlot's x): "t" is RFC 3339 or milliseconds.
function seconds(t) {
	return (typeof t === 'number' ? t : Date.parse(t)) / 1000;
}

// The step that keeps a window at about 300 points, never below the sampling interval.
function stepFor(intervalMs) {
	return Math.max(intervalMs || 0, Math.ceil(SPAN_MS / 300 / 100) * 100);
}

// The memory axis' steps: powers of 2 (128 MiB, 256 MiB), not of 10.
const POW2 = Array.from({ length: 50 }, (_, i) => 2 ** i);

// An axis label: "256 MiB", "1.5 GiB".
function shortBytes(n) {
	const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
	let i = 0;
	while (n >= 1024 && i < units.length - 1) {
		n /= 1024;
		i++;
	}
	return `${n >= 10 || Number.isInteger(n) ? Math.round(n) : n.toFixed(1)} ${units[i]}`;
}

const fmtCores = (v) => (v === null || v === undefined ? '—' : v < 10 ? v.toFixed(2) : v.toFixed(1));

// One uPlot chart in 'box': a value series and, when 'limit' is set, a dashed line at it.
function lineChart(UPlot, box, { label, color, fmt, axisFmt = fmt, incrs, limitLabel, floor }) {
	const opts = {
		width: Math.max(200, box.clientWidth || 300),
		height: 160,
		cursor: { drag: { x: false, y: false } },
		legend: { live: true },
		scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max((max || 0) * 1.1, u.__floor || 0, floor)] } },
		axes: [{}, { values: (u, vals) => vals.map((v) => axisFmt(v)), size: 70, ...(incrs ? { incrs } : {}) }],
		series: [
			{},
			{ label, stroke: color, fill: color + '22', width: 1.5, value: (u, v) => fmt(v) },
			{ label: limitLabel, stroke: '#c0392b', dash: [6, 4], width: 1, points: { show: false }, value: (u, v) => fmt(v) },
		],
	};
	const u = new UPlot(opts, [[], [], []], box);
	const ro = new ResizeObserver(() => {
		const w = box.clientWidth;
		if (w > 0 && Math.abs(w - u.width) > 2) u.setSize({ width: w, height: 160 });
	});
	ro.observe(box);
	return { u, close: () => { ro.disconnect(); u.destroy(); } };
}

// The data of a chart as uPlot takes it, and as window.__charts keeps it.
function setChart(name, box, chart, x, values, limit) {
	const lim = limit ? x.map(() => limit) : x.map(() => null);
	chart.u.__floor = limit ? limit * 1.1 : 0;
	chart.u.setData([x, values, lim]);
	shown[name] = { x: x.map((s) => s * 1000), values, limit: limit ?? null };
	box.dataset.points = String(x.length);
	box.dataset.limit = limit ? String(limit) : '';
	box.dataset.last = values.length ? String(values[values.length - 1]) : '';
}

// A CPU chart and a memory chart of a usage history, live while ctx lives. 'path' answers
// {samples, intervalMs, limits?}; limitsOf(answer) gives {cpus, memoryBytes} (null: none drawn).
export function usageCharts(ctx, root, { name, path, limitsOf, title }) {
	const cpuBox = h('div.chart#' + name + '-cpu', { 'data-chart': name + '-cpu' });
	const memBox = h('div.chart#' + name + '-memory', { 'data-chart': name + '-memory' });
	const note = h('p.muted.chart-note', 'Loading the usage history…');
	replace(root,
		h('div.card-head', h('h2', title), h('span.muted', 'last 15 min, live')),
		note,
		h('div.charts',
			h('figure.chart-fig', h('figcaption', 'CPU (cores)'), cpuBox),
			h('figure.chart-fig', h('figcaption', 'Memory'), memBox)));
	let charts = null, step = null, busy = false, stopped = false;
	ctx.onClose(() => {
		stopped = true;
		charts?.cpu.close();
		charts?.mem.close();
		delete shown[name + '-cpu'];
		delete shown[name + '-memory'];
	});
	async function tick() {
		if (busy || stopped || document.hidden || !ctx.alive) return;
		busy = true;
		try {
			// since as a duration: the controller's clock, not this browser's
			const q = `?since=${SPAN_MS / 60000}m&step=${step || stepFor(0)}`;
			const [UPlot, a] = await Promise.all([loadUPlot(), api('GET', path + q, undefined, { signal: ctx.signal })]);
			if (stopped) return;
			if (!Array.isArray(a.samples)) {
				replace(note, 'This worker keeps no usage history.');
				stopped = true;
				return;
			}
			if (!UPlot) {
				replace(note, 'The charts need uPlot, which this build of the dashboard lacks (npm ci in web/).');
				stopped = true;
				return;
			}
			step = stepFor(a.intervalMs);
			const pts = [...a.samples].sort((p, q2) => seconds(p.t) - seconds(q2.t));
			const lim = limitsOf(a) || {};
			if (!charts) {
				charts = {
					cpu: lineChart(UPlot, cpuBox, { label: 'CPU', color: '#2f6fdf', fmt: fmtCores, floor: 0.1, limitLabel: lim.cpus ? 'limit' : 'no limit' }),
					mem: lineChart(UPlot, memBox, { label: 'memory', color: '#2a9d5c', fmt: (v) => (v === null || v === undefined ? '—' : fmtBytes(Math.round(v))), axisFmt: shortBytes, incrs: POW2, floor: 1024 * 1024, limitLabel: lim.memoryBytes ? 'limit' : 'no limit' }),
				};
			}
			const x = pts.map((p) => seconds(p.t));
			setChart(name + '-cpu', cpuBox, charts.cpu, x, pts.map((p) => p.cpu ?? null), lim.cpus || null);
			setChart(name + '-memory', memBox, charts.mem, x, pts.map((p) => p.memoryBytes ?? null), lim.memoryBytes || null);
			const last = pts[pts.length - 1];
			replace(note, pts.length
				? `Now ${fmtCores(last.cpu)} cores${lim.cpus ? ` of ${lim.cpus}` : ''} · ${fmtBytes(last.memoryBytes)}${lim.memoryBytes ? ` of ${fmtBytes(lim.memoryBytes)}` : ''} · a point every ${fmtMs(step)}`
				: 'No samples yet: the controller samples every ' + fmtMs(a.intervalMs) + '.');
		} catch (e) {
			if (e.name === 'AbortError') return;
			replace(note, `The usage history could not be read: ${e.message}`);
		} finally {
			busy = false;
		}
	}
	const onVisible = () => {
		if (!document.hidden) tick();
	};
	document.addEventListener('visibilitychange', onVisible);
	ctx.onClose(() => document.removeEventListener('visibilitychange', onVisible));
	ctx.every(REFRESH_MS, tick);
	tick();
}

// The usage section of a workspace: its charts with its limits.
export function workspaceCharts(ctx, root, wsPath) {
	usageCharts(ctx, root, {
		name: 'ws', path: wsPath + '/usage', title: 'Usage',
		limitsOf: (a) => ({ cpus: a.limits?.cpus ?? null, memoryBytes: a.limits?.memoryBytes ?? null }),
	});
}

// The worker's totals, its CPUs and memory as the limits.
export function workerCharts(ctx, root, capacity) {
	usageCharts(ctx, root, {
		name: 'worker', path: '/v1/worker/usage', title: 'Usage of every workspace',
		limitsOf: () => ({ cpus: capacity()?.cpus || null, memoryBytes: capacity()?.memoryBytes?.total || null }),
	});
}

// ---- the runs timeline -----------------------------------------------------------------

function runKey(run) {
	if (run.status === 'exited') return run.exitCode === 0 ? 'ok' : 'bad';
	if (run.status === 'running') return 'running';
	return ['killed', 'timed_out', 'failed_to_start', 'lost'].includes(run.status) ? 'bad' : 'neutral';
}

// A workspace's last runs, each a bar from its start to its end (now while it runs), on as few
// lanes as keep overlapping runs apart. reload() asks the list again; the bars of running runs
// grow on every tick.
export function runsTimeline(ctx, root, wsPath, commandsHref) {
	const track = h('div.timeline#runs-timeline');
	const axis = h('div.timeline-axis.muted');
	replace(root, h('h3', 'Runs'), track, axis);
	let runs = null, busy = false;
	async function reload() {
		if (busy || !ctx.alive) return;
		busy = true;
		try {
			runs = (await api('GET', wsPath + '/commands?limit=50', undefined, { signal: ctx.signal })).commands || [];
			draw();
		} catch (e) {
			if (e.name !== 'AbortError') replace(track, h('span.muted', `The runs could not be listed: ${e.message}`));
		} finally {
			busy = false;
		}
	}
	function draw() {
		if (!runs) return;
		if (!runs.length) {
			replace(track, h('span.muted', 'No runs yet.'));
			replace(axis);
			delete shown.runs;
			return;
		}
		const now = Date.now();
		const spans = runs.map((r) => {
			const start = Date.parse(r.startedAt || r.createdAt);
			const end = r.status === 'running' ? now : r.endedAt ? Date.parse(r.endedAt) : start + (r.durationMs ?? 0);
			return { r, start, end: Math.max(end, start) };
		}).filter((s) => !isNaN(s.start)).sort((a, b) => a.start - b.start);
		const t0 = spans[0]?.start ?? now, t1 = Math.max(now, ...spans.map((s) => s.end));
		const width = Math.max(1, t1 - t0);
		const lanes = [];
		for (const s of spans) {
			let lane = lanes.findIndex((end) => end <= s.start);
			if (lane < 0) lane = lanes.push(0) - 1;
			lanes[lane] = s.end;
			s.lane = lane;
		}
		const bars = spans.map((s) => {
			const bar = h('a.run-bar', {
				href: commandsHref,
				class: runKey(s.r), 'data-run': s.r.id, 'data-status': s.r.status,
				title: `${s.r.command}\n${s.r.status}${s.r.exitCode !== null && s.r.exitCode !== undefined ? ' ' + s.r.exitCode : ''} · ${fmtMs(s.end - s.start)} · ${fmtTime(s.r.startedAt || s.r.createdAt)}`,
			});
			bar.style.left = `${((s.start - t0) / width) * 100}%`;
			bar.style.width = `${((s.end - s.start) / width) * 100}%`;
			bar.style.top = `${s.lane * 14}px`;
			return bar;
		});
		track.style.height = `${Math.max(1, lanes.length) * 14}px`;
		replace(track, bars);
		replace(axis, h('span', fmtTime(new Date(t0).toISOString())), h('span', `${spans.length} run${spans.length === 1 ? '' : 's'}`), h('span', 'now'));
		shown.runs = spans.map((s) => ({ id: s.r.id, status: s.r.status, start: s.start, end: s.end, lane: s.lane }));
	}
	ctx.onClose(() => delete shown.runs);
	ctx.every(REFRESH_MS, () => {
		if (!document.hidden && runs?.some((r) => r.status === 'running')) draw();
	});
	reload();
	return { reload };
}

// ---- sparklines ------------------------------------------------------------------------

const SVG = 'http://www.w3.org/2000/svg';
const sparkCache = new Map(); // workspace id → {at, cpu: [..], cpus}

// A cell showing the CPU of workspace 'id' over the last minutes; startSparklines() fills it.
export function sparkCell(id, tag = 'td.spark') {
	const el = h(tag, { 'data-spark': id });
	drawSpark(el);
	return el;
}

function drawSpark(el) {
	const c = sparkCache.get(el.dataset.spark);
	if (!c || !c.cpu.length) {
		replace(el, h('span.muted', c ? '—' : ''));
		el.dataset.points = c ? '0' : '';
		return;
	}
	const w = 80, ht = 20;
	const top = Math.max(c.cpus || 0, ...c.cpu, 0.05);
	const n = c.cpu.length;
	const pts = c.cpu.map((v, i) => `${n === 1 ? w : ((i / (n - 1)) * w).toFixed(1)},${(ht - 1 - (v / top) * (ht - 2)).toFixed(1)}`).join(' ');
	const svg = document.createElementNS(SVG, 'svg');
	svg.setAttribute('viewBox', `0 0 ${w} ${ht}`);
	svg.setAttribute('width', String(w));
	svg.setAttribute('height', String(ht));
	svg.setAttribute('class', 'sparkline');
	svg.setAttribute('role', 'img');
	const last = c.cpu[n - 1];
	svg.setAttribute('aria-label', `CPU over the last ${SPARK_SPAN}: now ${fmtCores(last)} cores, peak ${fmtCores(Math.max(...c.cpu))}`);
	const line = document.createElementNS(SVG, 'polyline');
	line.setAttribute('points', pts);
	svg.append(line);
	const title = document.createElementNS(SVG, 'title');
	title.textContent = svg.getAttribute('aria-label');
	svg.append(title);
	replace(el, svg, h('span.spark-now', fmtCores(last)));
	el.dataset.points = String(n);
	el.dataset.last = String(last);
}

// Keeps every sparkline cell on the page current: a cell in view whose data is older than
// SPARK_MAX_AGE_MS is asked again (a few at a time); cells out of view and a hidden page ask
// nothing.
export function startSparklines(ctx) {
	const inFlight = new Set();
	function visible(el) {
		const r = el.getBoundingClientRect();
		return r.width > 0 && r.bottom > 0 && r.top < window.innerHeight;
	}
	async function fetchOne(id) {
		inFlight.add(id);
		try {
			const a = await api('GET', `/v1/workspaces/${enc(id)}/usage?since=${SPARK_SPAN}&step=${SPARK_STEP_MS}`, undefined, { signal: ctx.signal });
			const pts = Array.isArray(a.samples) ? [...a.samples].sort((p, q) => seconds(p.t) - seconds(q.t)) : [];
			sparkCache.set(id, { at: Date.now(), cpu: pts.map((p) => p.cpu ?? 0), cpus: a.limits?.cpus ?? null });
		} catch (e) {
			if (e.name === 'AbortError') return;
			sparkCache.set(id, { at: Date.now(), cpu: [], cpus: null });
		} finally {
			inFlight.delete(id);
		}
		for (const el of document.querySelectorAll('[data-spark]')) if (el.dataset.spark === id) drawSpark(el);
	}
	function tick() {
		if (document.hidden || !ctx.alive) return;
		const now = Date.now();
		for (const el of document.querySelectorAll('[data-spark]')) {
			const id = el.dataset.spark;
			const c = sparkCache.get(id);
			if (inFlight.size >= SPARK_CONCURRENCY) break;
			if (inFlight.has(id) || (c && now - c.at < SPARK_MAX_AGE_MS) || !visible(el)) continue;
			fetchOne(id);
		}
	}
	const onVisible = () => {
		if (!document.hidden) tick();
	};
	document.addEventListener('visibilitychange', onVisible);
	window.addEventListener('scroll', tick, { passive: true });
	ctx.onClose(() => {
		document.removeEventListener('visibilitychange', onVisible);
		window.removeEventListener('scroll', tick);
	});
	ctx.every(1000, tick);
	return { tick };
}
