// SPDX-License-Identifier: MIT
// The dashboard across workers, in headless Chromium (test-dashboard-workers.sh):
//
//   node workers-dashboard.mjs BASE_URL TOKEN WORKSPACE_ON_W3
//
// signs in to w1's dashboard, sees the workers (w2 down with its error, the others up), opens
// w3 and sees its workspaces, opens the workspace on w3 by its URL (#/w/ID routes by the id's
// worker) and runs a command there; then, all through w1's forward, a run's output arrives
// live, the terminal echoes what is typed, the Files tab's watch is live and a service's logs
// follow. One JSON line on stdout: {ok, step, error, ...facts}.
// PLAYWRIGHT_DIR: where playwright-core is installed; CHROMIUM: the browser.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [base, token, wsId, w1Labelled] = process.argv.slice(2);
const result = { ok: false, step: 'start', console: [], requests: [], sockets: [], failed: [] };
const T = 30000;

function finish(code) {
	fs.writeSync(1, JSON.stringify(result) + '\n');
	process.exit(code);
}

function step(name) {
	result.step = name;
	process.stderr.write(`# step: ${name}\n`);
}

let browser;
try {
	step('launch');
	browser = await chromium.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
			'--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'],
	});
	const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
	const page = await context.newPage();
	page.on('console', (m) => {
		if (m.type() === 'error') result.console.push(m.text().slice(0, 300));
	});
	page.on('pageerror', (e) => result.console.push('pageerror: ' + String(e.message).slice(0, 300)));
	context.on('request', (r) => {
		const u = new URL(r.url());
		result.requests.push([r.method(), u.origin === new URL(base).origin ? u.pathname : u.href]);
	});

	context.on('response', (r) => {
		if (r.status() >= 400) result.failed.push([r.status(), r.request().method(), new URL(r.url()).pathname]);
	});
	page.on('websocket', (w) => {
		const u = new URL(w.url());
		result.sockets.push(u.host === new URL(base).host ? u.pathname : u.href);
	});
	step('sign in');
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token', { timeout: T });
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');

	step('the workers');
	await page.waitForSelector('#workers-table tbody tr[data-worker=w3]', { timeout: T });
	result.workers = await page.$$eval('#workers-table tbody tr', (rows) => rows.map((r) => ({
		name: r.dataset.worker,
		state: r.dataset.state,
		error: r.querySelector('.worker-error')?.textContent ?? null,
		workspaces: r.lastElementChild.textContent,
	})));

	step('every worker\'s workspaces, filtered');
	const fleetRows = () => [...document.querySelectorAll('#fleet-ws-table tbody tr')].map((r) => `${r.dataset.worker} ${r.dataset.id}`).sort();
	const fleetTo = async (what, name, label, want) => {
		await page.fill('#fleet-filter-name', name);
		await page.fill('#fleet-filter-label', label);
		try {
			await page.waitForFunction((w) => JSON.stringify([...document.querySelectorAll('#fleet-ws-table tbody tr')]
				.map((r) => `${r.dataset.worker} ${r.dataset.id}`).sort()) === JSON.stringify(w), [...want].sort(), { timeout: T, polling: 100 });
		} catch {
			throw new Error(`${what}: the page showed ${JSON.stringify(await page.evaluate(fleetRows))}`);
		}
		return page.evaluate(fleetRows);
	};
	result.fleetByLabel = await fleetTo('label fleet=yes on w1 and w3', '', 'fleet=yes', [`w1 ${w1Labelled}`, `w3 ${wsId}`]);
	result.fleetByName = await fleetTo('name far: w3\'s', 'far', '', [`w3 ${wsId}`]);

	step('open w3');
	await page.click('#workers-table tr[data-worker=w3] a');
	await page.waitForFunction(() => document.querySelector('#worker-name')?.textContent === 'w3', null, { timeout: T });
	await page.waitForSelector(`#ws-table tr[data-id="${wsId}"]`, { timeout: T });
	result.w3Workspaces = await page.$$eval('#ws-table tbody tr', (rows) => rows.map((r) => r.dataset.id));
	result.crumbs = await page.$eval('#crumbs', (e) => e.textContent);

	step('open the workspace on w3 by its URL');
	await page.goto(base + '/#/w/' + encodeURIComponent(wsId), { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#ws-id', { timeout: T });
	result.workspace = (await page.textContent('#ws-id')).trim();

	step('run a command on w3');
	await page.fill('#cmd', 'echo from-the-dashboard; echo err >&2; exit 4');
	await page.click('#run');
	await page.waitForSelector('#run-status[data-status=exited]', { timeout: T });
	const stdoutChunks = '#run-output .chunk[data-stream=stdout], #run-stored .chunk[data-stream=stdout]';
	await page.waitForSelector(stdoutChunks, { timeout: T });
	result.runStdout = await page.$$eval(stdoutChunks, (els) => els.map((e) => e.textContent).join(''));
	result.runExit = (await page.textContent('#run-exit')).trim();
	result.runId = (await page.textContent('#run-detail .card-head .mono')).trim();
	const fwd = (method, p, body) => page.evaluate(async ([m, u, b, t]) => {
		const r = await fetch(u, { method: m, headers: { Authorization: 'Bearer ' + t, 'Content-Type': 'application/json' }, body: b === undefined ? undefined : JSON.stringify(b) });
		return { status: r.status, body: await r.json().catch(() => null) };
	}, [method, '/v1/workers/w3' + p, body, token]);
	const text = (sel) => page.evaluate((s) => document.querySelector(s)?.textContent || '', sel);

	step('a run on w3: its output arrives live');
	await page.goto(base + '/#/w/' + encodeURIComponent(wsId), { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#cmd', { timeout: T });
	await page.fill('#cmd', 'echo live-one; while [ ! -e go-dashboard ]; do sleep 0.1; done; echo live-two');
	await page.click('#run');
	await page.waitForFunction(() => /live-one/.test(document.querySelector('#run-output')?.textContent || ''), null, { timeout: T });
	result.liveStatusAtFirst = await page.$eval('#run-status', (e) => e.dataset.status);
	result.liveMkdir = (await fwd('POST', `/v1/workspaces/${wsId}/files/mkdir`, { path: 'go-dashboard' })).status;
	await page.waitForSelector('#run-status[data-status=exited]', { timeout: T });
	await page.waitForFunction(() => /live-two/.test(document.querySelector('#run-output')?.textContent || ''), null, { timeout: T });
	result.liveOutput = (await text('#run-output')).match(/live-[a-z]+/g);

	step('a terminal on w3 echoes what is typed');
	const term = await fwd('POST', `/v1/workspaces/${wsId}/terminals`, { command: '/bin/sh', cols: 80, rows: 24 });
	result.termCreate = term.status;
	await page.evaluate(([w, t]) => { location.hash = `#/w/${w}/terminals/${t}`; }, [wsId, term.body?.id]);
	await page.waitForSelector('#term-conn[data-state=attached]', { timeout: T });
	await page.click('#term-screen .xterm');
	await page.keyboard.type('echo typed-$((40+2))');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => [...document.querySelectorAll('#term-screen .xterm-rows > div')].some((r) => r.textContent.trim() === 'typed-42'), null, { timeout: T });
	result.termEchoed = true;

	step('the Files tab of the workspace on w3 watches live');
	await page.evaluate((w) => { location.hash = `#/w/${w}/files`; }, wsId);
	await page.waitForSelector('#files-watch[data-state=live]', { timeout: T });
	result.watchLive = true;
	// (Removed once no view shows it: a view that shows what is removed may ask for it once
	// more, which a browser reports as a failed load.)
	await fwd('DELETE', `/v1/workspaces/${wsId}/terminals/${term.body?.id}`);

	step('a service on w3: its logs follow');
	result.svcCreate = (await fwd('POST', `/v1/workspaces/${wsId}/services`,
		{ name: 'dash', command: 'echo svc-one; while [ ! -e go-service ]; do sleep 0.1; done; echo svc-two; exec sleep 600' })).status;
	await page.evaluate((w) => { location.hash = `#/w/${w}/services`; }, wsId);
	await page.waitForSelector('#svc-table tr[data-name=dash]', { timeout: T });
	await page.click('#svc-table tr[data-name=dash] td.actions button');
	await page.waitForFunction(() => /svc-one/.test(document.querySelector('#svc-logs')?.textContent || ''), null, { timeout: T });
	result.svcMkdir = (await fwd('POST', `/v1/workspaces/${wsId}/files/mkdir`, { path: 'go-service' })).status;
	await page.waitForFunction(() => /svc-two/.test(document.querySelector('#svc-logs')?.textContent || ''), null, { timeout: T });
	result.svcLogs = (await text('#svc-logs')).match(/svc-[a-z]+/g);
	await page.evaluate((w) => { location.hash = `#/w/${w}`; }, wsId);
	await page.waitForSelector('#cmd', { timeout: T });
	await fwd('DELETE', `/v1/workspaces/${wsId}/services/dash`);

	// Last: its 502s are console errors of their own, kept apart from the session's.
	step('a workspace on w2, which is down, says so');
	const before = { console: result.console.length, failed: result.failed.length };
	const downId = 'w2-' + 'a'.repeat(26);
	await page.evaluate((w) => { location.hash = `#/w/${w}`; }, downId);
	await page.waitForSelector('#ws-unreachable', { timeout: T });
	result.down = {
		worker: await page.$eval('#ws-unreachable', (e) => e.dataset.worker),
		title: (await text('#ws-unreachable h2')).trim(),
		error: (await text('#ws-unreachable-error')).trim(),
		loading: /Loading/.test(await text('#main') || await text('body')),
		retry: await page.$eval('#ws-retry', (e) => e.textContent),
	};
	// Try again asks again (and is answered the same while w2 is down).
	const askedOf = () => result.requests.filter(([, p]) => p === `/v1/workers/w2/v1/workspaces/${downId}`).length;
	const asked = askedOf();
	await page.click('#ws-retry');
	for (const end = Date.now() + T; askedOf() === asked && Date.now() < end;) await new Promise((r) => setTimeout(r, 50));
	await page.waitForSelector('#ws-unreachable', { timeout: T });
	result.down.askedAgain = askedOf() - asked;
	result.downConsole = result.console.splice(before.console);
	result.downFailed = result.failed.splice(before.failed);

	result.ok = true;
} catch (e) {
	result.error = String(e && e.message ? e.message : e).slice(0, 1000);
	try {
		const pages = browser ? browser.contexts()[0]?.pages() : [];
		if (pages?.length) result.pageText = (await pages[0].textContent('body'))?.slice(0, 2000);
	} catch {}
}
try {
	await browser?.close();
} catch {}
finish(0);
