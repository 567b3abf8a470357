// SPDX-License-Identifier: MIT
// Drives the dashboard's Files tab in headless Chromium (Debian's, through npm's
// playwright-core), the way a person would, and checks each step through the API:
//
//   node dashboard-files.mjs BASE_URL TOKEN SCREENSHOT [CONTAINER_WORKSPACE]
//
// signs in, creates a host workspace, opens the Files tab, makes a folder and a file, types
// into the editor and saves (the bytes through the API), sees a change made through the API
// (the editor reloads while clean; while modified it says so, and saving then asks: overwrite,
// and another time reload), sees files made and deleted through the API come and go in the
// tree, uploads with the file input and by drag and drop, downloads, renames, deletes a
// folder after a confirmation that names its content, refuses a binary and a > 2 MiB file for
// editing, shows hostile names as text; then, with the CodeMirror bundle blocked, edits in
// the textarea it falls back to. Every request the pages make is to BASE_URL's origin.
// With CONTAINER_WORKSPACE (a container workspace that holds a symlink pw -> /etc/passwd in its
// working directory): the tree starts at the container's working directory, a file saved
// there arrives, and the link opens the container's /etc/passwd, never this machine's.
// One JSON line on stdout: {ok, step, error, ...facts}. PLAYWRIGHT_DIR: where playwright-core
// is installed; CHROMIUM: the browser (default /usr/bin/chromium).
import { createRequire } from 'node:module';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [base, token, screenshot, containerWs] = process.argv.slice(2);
const origin = new URL(base).origin;
const result = { ok: false, step: 'start', console: [], pageErrors: [], foreignRequests: [] };
const T = 20000;

function finish(code) {
	fs.writeSync(1, JSON.stringify(result) + '\n');
	process.exit(code);
}

function step(name) {
	result.step = name;
	process.stderr.write(`# step: ${name}\n`);
}

const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');

// The API from here (not through the page): bytes, JSON, statuses.
async function call(method, p, { body, headers = {} } = {}) {
	const res = await fetch(base + p, { method, body, headers: { Authorization: 'Bearer ' + token, ...headers } });
	return { status: res.status, bytes: Buffer.from(await res.arrayBuffer()), headers: res.headers };
}
async function readFile(ws, p) {
	const r = await call('GET', `/v1/workspaces/${ws}/files?path=${encodeURIComponent(p)}`);
	if (r.status !== 200) throw new Error(`GET ${p}: ${r.status} ${r.bytes.toString().slice(0, 200)}`);
	return r.bytes;
}
async function writeFile(ws, p, data) {
	const r = await call('PUT', `/v1/workspaces/${ws}/files?path=${encodeURIComponent(p)}&parents=1`, { body: data, headers: { 'Content-Type': 'application/octet-stream' } });
	if (r.status !== 200 && r.status !== 201) throw new Error(`PUT ${p}: ${r.status} ${r.bytes.toString().slice(0, 200)}`);
}
async function statusOf(ws, p) {
	return (await call('GET', `/v1/workspaces/${ws}/files/stat?path=${encodeURIComponent(p)}`)).status;
}

async function newPage(context) {
	const page = await context.newPage();
	// Errors the API answers are logged by the browser too (console); a script error or a
	// CSP refusal is a failure (pageErrors).
	page.on('console', (m) => {
		if (/Content Security Policy/i.test(m.text())) result.pageErrors.push(m.text().slice(0, 300));
		else if (m.type() === 'error') result.console.push(m.text().slice(0, 300));
	});
	page.on('pageerror', (e) => result.pageErrors.push(String(e.message).slice(0, 300)));
	return page;
}

async function signIn(page) {
	await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
	await page.waitForSelector('#login #token', { timeout: T });
	await page.fill('#token', token);
	await page.click('#login button[type=submit]');
	await page.waitForSelector('#refresh', { timeout: T });
}

