// SPDX-License-Identifier: MIT
// The dashboard as a place to work, in headless Chromium (Debian's, through npm's
// playwright-core), the way a person would use it:
//
//   node dashboard-work.mjs BASE_URL TOKEN WS GONE_WS SHOT_DIR
//
// WS is a ready host workspace (512 MiB limit) the page works in; GONE_WS one that is deleted
// while its page is open. Checks the walk-through's fixes (service logs on another service, a
// gone or unknown workspace, the restart confirmation, an ended terminal, the terminal's size,
// the elapsed clock, timeouts in seconds), live resource use (and none asked while the page is
// hidden), the log viewer (filter, search, copy, download, pause and resume of auto-scroll),
// every page at 390×844 without horizontal scroll, a screenshot of each page at both sizes in
// SHOT_DIR, and that no request leaves the controller's origin. One JSON line on stdout: {ok,
// step, error, ...facts}; the caller asserts the facts and checks the rest through the API.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [base, token, ws, goneWs, shotDir] = process.argv.slice(2);
const origin = new URL(base).origin;
const result = { ok: false, step: 'start', console: [], foreignRequests: [], requests: 0, shots: [] };
// How long a step waits for the state it needs: far beyond what it takes on a loaded machine
// (a second or two at most), so that only a state that never comes reaches it.
const T = 60000;

function finish(code) {
	fs.writeSync(1, JSON.stringify(result) + '\n');
	process.exit(code);
}

const t0 = Date.now();
let restartBegun = false;
function step(name) {
	result.step = name;
	process.stderr.write(`# step: ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)\n`);
}

async function apiCall(method, p, body) {
	const res = await fetch(base + p, {
		method,
		headers: { Authorization: 'Bearer ' + token, ...(body ? { 'Content-Type': 'application/json' } : {}) },
		body: body ? JSON.stringify(body) : undefined,
	});
	const text = await res.text();
	return { status: res.status, body: text ? JSON.parse(text) : null };
}

