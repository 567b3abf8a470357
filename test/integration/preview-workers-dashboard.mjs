// SPDX-License-Identifier: MIT
// The Ports tab of a workspace on another worker, in headless Chromium (Debian's, through
// npm's playwright-core):
//
//   node preview-workers-dashboard.mjs BASE_URL TOKEN WORKSPACE
//
// BASE_URL is one worker's dashboard (w1); WORKSPACE is on another worker (w2) and its busybox
// httpd listens on 127.0.0.1:3000. Signs in, opens the workspace's Ports tab, finds 3000
// listening, exposes it with a token (through w1's relay), reads the row's URL (w2's), opens
// it in a new tab (the page's text) and revokes it. One JSON line on stdout: {ok, step, error,
// ...facts}. PLAYWRIGHT_DIR: where playwright-core is installed; CHROMIUM: the browser.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [base, token, ws] = process.argv.slice(2);
const result = { ok: false, step: 'start', console: [], pageErrors: [], previewConsole: [] };
const T = 20000;

function finish(code) {
	fs.writeSync(1, JSON.stringify(result) + '\n');
	process.exit(code);
}

function step(name) {
	result.step = name;
	process.stderr.write(`# step: ${name}\n`);
}

function watch(page, errs) {
	page.on('console', (m) => {
		const text = `${m.type()}: ${m.text()} (${m.location()?.url ?? ''})`.slice(0, 300);
		process.stderr.write(`# console ${page.url().slice(0, 80)}: ${text}\n`);
		if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) errs.push(text);
	});
	page.on('pageerror', (e) => result.pageErrors.push(String(e.message).slice(0, 300)));
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
	watch(page, result.console);
	page.on('dialog', (d) => d.accept());

	step('sign in');
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token', { timeout: T });
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await page.waitForSelector('#workers-table tbody tr', { timeout: T });

	step("the Ports tab of the other worker's workspace lists port 3000");
	await page.goto(`${base}/#/w/${encodeURIComponent(ws)}`);
	await page.click('nav.tabs a[data-tab="ports"]');
	const listed = '#ports-listening-table tr[data-port="3000"]';
	await page.waitForSelector(listed, { timeout: T });
	result.listedCommand = await page.$eval(listed, (tr) => tr.children[3].textContent);

	step('expose port 3000 with a token');
	await page.selectOption(`${listed} select[aria-label="access"]`, 'token');
	await page.click(`${listed} button.port-expose`);
	const exposedRow = '#ports-exposed-table tr[data-port="3000"]';
	await page.waitForSelector(exposedRow, { timeout: T });
	result.url = await page.$eval(`${exposedRow} td.port-url a`, (a) => a.textContent);

	step('Open: a new tab');
	const [tab] = await Promise.all([
		context.waitForEvent('page', { timeout: T }),
		page.click(`${exposedRow} a.port-open`),
	]);
	watch(tab, result.previewConsole);
	await tab.waitForFunction(() => /preview-on-w2/.test(document.body?.textContent ?? ''), null, { timeout: T }).catch(async (e) => {
		throw new Error(`the opened tab at ${tab.url()} shows "${(await tab.textContent('body').catch(() => '')).slice(0, 300)}": ${e.message}`);
	});
	result.opened = { text: (await tab.textContent('body')).trim(), url: tab.url() };
	await tab.close();

	step('Revoke');
	await page.click(`${exposedRow} button.port-revoke`);
	await page.waitForSelector(exposedRow, { state: 'detached', timeout: T });

	await browser.close();
	result.ok = true;
	finish(0);
} catch (e) {
	result.error = String(e.message || e).slice(0, 2000);
	try {
		const p = browser?.contexts()[0]?.pages()[0];
		if (p) result.pageText = (await p.textContent('body')).slice(0, 1500);
	} catch {}
	if (browser) await browser.close().catch(() => {});
	finish(1);
}
