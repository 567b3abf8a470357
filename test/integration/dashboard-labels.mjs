// SPDX-License-Identifier: MIT
// Names and labels in the dashboard, in headless Chromium (Debian's, through npm's
// playwright-core):
//
//   node dashboard-labels.mjs BASE_URL TOKEN WS_A WS_B WS_C SHOT_DIR
//
// WS_A is named web-a with labels team=x, tier=db and a note whose value is markup; WS_B is
// web-b with team=y; WS_C has neither and is paused. Reads what the list shows (name, labels,
// network), filters it by label, by name and by state (and which list requests the page made),
// then on A's page edits its name and labels: a taken name and a bad key are refused in the
// form, then a rename with a label changed, one removed and one added. One JSON line on stdout:
// {ok, step, error, ...facts}; the caller asserts the facts.
import fs from 'node:fs';
import { launch, scriptRun } from './dashboard-lib.mjs';

const [base, token, wsA, wsB, wsC, shotDir] = process.argv.slice(2);
const result = { ok: false, step: 'start', console: [], dialogs: [], shots: [], lists: [] };
const T = 60000;

const { finish, step, waitState, shot } = scriptRun(result, T, shotDir);

// The ids the list shows, in order.
const rowIds = () => [...document.querySelectorAll('#ws-table tbody tr')].map((r) => r.dataset.id);
const listShown = () => document.querySelector('#ws-table') ? rowIds() : document.querySelector('#workspaces')?.textContent;

// Sets the list's filters and waits for exactly 'want' (ids, any order; [] for "none match").
async function filterTo(page, what, { name = '', label = '', state = '' }, want) {
	await page.fill('#filter-name', name);
	await page.fill('#filter-label', label);
	await page.selectOption('#filter-state', state);
	await waitState(page, what, (ids) => {
		const shown = document.querySelector('#ws-table') ? [...document.querySelectorAll('#ws-table tbody tr')].map((r) => r.dataset.id) :
			document.querySelector('#ws-none') ? [] : null;
		return shown && JSON.stringify([...shown].sort()) === JSON.stringify([...ids].sort());
	}, want, listShown);
}

