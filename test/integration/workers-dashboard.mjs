// SPDX-License-Identifier: MIT
// The dashboard across workers, in headless Chromium (test-dashboard-workers.sh):
//
//   node workers-dashboard.mjs BASE_URL TOKEN WORKSPACE_ON_W3
//
// signs in to w1's dashboard, sees the workers (w2 down with its error, the others up), opens
// w3 and sees its workspaces, opens the workspace on w3 by its URL (#/w/ID routes by the id's
// worker) and runs a command there. One JSON line on stdout: {ok, step, error, ...facts}.
// PLAYWRIGHT_DIR: where playwright-core is installed; CHROMIUM: the browser.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [base, token, wsId] = process.argv.slice(2);
const result = { ok: false, step: 'start', console: [], requests: [] };
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
	await page.waitForSelector('#run-stored .chunk[data-stream=stdout]', { timeout: T });
	result.runStdout = await page.$$eval('#run-stored .chunk[data-stream=stdout]', (els) => els.map((e) => e.textContent).join(''));
	result.runExit = (await page.textContent('#run-exit')).trim();
	result.runId = (await page.textContent('#run-detail .card-head .mono')).trim();

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
