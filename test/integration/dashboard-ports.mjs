// SPDX-License-Identifier: MIT
// Drives the dashboard's Ports tab in headless Chromium (Debian's, through npm's
// playwright-core) the way a person would:
//
//   node dashboard-ports.mjs BASE_URL TOKEN WORKSPACE HOST_WORKSPACE SHOT_DIR
//
// WORKSPACE is a container workspace whose preview-app listens on 127.0.0.1:3000. Signs in,
// opens its Ports tab, finds 3000 listening, exposes it with a token (shown once), opens it
// in a new tab (the app's page: its WebSocket echoed, title "ws-ok") and in the tab's frame,
// copies its URL, tries to expose it again (409 on the page), revokes it (its URL then 404),
// and opens HOST_WORKSPACE's Ports tab (409: a host workspace shares the worker's network).
// The preview's host is *.preview.localhost: Chromium resolves it to 127.0.0.1 itself.
// One JSON line on stdout: {ok, step, error, ...facts}. PLAYWRIGHT_DIR: where playwright-core
// is installed; CHROMIUM: the browser (default /usr/bin/chromium).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [base, token, ws, hostWs, shots] = process.argv.slice(2);
const origin = new URL(base).origin;
const result = { ok: false, step: 'start', console: [], pageErrors: [], previewConsole: [], frameConsole: [] };
const T = 20000;

function finish(code) {
	fs.writeSync(1, JSON.stringify(result) + '\n');
	process.exit(code);
}

function step(name) {
	result.step = name;
	process.stderr.write(`# step: ${name}\n`);
}

async function call(method, p) {
	const res = await fetch(base + p, { method, headers: { Authorization: 'Bearer ' + token } });
	const text = await res.text();
	if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text.slice(0, 300)}`);
	return text ? JSON.parse(text) : null;
}

// Console lines of a page: the dashboard's API refusals are logged by the browser as errors
// (console); a script error or a CSP refusal is a failure (pageErrors). A preview's page must
// log no error at all (errs).
function watch(page, errs) {
	page.on('console', (m) => {
		const text = `${m.type()}: ${m.text()} (${m.location()?.url ?? ''})`.slice(0, 300);
		process.stderr.write(`# console ${page.url().slice(0, 80)}: ${text}\n`);
		if (errs) {
			if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) errs.push(text);
		} else if (/Content Security Policy/i.test(m.text())) result.pageErrors.push(text);
		else if (m.type() === 'error') result.console.push(text);
	});
	page.on('pageerror', (e) => (errs || result.pageErrors).push(String(e.message).slice(0, 300)));
}