// Counts what a view keeps running: intervals, WebSockets, event streams (fetch with
// Accept: text/event-stream) whose signal is not aborted.
function instrument() {
	const intervals = new Set();
	const si = window.setInterval, ci = window.clearInterval;
	window.setInterval = (...a) => {
		const id = si(...a);
		intervals.add(id);
		return id;
	};
	window.clearInterval = (id) => {
		intervals.delete(id);
		return ci(id);
	};
	const sockets = [];
	const WS = window.WebSocket;
	window.WebSocket = class extends WS {
		constructor(...a) {
			super(...a);
			sockets.push(this);
			// What each socket received, for the report of a failed step.
			this.received = { messages: 0, bytes: 0 };
			this.addEventListener('message', (m) => {
				this.received.messages++;
				this.received.bytes += typeof m.data === 'string' ? m.data.length : m.data.byteLength;
			});
		}
	};
	const streams = [];
	const f = window.fetch;
	window.fetch = (input, init = {}) => {
		const accept = init.headers && (init.headers.Accept || init.headers.accept);
		if (accept === 'text/event-stream') streams.push(init.signal || { aborted: false });
		return f(input, init);
	};
	window.__received = () => sockets.map((s) => ({ url: s.url.replace(/^.*\/v1\//, ''), state: s.readyState, ...s.received }));
	window.__running = () => ({
		intervals: intervals.size,
		sockets: sockets.filter((s) => s.readyState === 0 || s.readyState === 1).length,
		streams: streams.filter((s) => !s.aborted).length,
	});
}

async function newContext(browser, viewport) {
	const context = await browser.newContext({ viewport, acceptDownloads: true });
	context.setDefaultTimeout(T); // clicks, fills, navigations: the same bound as every wait
	await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
	await context.addInitScript(instrument);
	context.on('request', (r) => {
		result.requests++;
		let o;
		try {
			o = new URL(r.url()).origin;
		} catch {
			o = 'unparsable';
		}
		// blob: URLs (downloads) carry the page's origin; anything else must be ours.
		if (o !== origin) result.foreignRequests.push(r.url().slice(0, 200));
	});
	return context;
}

async function newPage(context) {
	const page = await context.newPage();
	page.on('console', (m) => {
		// The API's 404s and 409s are expected here (a deleted workspace); any other error is not.
		if (/status of (404|409) \(/.test(m.text())) return;
		// A 503 is judged by its response (below), which names the request.
		if (/status of 503 \(/.test(m.text())) return;
		if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) result.console.push(m.text().slice(0, 300));
	});
	// While and after the workspace restarts its agent is away for a moment: a resource-use poll
	// then is answered 503 (agent not connected), as the API says. Any other 503 is an error.
	page.on('response', (r) => {
		if (r.status() !== 503) return;
		const p = new URL(r.url()).pathname;
		if (restartBegun && p === `/v1/workspaces/${ws}/usage`) return;
		result.console.push(`503 from ${p} at "${result.step}"`);
	});
	page.on('pageerror', (e) => result.console.push('pageerror: ' + String(e.message).slice(0, 300)));
	page.on('crash', () => result.console.push('the page crashed'));
	page.on('framenavigated', (f) => { if (f === page.mainFrame()) (result.navigations ??= []).push(f.url().replace(base, '')); });
	return page;
}

async function signIn(page) {
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token', { timeout: T });
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await page.waitForSelector('#worker-name', { timeout: T });
}

// Waits for fn(arg) to hold in the page; when it does not within T, the error says what was
// awaited and what the page showed then (seen(arg)).
async function waitState(page, what, fn, arg, seen) {
	try {
		await page.waitForFunction(fn, arg, { timeout: T });
	} catch (e) {
		let saw;
		try {
			saw = JSON.stringify(await page.evaluate(seen, arg));
		} catch (e2) {
			saw = `nothing readable (${e2.message.split('\n')[0]})`;
		}
		throw new Error(`${what}: not within ${T / 1000} s; the page showed ${saw} (${e.message.split('\n')[0]})`);
	}
}

// Polls fn() (in node) every 50 ms until ok(value), T at most; returns the last value, for the
// caller to assert.
async function settle(page, fn, ok) {
	const end = Date.now() + T;
	for (;;) {
		const v = await fn();
		if (ok(v) || Date.now() > end) return v;
		await page.waitForTimeout(50);
	}
}

async function go(page, hash, selector) {
	await page.evaluate((h) => { location.hash = h; }, hash);
	if (selector) await page.waitForSelector(selector, { timeout: T });
}

async function shot(page, name) {
	const file = path.join(shotDir, name + '.png');
	await page.screenshot({ path: file, fullPage: true });
	result.shots.push(name);
}

// The page does not scroll sideways, and every header control is inside the window.
async function fits(page) {
	return page.evaluate(() => {
		const w = window.innerWidth;
		const out = [...document.querySelectorAll('header.top a, header.top button')]
			.filter((e) => e.getClientRects().length)
			.filter((e) => { const r = e.getBoundingClientRect(); return r.left < 0 || r.right > w + 0.5; })
			.map((e) => e.textContent.trim());
		return { scrollWidth: document.scrollingElement.scrollWidth, innerWidth: w, headerOutside: out };
	});
}

async function runId(page) {
	await page.waitForSelector('#run-detail h2 .mono', { timeout: T });
	return (await page.textContent('#run-detail h2 .mono')).trim();
}

async function runCommand(page, command, timeoutSeconds) {
	await page.fill('#cmd', command);
	await page.fill('#cmd-timeout', timeoutSeconds ?? '');
	const before = await page.$eval('#run-detail', (e) => (e.hidden ? '' : e.querySelector('h2 .mono')?.textContent || ''));
	await page.click('#run');
	await page.waitForFunction((b) => {
		const id = document.querySelector('#run-detail h2 .mono')?.textContent;
		return id && id !== b;
	}, before, { timeout: T });
	return runId(page);
}

// What the log viewer in sel shows (chunks not hidden by the filter).
async function shown(page, sel) {
	return page.$eval(sel, (pre) => [...pre.querySelectorAll('.chunk')]
		.filter((c) => getComputedStyle(c).display !== 'none').map((c) => c.textContent).join(''));
}

let browser;
try {
	fs.mkdirSync(shotDir, { recursive: true });
	step('launch');
	browser = await chromium.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
			'--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'],
	});
	browser.on('disconnected', () => process.stderr.write('# the browser disconnected\n'));
	const desk = await newContext(browser, { width: 1280, height: 900 });
	const page = await newPage(desk);
	// DASH_CPU_THROTTLE=N runs the page N times slower (what a loaded machine does to it), to
	// check that every wait is for a state, not for a moment.
	if (Number(process.env.DASH_CPU_THROTTLE) > 1) {
		const cdp = await desk.newCDPSession(page);
		await cdp.send('Emulation.setCPUThrottlingRate', { rate: Number(process.env.DASH_CPU_THROTTLE) });
	}
	const usageRequests = [];
	page.on('request', (r) => {
		if (new URL(r.url()).pathname === `/v1/workspaces/${ws}/usage`) usageRequests.push(Date.now());
	});

	step('sign in; the worker page');
	await signIn(page);
	await page.waitForSelector('#ws-table', { timeout: T });
	await shot(page, 'worker-desktop');
	result.workerTimeoutText = await page.$eval('#worker-info', (e) => (/timeout ([^,]*) by default/.exec(e.textContent) || [])[1] || null);
	await page.waitForSelector('#create-form #new-memory', { timeout: T });
	result.limitPlaceholders = await page.$$eval('#new-cpus, #new-memory, #new-pids', (els) => els.map((e) => e.placeholder));

	step('timeouts are typed in seconds');
	await go(page, `#/w/${ws}/commands`, '#cmd-form');
	result.timeoutLabel = await page.$eval('#cmd-timeout', (e) => e.closest('label').querySelector('.label').textContent);
	await page.fill('#cmd', 'true');
	await page.fill('#cmd-timeout', '0');
	await page.click('#run');
	await page.waitForSelector('#cmd-form .error:not([hidden])', { timeout: T });
	result.badTimeoutError = (await page.textContent('#cmd-form .error')).trim();
	result.timeoutRun = await runCommand(page, 'sleep 30', '1.5');
	await page.waitForSelector('#run-status[data-status=timed_out]', { timeout: T });

	step('a running command shows a live elapsed clock and its resource use');
	result.busyRun = await runCommand(page, 'while :; do :; done', '120');
	await page.waitForSelector('#run-elapsed', { timeout: T });
	const e0 = (await page.textContent('#run-elapsed')).trim();
	await page.waitForFunction((t) => {
		const now = document.querySelector('#run-elapsed')?.textContent.trim();
		return now && now !== t && parseFloat(now) > parseFloat(t);
	}, e0, { timeout: T });
	result.elapsed = [e0, (await page.textContent('#run-elapsed')).trim()];
	await page.waitForFunction(() => Number(document.querySelector('#run-usage')?.dataset.cpuMs) > 0, null, { timeout: T });
	const cpu0 = Number(await page.$eval('#run-usage', (e) => e.dataset.cpuMs));
	await page.waitForFunction((c) => Number(document.querySelector('#run-usage')?.dataset.cpuMs) > c, cpu0, { timeout: T });
	result.runCpuGrew = [cpu0, Number(await page.$eval('#run-usage', (e) => e.dataset.cpuMs))];
	result.runUsageText = (await page.textContent('#run-usage')).trim();
	await page.waitForFunction(() => Number(document.querySelector('#ws-usage [data-usage=workspace]')?.dataset.memoryBytes) > 0, null, { timeout: T });
	result.wsUsageText = (await page.textContent('#ws-usage')).trim();
	await page.waitForSelector(`#history-table tr[data-id="${result.busyRun}"] [data-usage="run:${result.busyRun}"][data-cpu-ms]:not([data-cpu-ms=""])`, { timeout: T });
	result.historyUsage = true;
	await shot(page, 'workspace-commands-desktop');
	await apiCall('POST', `/v1/workspaces/${ws}/commands/${result.busyRun}/cancel`);

	step('the log viewer: filter, search, copy, download');
	result.streamsRun = await runCommand(page, 'for i in 1 2 3; do echo out$i; echo err$i >&2; done');
	await page.waitForSelector('#run-status[data-status=exited]', { timeout: T });
	await page.waitForFunction(() => /err3/.test(document.querySelector('#run-output')?.textContent || ''), null, { timeout: T });
	const viewer = '#run-detail .logview';
	await page.selectOption(`${viewer} .logview-filter`, 'stdout');
	result.filterStdout = await shown(page, '#run-output');
	await page.selectOption(`${viewer} .logview-filter`, 'stderr');
	result.filterStderr = await shown(page, '#run-output');
	await page.selectOption(`${viewer} .logview-filter`, 'all');
	result.filterAll = await shown(page, '#run-output');
	await page.fill(`${viewer} .logview-search`, 'ERR');
	result.searchCount = (await page.textContent(`${viewer} .logview-count`)).trim();
	result.searchMarks = await page.$$eval('#run-output mark', (els) => els.map((e) => e.textContent));
	result.searchCurrent = await page.$eval('#run-output mark.current', (e) => (e.textContent + (e.nextSibling?.textContent || '')).split('\n')[0]);
	await page.click(`${viewer} .logview-next`);
	result.searchNext = [(await page.textContent(`${viewer} .logview-count`)).trim(), await page.$eval('#run-output mark.current', (e) => (e.textContent + (e.nextSibling?.textContent || '')).split('\n')[0])];
	await page.click(`${viewer} .logview-prev`);
	await page.click(`${viewer} .logview-prev`);
	result.searchPrevWraps = (await page.textContent(`${viewer} .logview-count`)).trim();
	await page.selectOption(`${viewer} .logview-filter`, 'stdout');
	result.searchUnderFilter = (await page.textContent(`${viewer} .logview-count`)).trim();
	await page.fill(`${viewer} .logview-search`, '');
	await page.click(`${viewer} .logview-copy`);
	await page.waitForSelector(`${viewer} .logview-status[data-state=copied]`, { timeout: T });
	result.copied = await page.evaluate(() => navigator.clipboard.readText());
	await page.selectOption(`${viewer} .logview-filter`, 'stderr');
	const [download] = await Promise.all([page.waitForEvent('download', { timeout: T }), page.click(`${viewer} .logview-download`)]);
	result.downloadName = download.suggestedFilename();
	result.downloaded = fs.readFileSync(await download.path(), 'utf8');

	step('the log viewer: pause auto-scroll, resume at the bottom');
	// 2000 lines (19 KB) to overflow the view, then 500 more (5 KB) each time the test makes
	// .more1 and .more2 in the workspace: output comes while the view is paused and after it
	// follows again because the test asks for it then, not because a clock left some over (a
	// command that wrote for a fixed time could be done before a loaded machine got there).
	const chatty = await runCommand(page, 'emit() { n=0; while [ $n -lt $1 ]; do n=$((n+1)); i=$((i+1)); echo "line $i"; done; }; i=0; emit 2000; for g in 1 2; do until [ -e .more$g ]; do sleep 0.05; done; emit 500; done; exec sleep 600', '600');
	const more = async (g) => {
		const r = await apiCall('POST', `/v1/workspaces/${ws}/commands?waitMs=${T}`, { command: `touch .more${g}` });
		if (r.body?.exitCode !== 0) throw new Error(`touch .more${g}: ${JSON.stringify(r.body)}`);
	};
	const pre = '#run-output';
	// What the viewer showed when a wait gave up (run in the page: the selector, or [selector, …]).
	const view = (a) => {
		const p = document.querySelector(Array.isArray(a) ? a[0] : a);
		return p && { len: p.textContent.length, tail: p.textContent.slice(-40), top: p.scrollTop, height: p.scrollHeight, client: p.clientHeight, follow: p.closest('.logview')?.dataset.follow };
	};
	await waitState(page, 'output overflowing the view', (s) => { const p = document.querySelector(s); return p && p.scrollHeight > p.clientHeight * 2; }, pre, view);
	result.followAtStart = await page.$eval(`${viewer}`, (e) => e.dataset.follow);
	step('the log viewer: pause');
	await page.click(`${viewer} .logview-pause`);
	result.followAfterPause = await page.$eval(`${viewer}`, (e) => e.dataset.follow);
	const paused = await page.$eval(pre, (p) => ({ top: p.scrollTop, len: p.textContent.length }));
	await more(1);
	await waitState(page, 'output while paused (.more1)', ([s, len]) => document.querySelector(s).textContent.length > len + 500, [pre, paused.len], view);
	result.pausedStays = await page.$eval(pre, (p, top) => p.scrollTop === top && p.scrollTop + p.clientHeight < p.scrollHeight - 4, paused.top);
	step('the log viewer: scrolled to the bottom');
	await page.$eval(pre, (p) => { p.scrollTop = p.scrollHeight; });
	await waitState(page, 'following once at the bottom', (s) => document.querySelector(s).closest('.logview').dataset.follow === '1', pre, view);
	step('the log viewer: following again');
	const resumed = await page.$eval(pre, (p) => p.textContent.length);
	await more(2);
	await waitState(page, 'output while following (.more2)', ([s, len]) => document.querySelector(s).textContent.length > len + 500 && /line 3000\n/.test(document.querySelector(s).textContent), [pre, resumed], view);
	result.resumedAtBottom = await page.$eval(pre, (p) => p.scrollTop + p.clientHeight >= p.scrollHeight - 4);
	await page.$eval(pre, (p) => { p.scrollTop = 0; });
	await waitState(page, 'paused by scrolling up', (s) => document.querySelector(s).closest('.logview').dataset.follow === '0', pre, view);
	result.scrollUpPauses = true;
	await apiCall('POST', `/v1/workspaces/${ws}/commands/${chatty}/cancel`);

	step('service logs follow the selected service only');
	await go(page, `#/w/${ws}/services`, '#svc-form');
	for (const [name, cmd, policy] of [['alpha', 'echo alpha-line; exec sleep 600', 'on-failure'], ['beta', 'echo beta-line; exec sleep 600', 'on-failure'], ['gamma', 'exit 0', 'no']]) {
		await page.fill('#svc-name', name);
		await page.fill('#svc-command', cmd);
		await page.selectOption('#svc-policy', policy);
		await page.fill('#svc-delay', '0.25');
		await page.click('#svc-start');
		await page.waitForSelector(`#svc-table tr[data-name=${name}]`, { timeout: T });
	}
	await page.waitForSelector('#svc-table tr[data-name=gamma] .badge[data-state=stopped]', { timeout: T });
	await page.click('#svc-table tr[data-name=alpha] td.actions button');
	await page.waitForFunction(() => /alpha-line/.test(document.querySelector('#svc-logs')?.textContent || ''), null, { timeout: T });
	await page.click('#svc-table tr[data-name=beta] td.actions button');
	await page.waitForFunction(() => /beta-line/.test(document.querySelector('#svc-logs')?.textContent || ''), null, { timeout: T });
	result.betaLogs = await page.textContent('#svc-logs');
	await page.click('#svc-table tr[data-name=gamma] td.actions button');
	await page.waitForSelector('#svc-detail h2 .mono', { timeout: T });
	await page.waitForFunction(() => document.querySelector('#svc-detail h2 .mono')?.textContent === 'gamma', null, { timeout: T });
	result.gammaLogs = await page.textContent('#svc-logs');
	await page.waitForFunction(() => Number(document.querySelector('#svc-table td[data-usage="service:alpha"]')?.dataset.memoryBytes) > 0, null, { timeout: T });
	result.serviceUsageText = (await page.textContent('#svc-table td[data-usage="service:alpha"]')).trim();
	await shot(page, 'workspace-services-desktop');

	step('no resource use is asked while the page is hidden');
	await page.evaluate(() => {
		Object.defineProperty(document, 'hidden', { configurable: true, get: () => true });
		Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => 'hidden' });
		document.dispatchEvent(new Event('visibilitychange'));
	});
	const hiddenAt = usageRequests.length;
	// The clock is the service list's own poll, every 10 s beside its events (web/services.js):
	// two of them span at least 10 s, five of the usage feed's 2 s intervals (web/usage.js).
	for (let i = 0; i < 2; i++) {
		await page.waitForRequest((r) => new URL(r.url()).pathname === `/v1/workspaces/${ws}/services`, { timeout: T });
	}
	result.usageWhileHidden = usageRequests.length - hiddenAt;
	await page.evaluate(() => {
		delete document.hidden;
		delete document.visibilityState;
		document.dispatchEvent(new Event('visibilitychange'));
	});
	await page.waitForFunction(() => true);
	const shownAt = usageRequests.length;
	await page.waitForRequest((r) => new URL(r.url()).pathname === `/v1/workspaces/${ws}/usage`, { timeout: T });
	result.usageWhenShown = usageRequests.length - shownAt + 1;

	step('a terminal: its header keeps the current size; an ended one offers no reattach');
	await go(page, `#/w/${ws}/terminals`, '#term-form');
	await page.click('#term-open');
	await page.waitForSelector('#term-conn[data-state=attached]', { timeout: T });
	const termId = page.url().split('/').pop();
	result.terminalRenderer = await page.$eval('#term-screen', (e) => e.dataset.renderer);
	const sizeMatches = async () => {
		const t = (await apiCall('GET', `/v1/workspaces/${ws}/terminals/${termId}`)).body;
		const shownSize = (await page.textContent('#term-size')).trim();
		return { api: `${t.cols}×${t.rows}`, shown: shownSize };
	};
	await page.waitForFunction(() => document.querySelector('#term-size')?.textContent !== '100×30', null, { timeout: T });
	result.termSizeFitted = await settle(page, sizeMatches, (s) => s.api === s.shown);
	await shot(page, 'workspace-terminal-desktop');
	await page.setViewportSize({ width: 900, height: 600 });
	await page.waitForFunction((old) => document.querySelector('#term-size')?.textContent !== old, result.termSizeFitted.shown, { timeout: T });
	result.termSizeResized = await settle(page, sizeMatches, (s) => s.api === s.shown);
	await page.setViewportSize({ width: 1280, height: 900 });
	await page.click('#term-screen .xterm');
	await page.keyboard.type('echo before-the-end; exit 7');
	await page.keyboard.press('Enter');
	await page.waitForSelector('#term-ended:not([hidden])', { timeout: T });
	result.termEnded = (await page.textContent('#term-ended')).trim();
	await page.waitForFunction(() => document.querySelector('#term-conn')?.dataset.state !== 'attached', null, { timeout: T });
	result.termReattachHidden = await page.$eval('#term-reattach', (e) => e.hidden);
	result.termKeptOutput = await page.$$eval('#term-screen .xterm-rows > div', (rows) => rows.some((r) => r.textContent.trim() === 'before-the-end'));
	await go(page, `#/w/${ws}/terminals`, '#term-table');
	await go(page, `#/w/${ws}/terminals/${termId}`, '#term-ended:not([hidden])');
	result.termReopenedReattachHidden = await page.$eval('#term-reattach', (e) => e.hidden);
	result.termReopenedConn = await page.$eval('#term-conn', (e) => e.dataset.state);
	await go(page, `#/w/${ws}/terminals`, '#term-table');
	await shot(page, 'workspace-terminals-desktop');

	step('restart asks first, naming what it ends');
	const sleeper = await apiCall('POST', `/v1/workspaces/${ws}/commands`, { command: 'exec sleep 600' });
	result.sleeper = sleeper.body.id;
	const term = await apiCall('POST', `/v1/workspaces/${ws}/terminals`, { cols: 80, rows: 24 });
	result.openTerminal = term.body.id;
	await page.waitForFunction(async ([w, t, tok]) => {
		const r = await fetch(`/v1/workspaces/${w}/terminals/${t}`, { headers: { Authorization: 'Bearer ' + tok } });
		return (await r.json()).state === 'running';
	}, [ws, term.body.id, token], { timeout: T, polling: 100 });
	let dialog = null;
	page.once('dialog', (d) => { dialog = d.message(); d.dismiss(); });
	await page.click('#ws-restart');
	result.restartQuestion = await settle(page, async () => dialog, (d) => d !== null);
	result.afterDismiss = (await apiCall('GET', `/v1/workspaces/${ws}/commands/${result.sleeper}`)).body.status;
	page.once('dialog', (d) => d.accept());
	restartBegun = true;
	await page.click('#ws-restart');
	result.afterAccept = await settle(page, async () => (await apiCall('GET', `/v1/workspaces/${ws}/commands/${result.sleeper}`)).body.status, (s) => s !== 'running');

	step('a workspace deleted while its page is open: not found, nothing left running');
	const gone = await newPage(desk);
	await signIn(gone);
	await go(gone, `#/w/${goneWs}/services`, '#svc-form');
	await gone.fill('#svc-name', 'tail');
	await gone.fill('#svc-command', 'echo tailing; exec sleep 600');
	await gone.click('#svc-start');
	await gone.waitForFunction(() => /tailing/.test(document.querySelector('#svc-logs')?.textContent || ''), null, { timeout: T });
	result.runningBefore = await gone.evaluate(() => window.__running());
	result.deleteStatus = (await apiCall('DELETE', `/v1/workspaces/${goneWs}`)).status;
	await gone.waitForSelector('#ws-not-found', { timeout: T });
	result.runningAfter = await gone.evaluate(() => window.__running());
	result.goneTabs = await gone.$$eval('.tabs, #svc-form, #cmd-form', (els) => els.length);
	result.goneText = (await gone.textContent('main')).replace(/\s+/g, ' ').trim();
	await shot(gone, 'workspace-gone-desktop');
	await gone.click('#ws-back');
	await gone.waitForSelector('#ws-table', { timeout: T });
	result.backWorks = true;

	step('an unknown workspace: not found at once, nothing polls');
	await go(gone, '#/w/nope-nope/commands', '#ws-not-found');
	result.unknownRunning = await gone.evaluate(() => window.__running());
	result.unknownLoading = await gone.evaluate(() => /Loading/.test(document.querySelector('main').textContent));
	await gone.close();

	step('390×844: every page without horizontal scroll');
	const phone = await newContext(browser, { width: 390, height: 844 });
	const p2 = await newPage(phone);
	await signIn(p2);
	await p2.waitForSelector('#ws-table', { timeout: T });
	const pages = [
		['worker', '#/', '#ws-table'],
		['workspace-commands', `#/w/${ws}/commands`, '#history-table'],
		['workspace-services', `#/w/${ws}/services`, '#svc-table'],
		['workspace-terminals', `#/w/${ws}/terminals`, '#term-table'],
		['workspace-terminal', `#/w/${ws}/terminals/${result.openTerminal}`, '#term-conn'],
		['workspace-gone', `#/w/${goneWs}`, '#ws-not-found'],
	];
	result.phone = {};
	for (const [name, hash, sel] of pages) {
		await go(p2, hash, sel);
		if (name === 'workspace-commands') {
			await p2.click('#history-table tbody tr:first-child td.actions button');
			await p2.waitForSelector('#run-detail .logview', { timeout: T });
		}
		if (name === 'workspace-services') {
			await p2.click('#svc-table tr[data-name=alpha] td.actions button');
			await p2.waitForSelector('#svc-detail .logview', { timeout: T });
		}
		result.phone[name] = await fits(p2);
		await shot(p2, name + '-phone');
	}
	result.tableScrolls = await p2.evaluate(() => true);
	await go(p2, `#/w/${ws}/commands`, '#history-table');
	result.phoneTable = await p2.$eval('#history-table', (t) => {
		const wrap = t.closest('.table-scroll');
		return { wrapped: !!wrap, wrapRight: wrap.getBoundingClientRect().right, innerWidth: window.innerWidth, tableWidth: t.scrollWidth, wrapWidth: wrap.clientWidth, overflowX: getComputedStyle(wrap).overflowX };
	});

	await browser.close();
	result.ok = true;
	finish(0);
} catch (e) {
	result.error = String(e.message || e).slice(0, 2000);
	try {
		const p = browser?.contexts().at(-1)?.pages().at(-1);
		if (p) {
			result.pageText = (await p.textContent('body')).slice(0, 1500);
			result.debug = await p.evaluate(() => {
				const o = document.querySelector('#run-output');
				return o ? { len: o.textContent.length, tail: o.textContent.slice(-200), head: document.querySelector('#run-detail .card-head')?.textContent, sockets: window.__received?.() } : null;
			});
			// The run on show as the API has it, to tell a stalled page from a stalled run.
			const run = result.debug && (await p.textContent('#run-detail h2 .mono').catch(() => null))?.trim();
			if (run) {
				const r = await apiCall('GET', `/v1/workspaces/${ws}/commands/${run}`);
				result.debug.api = { status: r.body?.status, stdoutBytes: r.body?.stdoutBytes, at: new Date().toISOString() };
			}
			await p.screenshot({ path: path.join(shotDir, 'failed.png'), fullPage: true });
		}
	} catch {}
	if (browser) await browser.close().catch(() => {});
	finish(1);
}
