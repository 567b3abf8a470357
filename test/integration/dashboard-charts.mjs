// SPDX-License-Identifier: MIT
// The dashboard's usage charts in headless Chromium (Debian's, through npm's playwright-core):
//
//   node dashboard-charts.mjs BASE_URL TOKEN BUSY_WS IDLE_WS SHOT_DIR
//
// BUSY_WS is a host workspace (1 CPU, 256 MiB) whose service "spin" runs CPU loops and whose
// service "ticker" prints a line every 0.2 s, with some runs behind it; IDLE_WS one that runs
// nothing. The controller samples every 200 ms. Reads what each chart shows from the page
// (window.__charts, the elements' data-*), the runs timeline's bars, where the live output of a
// started run is, how a running service's byte count moves while shown, what is asked while
// the page is hidden; screenshots in SHOT_DIR. One JSON line on stdout: {ok, step, error,
// ...facts}; the caller asserts the facts.
import fs from 'node:fs';
import path from 'node:path';
import { launch, scriptRun } from './dashboard-lib.mjs';

const [base, token, busy, idle, shotDir] = process.argv.slice(2);
const result = { ok: false, step: 'start', console: [], shots: [] };
// How long a step waits for the state it needs: far beyond what it takes on a loaded machine.
const T = 60000;

const { finish, step, waitState, shot } = scriptRun(result, T, shotDir);

const chartOf = (name) => window.__charts?.[name] ?? null;

// The chart's data against the API's own answer to the query the chart made (asked again now):
// every point the chart shows at a time the API has, but its newest two (their buckets may
// still be filling), must hold the API's value there. {compared, mismatches: [{t, chart, api}]}.
const chartQueries = new Map(); // path → the last query string the page asked with since=15m
async function matchApi(chart, pathname) {
	const q = chartQueries.get(pathname);
	if (!chart || !q) return { compared: 0, mismatches: [], why: `no chart or no query for ${pathname}` };
	const res = await fetch(base + pathname + q, { headers: { Authorization: 'Bearer ' + token } });
	const a = await res.json();
	const byT = new Map((a.samples || []).map((p) => [Date.parse(p.t), p.cpu]));
	const out = { compared: 0, mismatches: [] };
	chart.x.slice(0, -2).forEach((x, i) => {
		const t = Math.round(x); // the chart keeps seconds: back to the API's milliseconds
		if (!byT.has(t)) return;
		out.compared++;
		if (Math.abs(byT.get(t) - chart.values[i]) > 1e-9) out.mismatches.push({ t, chart: chart.values[i], api: byT.get(t) });
	});
	return out;
}