// The editor's text, byte for byte what a save sends (CodeMirror, or the textarea fallback).
async function editorText(page) {
	return page.evaluate(async () => {
		const box = document.querySelector('#files-editor');
		if (box.dataset.renderer === 'textarea') return document.querySelector('#files-text').value;
		const { EditorView } = await import('/ui/vendor/codemirror.mjs');
		return EditorView.findFromDOM(box.querySelector('.cm-editor')).state.sliceDoc();
	});
}

async function waitEditorText(page, want) {
	const deadline = Date.now() + T;
	let got;
	while (Date.now() < deadline) {
		got = await editorText(page).catch(() => null);
		if (got === want) return;
		await page.waitForTimeout(50);
	}
	throw new Error(`the editor shows ${JSON.stringify(got)}, not ${JSON.stringify(want)}`);
}

const row = (p) => `#files-tree li[data-path="${p.replace(/["\\]/g, '\\$&')}"] > .files-row`;

// Waits for the editor of the file at p: the pane names p and its editor is made. Waiting for
// an editor alone may find the one of the file open before the click.
async function waitEditorOf(page, p) {
	await page.waitForFunction((want) => {
		const t = document.querySelector('#files-open-path');
		return t && t.title === want && document.querySelector('#files-editor[data-renderer]');
	}, p, { timeout: T });
}

// Answers the open dialog with the button of value v (after filling its input with text).
async function answer(page, v, text) {
	await page.waitForSelector('#files-dialog[open]', { timeout: T });
	if (text !== undefined) await page.fill('#files-dialog-input', text);
	const body = (await page.textContent('#files-dialog')).replace(/\s+/g, ' ').trim();
	await page.click(`#files-dialog button[value="${v}"]`);
	await page.waitForSelector('#files-dialog', { state: 'detached', timeout: T });
	return body;
}

async function containerSession(page, ws) {
	result.workspace = ws;
	step('sign in and open the Files tab of the container workspace');
	await signIn(page);
	await page.evaluate((w) => { location.hash = `#/w/${w}/files`; }, ws);
	await page.waitForSelector('#files-tree > li[aria-expanded=true]', { timeout: T });
	const home = (result.home = await page.$eval('#files-tree > li', (e) => e.dataset.path));
	await page.waitForSelector('#files-watch[data-state=live]', { timeout: T });
	result.watchLive = true;

	step('a new file, typed and saved, inside the container');
	await page.click('#files-new-file');
	await answer(page, 'create', 'notes.md');
	await page.waitForSelector('#files-editor[data-renderer]', { timeout: T });
	result.language = await page.$eval('#files-editor', (e) => e.dataset.language);
	await page.click('#files-editor .cm-content');
	await page.keyboard.type('# In the container');
	await page.keyboard.press('Control+s');
	await page.waitForSelector('#files-state[data-state=saved]', { timeout: T });
	result.savedExact = (await readFile(ws, home + '/notes.md')).toString('utf8') === '# In the container';

	step("the link to /etc/passwd opens the container's file");
	await page.waitForSelector(row(home + '/pw'), { timeout: T });
	await page.click(row(home + '/pw'));
	await waitEditorOf(page, home + '/pw');
	const shownPw = await editorText(page);
	result.linkIsContainers = shownPw === (await readFile(ws, '/etc/passwd')).toString('utf8');
	result.linkIsNotHosts = shownPw !== fs.readFileSync('/etc/passwd', 'utf8');
	if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
}

