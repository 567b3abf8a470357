// SPDX-License-Identifier: MIT
// Drives the dashboard (web/, served by the controller at /) in headless Chromium (Debian's,
// through npm's playwright-core), the way a person would:
//
//   node dashboard.mjs BASE_URL TOKEN WORKER SCREENSHOT
//
// signs in with the token, sees the worker and its checks, creates a host workspace, runs a
// command and sees its output, status and exit code, types into a terminal, starts a service
// and sees its state and attempts, closes the tab; then, in a new tab, an API call without the
// token gets 401 and the page shows its login; and in another, with xterm.js blocked, the
// terminal view falls back to plain text and still works. One JSON line on stdout: {ok, step, error,
// workspace, ...facts}; the caller checks the rest through the API. PLAYWRIGHT_DIR: where
// playwright-core is installed; CHROMIUM: the browser (default /usr/bin/chromium).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [base, token, workerName, screenshot] = process.argv.slice(2);
const result = { ok: false, step: 'start', console: [] };
const T = 20000;

function finish(code) {
	fs.writeSync(1, JSON.stringify(result) + '\n');
	process.exit(code);
}

function step(name) {
	result.step = name;
	process.stderr.write(`# step: ${name}\n`);
}

async function newPage(context) {
	const page = await context.newPage();
	page.on('console', (m) => {
		if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) result.console.push(m.text().slice(0, 300));
	});
	page.on('pageerror', (e) => result.console.push('pageerror: ' + String(e.message).slice(0, 300)));
	return page;
}