let browser;
try {
	fs.mkdirSync(shotDir, { recursive: true });
	step('launch');
	browser = await launch();
	const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
	context.setDefaultTimeout(T);
	const page = await context.newPage();
	page.on('console', (m) => {
		if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) result.console.push(m.text().slice(0, 300));
	});
	page.on('pageerror', (e) => result.console.push('pageerror: ' + String(e.message).slice(0, 300)));
	const history = [];
	page.on('request', (r) => {
		const u = new URL(r.url());
		if (u.searchParams.has('since')) history.push(u.pathname);
		if (u.searchParams.get('since') === '15m') chartQueries.set(u.pathname, u.search);
	});

	step('sign in; the worker page: its totals and a sparkline per workspace');
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token');
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await page.waitForSelector('#ws-table');
	// How much CPU the loop gets depends on what else the machine runs: what is waited for and
	// asserted is what the charts show (the API's points) and how busy and idle compare.
	await waitState(page, 'the worker chart with 5 points, its newest 3 above 0 (the loop runs)',
		() => {
			const c = window.__charts?.['worker-cpu'];
			return c && c.values.length >= 5 && c.values.slice(-3).every((v) => v > 0);
		}, null, () => window.__charts?.['worker-cpu'] ?? null);
	result.worker = await page.evaluate(chartOf, 'worker-cpu');
	result.workerMemory = await page.evaluate(chartOf, 'worker-memory');
	result.workerMatch = await matchApi(result.worker, '/v1/worker/usage');
	await waitState(page, 'a sparkline per workspace, the busy one above 0',
		(ids) => ids.every((id) => Number(document.querySelector(`td[data-spark="${id}"]`)?.dataset.points) > 0) &&
			Number(document.querySelector(`td[data-spark="${ids[0]}"]`).dataset.last) > 0,
		[busy, idle], (ids) => ids.map((id) => ({ ...document.querySelector(`td[data-spark="${id}"]`)?.dataset })));
	result.sparks = await page.evaluate((ids) => ids.map((id) => {
		const el = document.querySelector(`td[data-spark="${id}"]`);
		return { id, points: Number(el.dataset.points), last: Number(el.dataset.last), svg: !!el.querySelector('svg polyline') };
	}), [busy, idle]);
	await shot(page, 'worker');

	step('the busy workspace: CPU and memory with their limits');
	await page.evaluate((h) => { location.hash = h; }, `#/w/${busy}/commands`);
	await page.waitForSelector('#ws-charts .chart');
	await waitState(page, 'the workspace chart with 5 points, its newest 3 above 0',
		(id) => {
			const v = window.__charts?.['ws-cpu']?.values || [];
			return document.querySelector('#ws-id')?.textContent === id && v.length >= 5 && v.slice(-3).every((x) => x > 0);
		}, busy, () => window.__charts?.['ws-cpu'] ?? document.querySelector('#ws-charts')?.textContent);
	result.busyCpu = await page.evaluate(chartOf, 'ws-cpu');
	result.busyMatch = await matchApi(result.busyCpu, `/v1/workspaces/${busy}/usage`);
	result.busyMemory = await page.evaluate(chartOf, 'ws-memory');
	result.busyCanvas = await page.$$eval('#ws-charts canvas', (cs) => cs.map((c) => c.width));
	result.busyLegend = await page.$$eval('#ws-cpu .u-legend .u-series', (els) => els.map((e) => e.textContent.trim()));
	result.busyNote = (await page.textContent('#ws-charts .chart-note')).trim();

	step('the runs timeline');
	await waitState(page, 'a bar per run', () => document.querySelectorAll('#runs-timeline .run-bar').length > 0,
		null, () => document.querySelector('#ws-runs')?.textContent);
	result.bars = await page.$$eval('#runs-timeline .run-bar', (els) => els.map((e) => ({ id: e.dataset.run, status: e.dataset.status, cls: e.className, width: e.getBoundingClientRect().width })));
	await shot(page, 'workspace-busy');
	result.shot = path.join(shotDir, 'workspace-busy.png');

	step('a run started from the form: its live output in view, its byte count current');
	await page.evaluate(() => window.scrollTo(0, 0));
	await page.fill('#cmd', 'for i in $(seq 1 40); do echo line $i; sleep 0.1; done');
	await page.click('#run');
	await page.waitForSelector('#run-detail .logview');
	result.outputRect = await page.$eval('#run-detail .logview', (e) => {
		const r = e.getBoundingClientRect();
		return { top: Math.round(r.top), bottom: Math.round(r.bottom), innerHeight: window.innerHeight };
	});
	// What the count says once it counts bytes while running (or at the run's end, when it
	// never did: the caller's assertion names it).
	// (the facts' "Output" row)
	await page.waitForFunction(() => {
		const fact = [...document.querySelectorAll('#run-status dt')].find((e) => e.textContent === 'Output')?.nextElementSibling;
		return /stdout [1-9].* so far/.test(fact?.textContent || '') || document.querySelector('#run-status')?.dataset.status !== 'running';
	}, null, { timeout: T, polling: 100 });
	result.runBytesLive = await page.evaluate(() =>
		[...document.querySelectorAll('#run-status dt')].find((e) => e.textContent === 'Output')?.nextElementSibling?.textContent.trim() ?? null);
	const runId = (await page.textContent('#run-detail h2 .mono')).trim();
	await waitState(page, 'the new run on the timeline', (id) => !!document.querySelector(`#runs-timeline .run-bar[data-run="${id}"]`),
		runId, () => [...document.querySelectorAll('#runs-timeline .run-bar')].map((e) => e.dataset.run));
	result.barsAfterRun = await page.$$eval('#runs-timeline .run-bar', (els) => els.length);
	result.newRun = runId;

	step('a running service: its byte count moves while shown');
	await page.evaluate((h) => { location.hash = h; }, `#/w/${busy}/services`);
	await page.waitForSelector('#svc-table tr[data-name="ticker"]');
	await page.click('#svc-table tr[data-name="ticker"] a');
	await page.waitForSelector('#svc-detail .attempt.running');
	const seen = [];
	const until = Date.now() + 8000;
	while (Date.now() < until) {
		const v = await page.$eval('#svc-detail .attempt.running', (e) => /out [^,]*, err [^ ]* [^ ]* so far/.exec(e.textContent)?.[0]).catch(() => null);
		if (v && seen[seen.length - 1] !== v) seen.push(v);
		await page.waitForTimeout(200);
	}
	result.serviceCounts = seen;

	step('a service started from the form: its logs in view');
	await page.evaluate(() => window.scrollTo(0, 0));
	await page.fill('#svc-name', 'hello');
	await page.fill('#svc-command', 'echo hello; sleep 600');
	await page.click('#svc-start');
	await waitState(page, 'the new service shown', () => /hello/.test(document.querySelector('#svc-detail h2')?.textContent || ''),
		null, () => document.querySelector('#svc-detail')?.textContent);
	await page.waitForFunction(() => {
		const r = document.querySelector('#svc-detail .logview')?.getBoundingClientRect();
		return r && r.top >= 0 && r.bottom <= window.innerHeight;
	}, null, { timeout: 5000, polling: 100 }).catch(() => {});
	result.serviceLogsRect = await page.$eval('#svc-detail .logview', (e) => {
		const r = e.getBoundingClientRect();
		return { top: Math.round(r.top), bottom: Math.round(r.bottom), innerHeight: window.innerHeight };
	});

	step('the idle workspace: its chart near 0');
	await page.evaluate((h) => { location.hash = h; }, `#/w/${idle}/commands`);
	await waitState(page, 'the idle chart with 3 points', (id) => (window.__charts?.['ws-cpu']?.values || []).length >= 3 && document.querySelector('#ws-id')?.textContent === id,
		idle, () => window.__charts?.['ws-cpu'] ?? null);
	result.idleCpu = await page.evaluate(chartOf, 'ws-cpu');
	result.idleMatch = await matchApi(result.idleCpu, `/v1/workspaces/${idle}/usage`);
	result.idleRuns = await page.$$eval('#runs-timeline .run-bar', (els) => els.length);

	step('nothing asked while the page is hidden, asked again when shown');
	await page.evaluate(() => {
		Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
		Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
		document.dispatchEvent(new Event('visibilitychange'));
	});
	await page.waitForTimeout(100); // a request already under way is let through
	const hiddenAt = history.length;
	// The clock: the usage feed's requests go on being skipped too; wait over three of the
	// charts' 3 s intervals by the page's own time.
	await page.waitForFunction(() => new Promise((r) => setTimeout(() => r(true), 10000)), null, { timeout: T });
	result.historyWhileHidden = history.length - hiddenAt;
	await page.evaluate(() => {
		delete document.hidden;
		delete document.visibilityState;
		document.dispatchEvent(new Event('visibilitychange'));
	});
	await page.waitForRequest((r) => new URL(r.url()).searchParams.has('since'), { timeout: T });
	result.historyWhenShown = true;

	step('leaving the workspace ends its charts');
	await page.evaluate(() => { location.hash = '#/'; });
	await page.waitForSelector('#ws-table');
	result.chartsAfterLeaving = await page.evaluate(() => Object.keys(window.__charts || {}).filter((k) => k.startsWith('ws-') || k === 'runs'));

	step('done');
	result.ok = true;
	await browser.close();
	finish(0);
} catch (e) {
	result.error = String(e.message || e).slice(0, 2000);
	try {
		await browser?.close();
	} catch {}
	finish(1);
}