let browser;
try {
	step('launch');
	browser = await chromium.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
			'--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'],
	});
	const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, acceptDownloads: true });
	context.on('request', (r) => {
		const u = r.url();
		if (!/^(data|blob):/.test(u) && new URL(u).origin !== origin) result.foreignRequests.push(u.slice(0, 200));
	});
	let page = await newPage(context);

	if (containerWs) {
		await containerSession(page, containerWs);
		await browser.close();
		result.ok = true;
		finish(0);
	}

	step('sign in and create a host workspace');
	await signIn(page);
	await page.waitForSelector('#create-form #new-adapter', { timeout: T });
	await page.selectOption('#new-adapter', 'host');
	await page.click('#create');
	await page.waitForSelector('#ws-id', { timeout: T });
	const ws = (result.workspace = (await page.textContent('#ws-id')).trim());

	step('open the Files tab: the workspace directory, listed');
	await page.click('a.tab[data-tab=files]');
	await page.waitForSelector('#files-tree > li[aria-expanded=true]', { timeout: T });
	const home = (result.home = await page.$eval('#files-tree > li', (e) => e.dataset.path));
	await page.waitForSelector('#files-watch[data-state=live]', { timeout: T });
	result.watchLive = true;

	step('make a folder');
	await page.click('#files-new-folder');
	await answer(page, 'create', 'src');
	const src = home + '/src';
	await page.waitForSelector(row(src), { timeout: T });
	result.folderType = await page.$eval(`#files-tree li[data-path="${src}"]`, (e) => e.dataset.type);
	result.folderApiStatus = await statusOf(ws, src);

	step('make a file in it: it opens in the editor, highlighted as JavaScript');
	await page.click(row(src));
	await page.click('#files-new-file');
	await answer(page, 'create', 'app.js');
	const app = src + '/app.js';
	await page.waitForSelector(row(app), { timeout: T });
	await waitEditorOf(page, app);
	result.renderer = await page.$eval('#files-editor', (e) => e.dataset.renderer);
	result.language = await page.$eval('#files-editor', (e) => e.dataset.language);

	step('type and save: the bytes arrive');
	await page.click('#files-editor .cm-content');
	await page.keyboard.type("const greeting = 'h\u00e9llo, \u4e16\u754c';");
	await page.keyboard.press('Enter');
	await page.keyboard.type('export default greeting;');
	await page.waitForSelector('#files-state[data-state=modified]', { timeout: T });
	const typed = "const greeting = 'h\u00e9llo, \u4e16\u754c';\nexport default greeting;";
	result.editorBeforeSave = await editorText(page);
	await page.keyboard.press('Control+s');
	await page.waitForSelector('#files-state[data-state=saved]', { timeout: T });
	result.savedExact = (await readFile(ws, app)).equals(Buffer.from(typed, 'utf8'));
	result.highlightedSpans = await page.$$eval('#files-editor .cm-line span[class]', (els) => els.length);
	if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });

	step('a change through the API: the clean editor reloads');
	const theirs1 = 'export const fromApi = 1;\n';
	await writeFile(ws, app, theirs1);
	await waitEditorText(page, theirs1);
	await page.waitForSelector('#files-notice[data-kind=reloaded]', { timeout: T });
	result.reloadedNotice = (await page.textContent('#files-notice')).trim();
	result.stateAfterReload = await page.$eval('#files-state', (e) => e.dataset.state);

	step('modified, then changed through the API: the editor says so; saving asks; overwrite');
	await page.click('#files-editor .cm-content');
	await page.keyboard.press('Control+End');
	await page.keyboard.type('// mine');
	await page.waitForSelector('#files-state[data-state=modified]', { timeout: T });
	await writeFile(ws, app, 'export const fromApi = 2;\n');
	await page.waitForSelector('#files-notice[data-kind=changed]', { timeout: T });
	result.changedNotice = (await page.textContent('#files-notice')).trim();
	result.keptMine = (await editorText(page)) === theirs1 + '// mine';
	await page.click('#files-save');
	result.conflictDialog = await answer(page, 'overwrite');
	await page.waitForSelector('#files-state[data-state=saved]', { timeout: T });
	result.overwriteExact = (await readFile(ws, app)).toString('utf8') === theirs1 + '// mine';

	step('once more; this time the dialog reloads what is on disk');
	await page.click('#files-editor .cm-content');
	await page.keyboard.press('Control+End');
	await page.keyboard.type(' and more');
	await page.waitForSelector('#files-state[data-state=modified]', { timeout: T });
	const theirs3 = 'export const fromApi = 3;\r\nwindows();\r\n';
	await writeFile(ws, app, theirs3);
	await page.waitForSelector('#files-notice[data-kind=changed]', { timeout: T });
	await page.click('#files-save');
	await answer(page, 'reload');
	await waitEditorText(page, theirs3);
	result.reloadKeptDisk = (await readFile(ws, app)).toString('utf8') === theirs3;

	step('CRLF lines stay CRLF through an edit and a save');
	await page.click('#files-editor .cm-content');
	await page.keyboard.press('Control+End');
	await page.keyboard.type('x();');
	await page.keyboard.press('Enter');
	await page.click('#files-save');
	await page.waitForSelector('#files-state[data-state=saved]', { timeout: T });
	result.crlfExact = (await readFile(ws, app)).toString('utf8') === theirs3 + 'x();\r\n';

	step('files made and deleted through the API come and go in the tree');
	await writeFile(ws, src + '/from-api.txt', 'made elsewhere\n');
	await page.waitForSelector(row(src + '/from-api.txt'), { timeout: T });
	await call('DELETE', `/v1/workspaces/${ws}/files?path=${encodeURIComponent(src + '/from-api.txt')}`);
	await page.waitForSelector(row(src + '/from-api.txt'), { state: 'detached', timeout: T });
	result.treeFollowsWatch = true;

	step('upload with the file input (binary, streamed)');
	const blob = crypto.randomBytes(300 * 1024);
	blob[10] = 0;
	await page.click(row(src));
	await page.setInputFiles('#files-upload-input', { name: 'blob.bin', mimeType: 'application/octet-stream', buffer: blob });
	await page.waitForSelector(row(src + '/blob.bin'), { timeout: T });
	result.uploadExact = sha(await readFile(ws, src + '/blob.bin')) === sha(blob);

	step('upload by drag and drop onto the folder');
	const dropped = 'dropped on the folder\n';
	const dt = await page.evaluateHandle((text) => {
		const d = new DataTransfer();
		d.items.add(new File([text], 'dropped.txt', { type: 'text/plain' }));
		return d;
	}, dropped);
	await page.dispatchEvent(row(src), 'dragover', { dataTransfer: dt });
	await page.dispatchEvent(row(src), 'drop', { dataTransfer: dt });
	await page.waitForSelector(row(src + '/dropped.txt'), { timeout: T });
	result.dropExact = (await readFile(ws, src + '/dropped.txt')).toString('utf8') === dropped;

	step('a binary file is not opened for editing; it is offered for download');
	await page.click(row(src + '/blob.bin'));
	await page.waitForSelector('#files-refusal', { timeout: T });
	result.binaryRefusal = (await page.textContent('#files-refusal')).trim();

	step('download it: the same bytes');
	const [dl] = await Promise.all([page.waitForEvent('download', { timeout: T }), page.click('#files-offer-download')]);
	result.downloadName = dl.suggestedFilename();
	result.downloadExact = sha(fs.readFileSync(await dl.path())) === sha(blob);

	step('a file over 2 MiB is offered for download, not edited');
	await writeFile(ws, src + '/big.txt', Buffer.alloc(2 * 1024 * 1024 + 1, 0x61));
	await page.waitForSelector(row(src + '/big.txt'), { timeout: T });
	await page.click(row(src + '/big.txt'));
	await page.waitForFunction(() => /too large/.test(document.querySelector('#files-refusal')?.textContent || ''), null, { timeout: T });
	result.bigRefusal = (await page.textContent('#files-refusal')).trim();

	step('hostile names are text');
	const evil = src + '/<img src=x onerror=alert(1)>.js';
	const bidi = src + '/evil\u202egnp.js';
	await writeFile(ws, evil, 'x');
	await writeFile(ws, bidi, 'x');
	await page.waitForSelector(row(bidi), { timeout: T });
	await page.waitForSelector(row(evil), { timeout: T });
	result.evilName = await page.textContent(row(evil) + ' .files-name');
	result.bidiName = await page.textContent(row(bidi) + ' .files-name');
	result.imgInTree = await page.$$eval('#files-tree img', (e) => e.length);

	step('a symlink out of the workspace: the API refuses it and the page says why; one inside opens');
	// A host workspace's paths are this machine's: the links are made beside the API.
	const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'files-outside-'));
	fs.writeFileSync(outside + '/secret.txt', 'host secret\n');
	fs.symlinkSync(outside + '/secret.txt', src + '/out-link');
	fs.symlinkSync('app.js', src + '/in-link');
	await page.waitForSelector(row(src + '/in-link'), { timeout: T });
	await page.waitForSelector(row(src + '/out-link'), { timeout: T });
	await page.click(row(src + '/in-link'));
	await waitEditorOf(page, src + '/in-link');
	result.inLinkOpens = (await editorText(page)) === (await readFile(ws, app)).toString('utf8');
	await page.click(row(src + '/out-link'));
	await page.waitForSelector('#files-error:not([hidden])', { timeout: T });
	result.outLinkError = (await page.textContent('#files-error')).trim();
	result.outLinkShowsNoSecret = !(await page.textContent('body')).includes('host secret');

	step('rename');
	await page.click(row(src + '/dropped.txt'));
	await page.click('#files-rename');
	await answer(page, 'rename', 'renamed.txt');
	await page.waitForSelector(row(src + '/renamed.txt'), { timeout: T });
	await page.waitForSelector(row(src + '/dropped.txt'), { state: 'detached', timeout: T });
	result.renameOld = await statusOf(ws, src + '/dropped.txt');
	result.renameNew = (await readFile(ws, src + '/renamed.txt')).toString('utf8') === dropped;

	step('delete the folder: the confirmation names what goes');
	await page.click(row(src));
	await page.click('#files-delete');
	await page.waitForSelector('#files-dialog[open] #files-doomed', { timeout: T });
	result.doomed = await page.$$eval('#files-doomed li', (els) => els.map((e) => e.textContent));
	result.deleteDialog = await answer(page, 'delete');
	await page.waitForSelector(row(src), { state: 'detached', timeout: T });
	result.deletedStatus = await statusOf(ws, src);
	result.editorClosed = (await page.$('#files-editor')) === null;
	result.outsideKept = fs.readFileSync(outside + '/secret.txt', 'utf8') === 'host secret\n';
	fs.rmSync(outside, { recursive: true, force: true });
	await page.close();

	step('without the CodeMirror bundle the editor is a textarea, and saves');
	page = await newPage(context);
	await page.route('**/ui/vendor/codemirror.mjs', (r) => r.abort());
	await signIn(page);
	await writeFile(ws, home + '/plain.md', '# Title\r\n');
	await page.evaluate((w) => { location.hash = `#/w/${w}/files`; }, ws);
	await page.waitForSelector(row(home + '/plain.md'), { timeout: T });
	await page.click(row(home + '/plain.md'));
	await page.waitForSelector('#files-editor[data-renderer=textarea] #files-text', { timeout: T });
	result.fallbackRenderer = 'textarea';
	await page.click('#files-text');
	await page.keyboard.press('Control+End');
	await page.keyboard.type('text');
	await page.keyboard.press('Enter');
	await page.keyboard.press('Control+s');
	await page.waitForSelector('#files-state[data-state=saved]', { timeout: T });
	result.fallbackExact = (await readFile(ws, home + '/plain.md')).toString('utf8') === '# Title\r\ntext\r\n';
	await page.close();

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
