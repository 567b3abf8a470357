// SPDX-License-Identifier: MIT
// Drives the dashboard's pause/resume, Snapshots tab and Fork dialog in headless Chromium
// (Debian's, through npm's playwright-core) the way a person would:
//
//   node dashboard-snapshots.mjs BASE_URL TOKEN WORKSPACE SHOT_DIR
//
// WORKSPACE is a ready container workspace. Signs in, opens it: Pause (the badge says paused,
// the API too), Resume (ready); paused again, a command is refused on the page in words with a
// Resume button (no run made), which resumes it, and the command then runs. The Snapshots tab
// takes a named snapshot (listed, as the API lists it); Fork refuses 101 on the page, makes 2
// (two links, each opening a ready workspace); deleting the fork's snapshot, which the forks
// run on, is refused on the page, deleting another is done; "Create workspace from it" makes
// one; the create form makes one from the snapshot with auto-resume and pause when idle, which
// a command resumes. Any console error is a failure, but the browser's own line for each
// response the steps expect refused ("status of 409").
// One JSON line on stdout: {ok, step, error, ...facts}. PLAYWRIGHT_DIR: where playwright-core
// is installed; CHROMIUM: the browser (default /usr/bin/chromium).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [base, token, ws, shots] = process.argv.slice(2);
const result = { ok: false, step: 'start', console: [], refusedConsole: [], pageErrors: [] };
const T = 20000;
const SLOW = 120000; // a snapshot, a fork, a create
let refusalsExpected = 0; // the step's refusals: the browser logs each as a console error

function finish(code) {
	fs.writeSync(1, JSON.stringify(result) + '\n');
	process.exit(code);
}

function step(name) {
	result.step = name;
	process.stderr.write(`# step: ${name}\n`);
}

async function call(method, p, body) {
	const init = { method, headers: { Authorization: 'Bearer ' + token } };
	if (body !== undefined) {
		init.headers['Content-Type'] = 'application/json';
		init.body = JSON.stringify(body);
	}
	const res = await fetch(base + p, init);
	const text = await res.text();
	return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function get(p) {
	const r = await call('GET', p);
	if (r.status !== 200) throw new Error(`GET ${p}: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
	return r.body;
}

function watch(page) {
	page.on('console', (m) => {
		const text = `${m.type()}: ${m.text()} (${m.location()?.url ?? ''})`.slice(0, 300);
		process.stderr.write(`# console [${result.step}]: ${text}\n`);
		if (/Content Security Policy/i.test(m.text())) result.pageErrors.push(text);
		else if (m.type() !== 'error') return;
		else if (refusalsExpected > 0 && /status of 409/.test(m.text())) {
			refusalsExpected--;
			result.refusedConsole.push(`[${result.step}] ${text}`);
		} else result.console.push(`[${result.step}] ${text}`);
	});
	page.on('pageerror', (e) => {
		process.stderr.write(`# page error [${result.step}]: ${e.stack}\n`);
		result.pageErrors.push(String(e.message).slice(0, 300));
	});
}

async function shot(page, name) {
	await page.screenshot({ path: path.join(shots, name + '.png'), fullPage: true }).catch(() => {});
}

