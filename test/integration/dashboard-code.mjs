// SPDX-License-Identifier: MIT
// The dashboard's Code tab in headless Chromium (Debian's, through npm's playwright-core):
//
//   node dashboard-code.mjs BASE_URL TOKEN WS SHOT_DIR
//
// On WS's Code tab, python cells one after another: 1+1, a matplotlib plot of 4x3 inches at
// 50 dpi (uncropped), 1 / 0, x = 41, an endless loop stopped with Interrupt, x + 1, and an
// IPython HTML object whose markup would run script if it were live. One JSON line on stdout:
// {ok, step, error, ...facts}; the caller asserts the facts.
import fs from 'node:fs';
import { launch, scriptRun } from './dashboard-lib.mjs';

const [base, token, ws, shotDir] = process.argv.slice(2);
const result = { ok: false, step: 'start', console: [], dialogs: [], shots: [], cells: [] };
const T = 90000; // a first cell starts the interpreter (the controller waits up to 30 s for it)

const { finish, step, waitState, shot } = scriptRun(result, T, shotDir);

// What cell i (0-based) shows.
function cellView(i) {
	const c = document.querySelectorAll('#code-cells .cell')[i];
	if (!c) return { missing: i, cells: document.querySelectorAll('#code-cells .cell').length, bar: document.querySelector('#code-context')?.textContent };
	const texts = (sel) => [...c.querySelectorAll(sel)].map((e) => e.textContent);
	return {
		status: c.dataset.status ?? null,
		badge: c.querySelector('.cell-status')?.textContent ?? null,
		stdout: texts('.cell-stdout').join(''),
		stderr: texts('.cell-stderr').join(''),
		results: texts('.cell-result'),
		html: texts('.cell-html pre'),
		htmlOpen: [...c.querySelectorAll('.cell-html')].map((d) => d.open),
		error: texts('.cell-error').join(''),
		imgs: [...c.querySelectorAll('.cell-output img')].map((img) => ({ complete: img.complete, w: img.naturalWidth, h: img.naturalHeight })),
		elements: c.querySelectorAll('.cell-output *').length,
	};
}

// Types code into cell i, presses Run (Shift+Enter with 'keys') and returns once the cell
// ended (its data-status set), or once 'until' holds when given.
async function runCell(page, i, code, { keys = false, until = null } = {}) {
	const cell = page.locator('#code-cells .cell').nth(i);
	await cell.locator('textarea').fill(code);
	if (keys) await cell.locator('textarea').press('Shift+Enter');
	else await cell.locator('.cell-run').click();
	if (until) return;
	await waitState(page, `cell ${i} (${code.split('\n')[0]}) to end`, (n) => {
		const c = document.querySelectorAll('#code-cells .cell')[n];
		return c && c.dataset.status && !c.querySelector('.cell-run').disabled;
	}, i, cellView);
	const v = await page.evaluate(cellView, i);
	result.cells.push({ code, ...v });
	return v;
}

let browser;
try {
	fs.mkdirSync(shotDir, { recursive: true });
	step('launch');
	browser = await launch();
	const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
	context.setDefaultTimeout(T);
	const page = await context.newPage();
	page.on('console', (m) => {
		if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) result.console.push(m.text().slice(0, 300));
	});
	page.on('pageerror', (e) => result.console.push('pageerror: ' + String(e.message).slice(0, 300)));
	// The HTML result run as markup would open one (onerror=alert(1)).
	page.on('dialog', async (d) => {
		result.dialogs.push(d.message());
		await d.dismiss();
	});

	step('sign in; the Code tab');
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token');
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await page.waitForSelector('#ws-table');
	await page.evaluate((hsh) => { location.hash = hsh; }, `#/w/${encodeURIComponent(ws)}/code`);
	await page.waitForSelector('#code-cells .cell textarea');
	result.language = await page.$eval('#code-lang', (s) => s.value);

	step('1+1 (Shift+Enter)');
	await runCell(page, 0, '1+1', { keys: true });
	result.context = await page.$eval('#code-context code', (c) => c.textContent).catch(() => null);

	step('a plot');
	await runCell(page, 1, [
		"%config InlineBackend.print_figure_kwargs = {'bbox_inches': None}",
		'import matplotlib.pyplot as plt',
		'fig = plt.figure(figsize=(4, 3), dpi=50)',
		'plt.plot([1, 2, 3])',
		'plt.show()',
	].join('\n'));
	await waitState(page, 'the plot decoded', () => {
		const img = document.querySelectorAll('#code-cells .cell')[1].querySelector('img');
		return img && img.complete && img.naturalWidth > 0;
	}, null, () => cellView(1));
	result.plot = await page.evaluate(cellView, 1);
	await shot(page, 'plot');

	step('1 / 0');
	await runCell(page, 2, '1 / 0');

	step('x = 41; an endless loop, interrupted');
	await runCell(page, 3, 'x = 41');
	await runCell(page, 4, "print('looping', flush=True)\nwhile True: pass", { until: true });
	await waitState(page, 'the loop printing', () => /looping/.test(document.querySelectorAll('#code-cells .cell')[4].querySelector('.cell-stdout')?.textContent || ''),
		null, () => cellView(4));
	result.interruptEnabled = await page.locator('#code-cells .cell').nth(4).locator('.cell-interrupt').isEnabled();
	await page.locator('#code-cells .cell').nth(4).locator('.cell-interrupt').click();
	await waitState(page, 'the loop interrupted', () => document.querySelectorAll('#code-cells .cell')[4].dataset.status,
		null, () => cellView(4));
	result.cells.push({ code: 'while True: pass', ...await page.evaluate(cellView, 4) });
	await shot(page, 'interrupted');

	step('x + 1 after the interrupt');
	await runCell(page, 5, 'x + 1');

	step('an HTML result');
	await runCell(page, 6, "from IPython.display import HTML\nHTML('<img src=x onerror=alert(1)>')");
	result.imgsOnPage = await page.$$eval('img', (els) => els.map((e) => e.getAttribute('src')?.slice(0, 30)));
	await shot(page, 'html');

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