async function shot(page, name) {
	await page.screenshot({ path: path.join(shots, name + '.png'), fullPage: true }).catch(() => {});
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
	await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin });
	const page = await context.newPage();
	watch(page, null);
	page.on('dialog', (d) => d.accept());

	step('sign in');
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token', { timeout: T });
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await page.waitForSelector('#refresh', { timeout: T });

	step('the Ports tab lists port 3000');
	await page.goto(`${base}/#/w/${encodeURIComponent(ws)}`);
	await page.click('nav.tabs a[data-tab="ports"]');
	const listed = '#ports-listening-table tr[data-port="3000"]';
	await page.waitForSelector(listed, { timeout: T });
	result.listed = await page.$eval(listed, (tr) => ({
		address: tr.dataset.address,
		pid: tr.children[2].textContent,
		command: tr.children[3].textContent,
	}));

	step('expose port 3000 with a token');
	await page.selectOption(`${listed} select[aria-label="access"]`, 'token');
	await page.selectOption(`${listed} select[aria-label="expires in"]`, String(3600000));
	await page.click(`${listed} button.port-expose`);
	const exposedRow = '#ports-exposed-table tr[data-port="3000"]';
	await page.waitForSelector(exposedRow, { timeout: T });
	await page.waitForSelector('#port-token-value', { timeout: T });
	const shownToken = await page.textContent('#port-token-value');
	result.url = await page.$eval(`${exposedRow} td.port-url a`, (a) => a.textContent);
	const api = await call('GET', `/v1/workspaces/${ws}/ports`);
	const mine = (api.exposed || []).find((x) => x.port === 3000) || {};
	result.apiUrl = mine.url;
	result.apiAccess = mine.access;
	result.apiListsToken = JSON.stringify(api).includes(shownToken);
	result.tokenShown = /^\S{16,}$/.test(shownToken.trim());
	await shot(page, 'ports-exposed');

	step('Copy URL');
	await page.click(`${exposedRow} button.port-copy`);
	await page.waitForFunction((sel) => document.querySelector(sel)?.textContent === 'Copied', `${exposedRow} button.port-copy`, { timeout: T });
	result.copied = await page.evaluate(() => navigator.clipboard.readText());

	step('Open: a new tab');
	const [tab] = await Promise.all([
		context.waitForEvent('page', { timeout: T }),
		page.click(`${exposedRow} a.port-open`),
	]);
	watch(tab, result.previewConsole);
	await tab.waitForFunction(() => document.title === 'ws-ok', null, { timeout: T }).catch(async (e) => {
		throw new Error(`the opened tab at ${tab.url()} shows "${(await tab.textContent('body').catch(() => '')).slice(0, 300)}": ${e.message}`);
	});
	// a moment for a late console error (a socket closed) to show
	await tab.waitForTimeout(500);
	result.opened = { title: await tab.title(), url: tab.url() };
	await shot(tab, 'preview-tab');
	await tab.close();

	step('Open here: a token preview framed from another site (its cookie partitioned)');
	await page.click(`${exposedRow} button.port-frame`);
	const tokenFrameEl = await page.waitForSelector('iframe#port-frame', { timeout: T });
	const tokenFrame = await tokenFrameEl.contentFrame();
	await tokenFrame.waitForFunction(() => document.getElementById('ws')?.textContent === 'ws-ok', null, { timeout: T }).catch(async (e) => {
		const text = await tokenFrame.textContent('body').catch(() => '');
		throw new Error(`the token frame at ${tokenFrame.url()} shows "${text.slice(0, 300)}": ${e.message}`);
	});
	result.tokenFramed = { ws: await tokenFrame.textContent('#ws'), url: tokenFrame.url(), hint: !(await page.$eval('#port-frame-hint', (x) => x.hidden)) };

	step('expose it again: 409 on the page');
	await page.fill('#port-number', '3000');
	await page.click('#port-expose');
	await page.waitForSelector('#ports-error:not([hidden])', { timeout: T });
	result.again = await page.textContent('#ports-error');

	step('Revoke');
	await page.click(`${exposedRow} button.port-revoke`);
	await page.waitForSelector(exposedRow, { state: 'detached', timeout: T });
	result.rowsAfterRevoke = await page.$$eval('#ports-exposed-table tr[data-port]', (r) => r.length);
	result.frameClosed = await page.$eval('#port-frame-card', (c) => c.hidden);
	result.apiExposedAfter = (await call('GET', `/v1/workspaces/${ws}/ports`)).exposed;
	const gone = await context.newPage();
	watch(gone, []);
	const res = await gone.goto(result.url, { waitUntil: 'domcontentloaded' });
	result.statusAfterRevoke = res ? res.status() : null;
	await gone.close();
	await shot(page, 'ports-revoked');

	step('expose it public, Open here: the frame');
	await page.fill('#port-number', '3000');
	await page.selectOption('#port-access', 'public');
	await page.click('#port-expose');
	await page.waitForSelector(`${exposedRow} td.port-access`, { timeout: T });
	result.publicAccess = (await page.textContent(`${exposedRow} td.port-access`)).trim();
	result.publicUrl = await page.$eval(`${exposedRow} td.port-url a`, (a) => a.textContent);
	page.on('console', (m) => {
		const u = m.location()?.url ?? '';
		if (u.includes('.preview.localhost') && m.type() === 'error') result.frameConsole.push(m.text().slice(0, 300));
	});
	await page.click(`${exposedRow} button.port-frame`);
	const frameEl = await page.waitForSelector('iframe#port-frame', { timeout: T });
	const frame = await frameEl.contentFrame();
	await frame.waitForFunction(() => document.getElementById('ws')?.textContent === 'ws-ok', null, { timeout: T }).catch(async (e) => {
		const text = await frame.textContent('body').catch(() => '');
		const note = await page.textContent('#port-frame-error').catch(() => '');
		throw new Error(`the frame at ${frame.url()} shows "${text.slice(0, 300)}" (${note}): ${e.message}`);
	});
	await page.waitForTimeout(500);
	result.framed = { ws: await frame.textContent('#ws'), url: frame.url(), hint: !(await page.$eval('#port-frame-hint', (x) => x.hidden)) };
	await shot(page, 'preview-frame');
	await page.click(`${exposedRow} button.port-revoke`);
	await page.waitForSelector(exposedRow, { state: 'detached', timeout: T });

	step('a host workspace: 409');
	await page.goto(`${base}/#/w/${encodeURIComponent(hostWs)}/ports`);
	await page.waitForFunction(() => !/Loading/.test(document.querySelector('#ports-listening')?.textContent ?? 'Loading'), null, { timeout: T });
	await page.fill('#port-number', '3000');
	await page.click('#port-expose');
	await page.waitForFunction(() => /409/.test(document.querySelector('#ports-error')?.textContent || ''), null, { timeout: T });
	result.hostError = await page.textContent('#ports-error');
	await shot(page, 'ports-host');

	await browser.close();
	result.ok = true;
	finish(0);
} catch (e) {
	result.error = String(e.message || e).slice(0, 2000);
	try {
		const p = browser?.contexts()[0]?.pages()[0];
		if (p) {
			result.pageText = (await p.textContent('body')).slice(0, 1500);
			await p.screenshot({ path: path.join(shots, 'failed.png'), fullPage: true });
		}
	} catch {}
	if (browser) await browser.close().catch(() => {});
	finish(1);
}