const stateSel = (s) => `#ws-state .badge[data-state="${s}"]`;

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
	watch(page);
	page.on('dialog', (d) => d.accept());

	step('sign in');
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token', { timeout: T });
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await page.waitForSelector('#refresh', { timeout: T });
	await page.waitForSelector(`#ws-table tr[data-id="${ws}"] .badge[data-state="ready"]`, { timeout: T });

	step('open the workspace: ready, Pause offered');
	await page.goto(`${base}/#/w/${encodeURIComponent(ws)}`);
	await page.waitForSelector(stateSel('ready'), { timeout: T });
	result.pauseEnabledReady = await page.$eval('#ws-pause', (b) => !b.disabled);
	result.resumeShownReady = (await page.$('#ws-resume')) !== null;

	step('Pause: the badge says paused, the API too');
	await page.click('#ws-pause');
	await page.waitForSelector(stateSel('paused'), { timeout: T });
	result.pausedBadge = await page.$eval(stateSel('paused'), (b) => ({
		text: b.textContent, cls: b.className, title: b.title,
		colour: getComputedStyle(b).color, background: getComputedStyle(b).backgroundColor,
	}));
	result.readyBadgeColour = await page.evaluate(() => {
		const b = document.createElement('span');
		b.className = 'badge good';
		document.body.append(b);
		const c = getComputedStyle(b).backgroundColor;
		b.remove();
		return c;
	});
	result.pausedSince = await page.textContent('#ws-paused-at');
	result.pauseShownPaused = (await page.$('#ws-pause')) !== null;
	const paused = await get(`/v1/workspaces/${ws}`);
	result.apiPaused = { state: paused.state, pausedAt: paused.pausedAt ?? null };
	await shot(page, 'paused');

	step('the workspace list shows it paused');
	await page.goto(`${base}/#/`);
	await page.waitForSelector(`#ws-table tr[data-id="${ws}"] .badge[data-state="paused"]`, { timeout: T });
	result.listBadge = await page.$eval(`#ws-table tr[data-id="${ws}"] .badge`, (b) => ({ text: b.textContent, cls: b.className }));
	await shot(page, 'list-paused');

	step('Resume: ready');
	await page.goto(`${base}/#/w/${encodeURIComponent(ws)}`);
	await page.waitForSelector('#ws-resume', { timeout: T });
	await page.click('#ws-resume');
	await page.waitForSelector(stateSel('ready'), { timeout: T });
	result.apiResumed = (await get(`/v1/workspaces/${ws}`)).state;

	step('paused, a command is refused on the page with Resume');
	await page.click('#ws-pause');
	await page.waitForSelector(stateSel('paused'), { timeout: T });
	const runsBefore = (await get(`/v1/workspaces/${ws}/commands?limit=1000`)).commands.length;
	await page.fill('#cmd', 'echo after-resume');
	refusalsExpected = 1;
	await page.click('#run');
	await page.waitForSelector('#cmd-error[data-code="paused"]:not([hidden]) button.resume-here', { timeout: T });
	result.pausedRefusal = await page.textContent('#cmd-error');
	result.refusalWiderThanPage = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth);
	result.runsWhilePaused = (await get(`/v1/workspaces/${ws}/commands?limit=1000`)).commands.length - runsBefore;
	await shot(page, 'command-refused-paused');

	step('its Resume button resumes; the command then runs');
	await page.click('#cmd-error button.resume-here');
	await page.waitForSelector(stateSel('ready'), { timeout: T });
	result.refusalHidden = await page.$eval('#cmd-error', (e) => e.hidden);
	result.apiResumedFromNotice = (await get(`/v1/workspaces/${ws}`)).state;
	await page.click('#run');
	await page.waitForFunction(() => document.querySelector('#run-exit')?.textContent === '0', null, { timeout: T });
	result.runAfterResume = { exit: await page.textContent('#run-exit'), shown: /after-resume/.test(await page.textContent('#run-detail')) };

	step('Snapshots tab: take one named before-fork');
	await page.click('nav.tabs a[data-tab="snapshots"]');
	await page.waitForSelector('#snap-name', { timeout: T });
	await page.waitForFunction(() => !/Loading/.test(document.querySelector('#snap-list')?.textContent ?? 'Loading'), null, { timeout: T });
	await page.fill('#snap-name', 'before-fork');
	await page.click('#snap-take');
	await page.waitForSelector('#snap-notice:not([hidden])', { timeout: SLOW });
	const apiSnaps = (await get('/v1/snapshots')).snapshots.filter((s) => s.workspaceId === ws && s.name === 'before-fork');
	if (apiSnaps.length !== 1) throw new Error(`the API lists ${apiSnaps.length} snapshots named before-fork of ${ws}`);
	const snap = apiSnaps[0];
	result.snapshot = { id: snap.id, image: snap.image, sizeBytes: snap.sizeBytes };
	const snapRow = `#snap-table tr[data-id="${snap.id}"]`;
	await page.waitForSelector(snapRow, { timeout: T });
	result.snapshotRow = await page.$eval(snapRow, (tr) => [...tr.children].slice(0, 6).map((td) => td.textContent));
	result.notice = await page.textContent('#snap-notice');
	result.stateAfterSnapshot = (await get(`/v1/workspaces/${ws}`)).state;
	await shot(page, 'snapshot-taken');

	step('Fork: 101 refused on the page');
	const countBefore = (await get('/v1/workspaces')).workspaces.length;
	await page.click('#ws-fork');
	await page.waitForSelector('#fork-dialog[open] #fork-count', { timeout: T });
	await page.fill('#fork-count', '101');
	await page.click('#fork-go');
	await page.waitForSelector('#fork-error:not([hidden])', { timeout: T });
	result.fork101 = await page.textContent('#fork-error');
	result.madeBy101 = (await get('/v1/workspaces')).workspaces.length - countBefore;

	step('Fork: 2, two links');
	await page.fill('#fork-count', '2');
	await page.click('#fork-go');
	await page.waitForSelector('#fork-result:not([hidden]) a.fork-link', { timeout: SLOW });
	result.forkErrorHidden = await page.$eval('#fork-error', (e) => e.hidden);
	const links = await page.$$eval('#fork-result a.fork-link', (as) => as.map((a) => ({ id: a.textContent, href: a.getAttribute('href') })));
	result.forkLinks = links;
	result.forkText = await page.textContent('#fork-result');
	const forkSnap = (await page.textContent('#fork-snapshot')).trim();
	result.forkSnapshot = forkSnap;
	await shot(page, 'forked');

	step('each link opens a ready workspace');
	result.forks = [];
	for (const [i, l] of links.entries()) {
		if (i === 0) await page.click(`#fork-result a.fork-link[href="${l.href}"]`);
		else await page.goto(base + '/' + l.href);
		await page.waitForFunction((id) => document.querySelector('#ws-id')?.textContent === id, l.id, { timeout: T });
		await page.waitForSelector(stateSel('ready'), { timeout: SLOW });
		result.forks.push({ id: l.id, pageState: 'ready', dialogGone: (await page.$('#fork-dialog')) === null, api: (await get(`/v1/workspaces/${l.id}`)).state });
	}
	await shot(page, 'fork-opened');

	step('the Snapshots tab: the fork\'s snapshot, which its forks run on, refused; another deleted');
	await page.goto(`${base}/#/w/${encodeURIComponent(ws)}/snapshots`);
	await page.waitForSelector(snapRow, { timeout: T });
	await page.fill('#snap-name', 'scratch');
	await page.click('#snap-take');
	const scratch = await (async () => {
		for (let i = 0; i < SLOW / 100; i++) {
			const s = (await get('/v1/snapshots')).snapshots.find((x) => x.workspaceId === ws && x.name === 'scratch');
			if (s) return s;
			await page.waitForTimeout(100);
		}
		throw new Error('the snapshot named scratch never listed');
	})();
	await page.waitForSelector(`#snap-table tr[data-id="${scratch.id}"]`, { timeout: T });
	const forkRow = `#snap-table tr[data-id="${forkSnap}"]`;
	await page.waitForSelector(forkRow, { timeout: T });
	refusalsExpected = 1;
	await page.click(`${forkRow} button.snap-delete`);
	await page.waitForSelector('#snap-error:not([hidden])', { timeout: T });
	result.deleteInUse = await page.textContent('#snap-error');
	result.inUseStillThere = (await call('GET', `/v1/snapshots/${forkSnap}`)).status;
	await page.click(`#snap-table tr[data-id="${scratch.id}"] button.snap-delete`);
	await page.waitForSelector(`#snap-table tr[data-id="${scratch.id}"]`, { state: 'detached', timeout: SLOW });
	result.deletedStatus = (await call('GET', `/v1/snapshots/${scratch.id}`)).status;
	result.snapErrorAfterDelete = await page.$eval('#snap-error', (e) => (e.hidden ? '' : e.textContent));

	step('Create workspace from it');
	await page.click(`${snapRow} button.snap-create`);
	await page.waitForSelector('#snap-created', { timeout: SLOW });
	const created = await page.textContent('#snap-created');
	await page.click('#snap-created');
	await page.waitForFunction((id) => document.querySelector('#ws-id')?.textContent === id, created, { timeout: T });
	await page.waitForSelector(stateSel('ready'), { timeout: SLOW });
	const fromTab = await get(`/v1/workspaces/${created}`);
	result.fromTab = { id: created, state: fromTab.state, snapshot: fromTab.snapshot ?? null, adapter: fromTab.adapter };

	step('the create form: from the snapshot, auto-resume, pause when idle');
	await page.goto(`${base}/#/`);
	await page.waitForSelector(`#new-snapshot option[value="${snap.id}"]`, { state: 'attached', timeout: T });
	await page.selectOption('#new-adapter', 'container');
	await page.selectOption('#new-snapshot', snap.id);
	result.imageDisabled = await page.$eval('#new-image', (s) => s.disabled);
	await page.check('#new-auto-resume');
	await page.fill('#new-idle', '600');
	await page.selectOption('#new-idle-action', 'pause');
	await shot(page, 'create-form');
	await page.click('#create');
	await page.waitForFunction(() => /^#\/w\/[^/]+$/.test(location.hash), null, { timeout: SLOW });
	const formId = decodeURIComponent(await page.evaluate(() => location.hash.slice(4)));
	await page.waitForSelector(stateSel('ready'), { timeout: SLOW });
	const fromForm = await get(`/v1/workspaces/${formId}`);
	result.fromForm = { id: formId, snapshot: fromForm.snapshot ?? null, autoResume: fromForm.autoResume, idleAction: fromForm.idleAction, idleTimeoutMs: fromForm.idleTimeoutMs };
	result.fromFormPage = { idle: await page.textContent('#ws-idle'), autoResume: await page.textContent('#ws-auto-resume') };

	step('auto-resume: paused, a command resumes it');
	await page.click('#ws-pause');
	await page.waitForSelector(stateSel('paused'), { timeout: T });
	await page.fill('#cmd', 'cat "$HOME/marker"');
	await page.click('#run');
	await page.waitForFunction(() => document.querySelector('#run-exit')?.textContent === '0', null, { timeout: SLOW });
	await page.waitForSelector(stateSel('ready'), { timeout: T });
	// the exit code can show before the output's last chunk is drawn: wait for the file's text
	const shown = await page.waitForFunction(() => /forked-content/.test(document.querySelector('#run-detail')?.textContent || ''),
		null, { timeout: T, polling: 100 }).then(() => true, () => false);
	result.autoResumed = { output: shown, text: shown ? undefined : (await page.textContent('#run-detail')).slice(0, 500), api: (await get(`/v1/workspaces/${formId}`)).state };
	await shot(page, 'auto-resumed');

	// a moment for a late console error to show
	await page.waitForTimeout(500);
	result.unusedRefusals = refusalsExpected;
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