let browser;
try {
	fs.mkdirSync(shotDir, { recursive: true });
	step('launch');
	browser = await launch();
	const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
	context.setDefaultTimeout(T);
	const page = await context.newPage();
	// The refusals the editor is made to meet are logged by the browser as failed loads: kept
	// apart, the caller asserts them.
	result.refusals = [];
	page.on('console', (m) => {
		if (/^Failed to load resource: the server responded with a status of (409|400)\b/.test(m.text())) result.refusals.push(m.text().slice(0, 300));
		else if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) result.console.push(m.text().slice(0, 300));
	});
	page.on('pageerror', (e) => result.console.push('pageerror: ' + String(e.message).slice(0, 300)));
	// A label's markup run as markup would open one (onerror=alert(1)).
	page.on('dialog', async (d) => {
		result.dialogs.push(d.message());
		await d.dismiss();
	});
	page.on('request', (r) => {
		const u = new URL(r.url());
		if (u.pathname === '/v1/workspaces' && r.method() === 'GET') result.lists.push(u.search);
	});

	step('sign in; the list: names, labels, network');
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token');
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await waitState(page, 'the three workspaces listed', (ids) => ids.every((id) => document.querySelector(`#ws-table tr[data-id="${id}"]`)),
		[wsA, wsB, wsC], listShown);
	result.rows = await page.evaluate((ids) => ids.map((id) => {
		const tr = document.querySelector(`#ws-table tr[data-id="${id}"]`);
		return {
			id,
			name: tr.querySelector('td.ws-name').textContent,
			labels: [...tr.querySelectorAll('td.ws-labels .label-chip')].map((c) => c.textContent),
			network: tr.querySelector('td.ws-network').textContent,
		};
	}), [wsA, wsB, wsC]);
	result.headers = await page.$$eval('#ws-table thead th', (ths) => ths.map((t) => t.textContent));
	result.imgsInList = await page.$$eval('#ws-table img', (els) => els.length);
	await shot(page, 'list');

	step('filter by label');
	await filterTo(page, 'team=x: A', { label: 'team=x' }, [wsA]);
	result.byLabel = await page.evaluate(rowIds);
	await filterTo(page, 'team (set): A and B', { label: 'team' }, [wsA, wsB]);
	await filterTo(page, 'team=y, tier: none', { label: 'team=y, tier' }, []);
	result.noneText = await page.textContent('#ws-none');
	await shot(page, 'filtered-none');
	step('filter by name and by state');
	await filterTo(page, 'name web-b: B', { name: 'web-b' }, [wsB]);
	result.byName = await page.evaluate(rowIds);
	await filterTo(page, 'state paused: C', { state: 'paused' }, [wsC]);
	result.byState = await page.evaluate(rowIds);
	await filterTo(page, 'ready, team=y: B', { label: 'team=y', state: 'ready' }, [wsB]);
	await filterTo(page, 'no filter: all three', {}, [wsA, wsB, wsC]);

	step("A's page: name, labels, network");
	await page.evaluate((hsh) => { location.hash = hsh; }, `#/w/${wsA}/commands`);
	await waitState(page, "A's summary", (id) => document.querySelector('#ws-id')?.textContent === id && !!document.querySelector('#ws-name'),
		wsA, () => document.querySelector('#ws-summary')?.textContent);
	result.detail = await page.evaluate(() => ({
		name: document.querySelector('#ws-name').textContent,
		labels: [...document.querySelectorAll('#ws-labels .label-chip')].map((c) => c.textContent),
		network: document.querySelector('#ws-network').textContent,
		imgs: document.querySelectorAll('#ws-summary img').length,
	}));

	step('edit: a taken name is refused in the form');
	await page.click('#ws-edit');
	await page.waitForSelector('#ws-edit-form #edit-name');
	await page.fill('#edit-name', 'web-b');
	await page.click('#edit-save');
	await waitState(page, 'the 409 shown', () => !document.querySelector('#edit-error')?.hidden,
		null, () => document.querySelector('#ws-edit-form')?.textContent);
	result.takenError = (await page.textContent('#edit-error')).trim();
	await shot(page, 'edit-refused');

	step('edit: a bad label key is refused in the form');
	await page.fill('#edit-name', 'web-new');
	await page.click('#edit-add-label');
	await page.fill('#edit-labels .label-row:last-child .label-key', 'Bad Key');
	await page.fill('#edit-labels .label-row:last-child .label-value', 'prod');
	await page.click('#edit-save');
	await waitState(page, 'the 400 shown', () => /HTTP 400/.test(document.querySelector('#edit-error')?.textContent || ''),
		null, () => document.querySelector('#edit-error')?.textContent);
	result.badKeyError = (await page.textContent('#edit-error')).trim();

	step('edit: rename, change team, remove tier, add env');
	await page.fill('#edit-labels .label-row:last-child .label-key', 'env');
	const rows = await page.$$('#edit-labels .label-row');
	for (const r of rows) {
		const key = await r.$eval('.label-key', (e) => e.value);
		if (key === 'team') await (await r.$('.label-value')).fill('z');
		if (key === 'tier') await (await r.$('.label-remove')).click();
	}
	await page.click('#edit-save');
	await waitState(page, 'the form closed, the new name shown', () => !document.querySelector('#ws-edit-form') && document.querySelector('#ws-name')?.textContent === 'web-new',
		null, () => ({ form: document.querySelector('#edit-error')?.textContent, name: document.querySelector('#ws-name')?.textContent }));
	result.edited = await page.evaluate(() => ({
		name: document.querySelector('#ws-name').textContent,
		labels: [...document.querySelectorAll('#ws-labels .label-chip')].map((c) => c.textContent),
	}));
	await shot(page, 'edited');

	step('the list after the edit: the new name finds A');
	await page.evaluate(() => { location.hash = '#/'; });
	await page.waitForSelector('#filter-name');
	await filterTo(page, 'name web-new: A', { name: 'web-new' }, [wsA]);
	await filterTo(page, 'tier=db: none any more', { label: 'tier=db' }, []);

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
