// SPDX-License-Identifier: MIT
// What the network refused, on the dashboard's workspace page, in headless Chromium (Debian's,
// through npm's playwright-core):
//
//   node dashboard-denials.mjs BASE_URL TOKEN SCREENSHOT WS DEST REFUSED_RUN CLEAN_RUN
//
// signs in, opens workspace WS (restricted, whose network refused DEST, "address:port/proto"),
// and reads: the Refused row of the summary (its entries' data-dest, the first's text), the
// Refused cell of REFUSED_RUN (a run that was refused) and of CLEAN_RUN (one that was not) in
// the commands history, and the Network refused fact of REFUSED_RUN's output view. One JSON
// line on stdout: {ok, step, error, ...facts}. PLAYWRIGHT_DIR: where playwright-core is
// installed; CHROMIUM: the browser (default /usr/bin/chromium).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [base, token, screenshot, ws, dest, refusedRun, cleanRun] = process.argv.slice(2);
const result = { ok: false, step: 'start', console: [], pageErrors: [] };
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
	browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
	const page = await (await browser.newContext()).newPage();
	page.on('console', (m) => { if (m.type() === 'error') result.console.push(m.text().slice(0, 300)); });
	page.on('pageerror', (e) => result.pageErrors.push(String(e.message).slice(0, 300)));

	step('sign in');
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token', { timeout: T });
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await page.waitForSelector('#refresh', { timeout: T });

	step('the workspace page lists the refused destination');
	await page.goto(`${base}/#/w/${encodeURIComponent(ws)}/commands`);
	await page.waitForSelector(`#ws-net-refused li[data-dest="${dest}"]`, { timeout: T });
	result.refusedDests = await page.$$eval('#ws-net-refused li', (els) => els.map((e) => e.dataset.dest));
	result.refusedFirst = await page.textContent('#ws-net-refused li');

	step('the history shows each run\'s refused count');
	await page.waitForSelector(`#history-table tr[data-id="${refusedRun}"] td.refused-count`, { timeout: T });
	result.refusedCell = (await page.textContent(`#history-table tr[data-id="${refusedRun}"] td.refused-count`)).trim();
	result.refusedCellTitle = await page.getAttribute(`#history-table tr[data-id="${refusedRun}"] td.refused-count`, 'title');
	result.cleanCell = (await page.textContent(`#history-table tr[data-id="${cleanRun}"] td.refused-count`)).trim();

	step('the run\'s facts name the last refused destination');
	await page.click(`#history-table tr[data-id="${refusedRun}"] td.actions button`);
	await page.waitForSelector('#run-denied', { timeout: T });
	result.runDenied = (await page.textContent('#run-denied')).trim();
	if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
	result.ok = true;
	step('done');
} catch (e) {
	result.error = String(e.message || e).slice(0, 600);
	try {
		const pages = browser?.contexts()[0]?.pages() ?? [];
		if (pages[0]) result.pageText = (await pages[0].textContent('body'))?.slice(0, 1500);
	} catch { /* the page is gone */ }
}
await browser?.close();
finish(result.ok ? 0 : 1);