async function signIn(page, t) {
	await page.waitForSelector('#login #token', { timeout: T });
	await page.fill('#token', t);
	await page.click('#login button[type=submit]');
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
	let page = await newPage(context);
	const apiStatuses = [];
	context.on('response', (r) => {
		if (new URL(r.url()).pathname.startsWith('/v1/')) apiStatuses.push([r.request().method(), new URL(r.url()).pathname, r.status(), !!r.request().headers().authorization]);
	});

	step('open the page');
	const res = await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	result.documentStatus = res.status();
	result.csp = res.headers()['content-security-policy'] || null;
	result.frameOptions = res.headers()['x-frame-options'] || null;

	step('a wrong token is refused');
	await signIn(page, 'not-the-token');
	await page.waitForSelector('#login .error:not([hidden])', { timeout: T });
	result.wrongTokenMessage = (await page.textContent('#login .error')).trim();

	step('sign in and see the worker');
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await page.waitForFunction((w) => document.querySelector('#worker-name')?.textContent === w, workerName, { timeout: T });
	await page.waitForSelector('#ready li.check', { timeout: T });
	result.checks = await page.$$eval('#ready li.check', (els) => els.map((e) => e.dataset.check + ':' + e.querySelector('.msg').textContent.length));
	result.checkMarks = await page.$$eval('#ready li.check', (els) => Object.fromEntries(els.map((e) => [e.dataset.check, e.className.replace('check', '').trim() + ' ' + e.querySelector('.mark').textContent])));
	result.defaultImage = (await page.textContent('#worker-default-image')).trim();
	result.tokenInUrl = page.url().includes(token);

	step('the create form offers the network modes and an allow list for restricted');
	await page.waitForSelector('#create-form #new-adapter', { timeout: T });
	result.networkModes = await page.$$eval('#new-network option', (els) => els.map((e) => e.value).join(','));
	result.allowRowHiddenForNone = await page.$eval('#allow-row', (e) => e.hidden);
	result.allowRowShownForRestricted = await page.evaluate(() => {
		const adapter = document.querySelector('#new-adapter'), network = document.querySelector('#new-network');
		if (![...adapter.options].some((o) => o.value === 'container')) adapter.append(new Option('container', 'container'));
		adapter.value = 'container';
		network.value = 'restricted';
		network.dispatchEvent(new Event('change'));
		const shown = !document.querySelector('#allow-row').hidden;
		network.value = 'none';
		network.dispatchEvent(new Event('change'));
		return shown && document.querySelector('#allow-row').hidden;
	});
	result.allowParsed = await page.evaluate(async () =>
		JSON.stringify((await import('/ui/worker.js')).parseAllow('github.com\n*.npmjs.org:443\n203.0.113.0/24:443,80/tcp')));

	step('create a host workspace');
	await page.selectOption('#new-adapter', 'host');
	await page.click('#create');
	await page.waitForFunction(() => /^#\/w\//.test(location.hash), null, { timeout: T });
	await page.waitForSelector('#ws-id', { timeout: T });
	result.workspace = (await page.textContent('#ws-id')).trim();
	result.workspaceAdapter = (await page.textContent('#ws-adapter')).trim();

	step('run a command and see its output, status and exit code');
	await page.fill('#cmd', 'echo hi; echo err >&2; exit 3');
	await page.click('#run');
	await page.waitForSelector('#run-status[data-status=exited]', { timeout: T });
	await page.waitForFunction(() => { const t = document.querySelector('#run-output')?.textContent || ''; return /hi/.test(t) && /err/.test(t); }, null, { timeout: T });
	result.runOutput = await page.textContent('#run-output');
	result.runStderr = await page.$$eval('#run-output .stderr', (els) => els.map((e) => e.textContent).join(''));
	result.runStatus = await page.$eval('#run-status .badge', (e) => e.textContent);
	result.runExit = (await page.textContent('#run-exit')).trim();
	await page.waitForSelector('#history-table tbody tr', { timeout: T });
	result.historyStatus = await page.$eval('#history-table tbody tr .badge', (e) => e.textContent);
	if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });

	step('a finished run from the history shows its stored output');
	await page.click('#history-table tbody tr:first-child button');
	await page.waitForSelector('#run-detail #run-stored', { timeout: T });
	// the log viewer writes what it got on its next tick (every 50 ms), not at once
	await page.waitForSelector('#run-stored .chunk[data-stream=stdout]', { timeout: T });
	await page.waitForSelector('#run-stored .chunk[data-stream=stderr]', { timeout: T });
	result.storedStdout = await page.$$eval('#run-stored .chunk[data-stream=stdout]', (els) => els.map((e) => e.textContent).join(''));
	result.storedStderr = await page.$$eval('#run-stored .chunk[data-stream=stderr]', (els) => els.map((e) => e.textContent).join(''));

	step('open a terminal, type echo hello, see hello');
	await page.click('a.tab[data-tab=terminals]');
	await page.click('#term-open');
	await page.waitForSelector('#term-conn[data-state=attached]', { timeout: T });
	result.terminalRenderer = await page.$eval('#term-screen', (e) => e.dataset.renderer);
	if (result.terminalRenderer === 'xterm') await page.click('#term-screen .xterm');
	else await page.click('#term-keys');
	await page.keyboard.type('echo hello');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => {
		const rows = [...document.querySelectorAll('#term-screen .xterm-rows > div')].map((r) => r.textContent.trim());
		const plain = document.querySelector('#term-plain')?.textContent || '';
		return rows.includes('hello') || /(^|\n)hello\n/.test(plain);
	}, null, { timeout: T });
	result.terminalSawHello = true;
	result.terminalId = page.url().split('/').pop();

	step('start a service and see its state and attempts');
	await page.click('a.tab[data-tab=services]');
	await page.waitForSelector('#svc-form', { timeout: T });
	await page.fill('#svc-name', 'web');
	await page.fill('#svc-command', 'echo up; exec sleep 600');
	await page.selectOption('#svc-policy', 'on-failure');
	await page.click('#svc-start');
	await page.waitForSelector('#svc-table tr[data-name=web] .badge[data-state=running]', { timeout: T });
	await page.waitForFunction(() => document.querySelector('#svc-table tr[data-name=web] .svc-attempts')?.textContent === '1', null, { timeout: T });
	result.serviceAttempts = (await page.textContent('#svc-table tr[data-name=web] .svc-attempts')).trim();
	result.serviceRestarts = (await page.textContent('#svc-table tr[data-name=web] .svc-restarts')).trim();
	await page.waitForSelector('#svc-detail [data-attempt="1"]', { timeout: T });
	result.serviceDetail = (await page.textContent('#svc-detail h3:last-of-type')).trim();
	// The running attempt's output is followed live without asking.
	await page.waitForFunction(() => /up/.test(document.querySelector('#svc-logs')?.textContent || ''), null, { timeout: T });
	result.serviceLogs = await page.textContent('#svc-logs');

	step('close the tab');
	await page.close();
	result.tabClosed = true;

	step('a call without the token gets 401 and the page shows the login');
	page = await newPage(context);
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await signIn(page, token);
	await page.waitForSelector('#refresh', { timeout: T });
	// The page polls too: whichever call goes out first without the token gets the 401.
	const unauthorized = page.waitForResponse((r) => new URL(r.url()).pathname.startsWith('/v1/') && r.status() === 401, { timeout: T });
	unauthorized.catch(() => {});
	await page.evaluate(() => sessionStorage.removeItem('station.token'));
	await page.click('#refresh', { timeout: 3000 }).catch(() => {});
	const r401 = await unauthorized;
	result.unauthorizedHadToken = !!r401.request().headers().authorization;
	await page.waitForSelector('#login #token', { timeout: T });
	result.loginMessage = (await page.textContent('#login .error')).trim();

	step('without xterm.js the terminal view falls back to plain text');
	page = await newPage(context);
	await page.route('**/ui/vendor/**', (r) => r.abort());
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await signIn(page, token);
	await page.waitForSelector('#refresh', { timeout: T });
	await page.evaluate(([w, t]) => { location.hash = `#/w/${w}/terminals/${t}`; }, [result.workspace, result.terminalId]);
	await page.waitForSelector('#term-conn[data-state=attached]', { timeout: T });
	result.fallbackRenderer = await page.$eval('#term-screen', (e) => e.dataset.renderer);
	await page.click('#term-keys');
	await page.keyboard.type('echo pl""ain');
	await page.keyboard.press('Enter');
	await page.waitForFunction(() => /(^|\n)plain\n/.test(document.querySelector('#term-plain')?.textContent || ''), null, { timeout: T });
	result.fallbackSawOutput = true;
	result.fallbackReplayedHello = /(^|\n)hello\n/.test(await page.textContent('#term-plain'));
	await page.close();

	result.apiCallsWithoutToken = apiStatuses.filter(([, , , auth]) => !auth).map((a) => a.slice(0, 3).join(' '));
	result.apiUnauthorized = apiStatuses.filter(([, , s]) => s === 401).length;
	await browser.close();
	result.ok = true;
	finish(0);
} catch (e) {
	result.error = String(e.message || e).slice(0, 2000);
	try {
		const p = browser?.contexts()[0]?.pages().at(-1);
		if (p) {
			result.pageText = (await p.textContent('body')).slice(0, 1500);
			if (screenshot) await p.screenshot({ path: screenshot.replace(/\.png$/, '') + '-failed.png', fullPage: true });
		}
	} catch {}
	if (browser) await browser.close().catch(() => {});
	finish(1);
}
