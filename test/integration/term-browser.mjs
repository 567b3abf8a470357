// SPDX-License-Identifier: MIT
// A headless Chromium (Debian's, driven by npm's playwright-core) attaches to a terminal the way
// a browser page does: new WebSocket(url, ["station-sandbox", "bearer.<token>"]) (browsers
// cannot set Authorization), types keys into the page and waits for their output.
//
//   node term-browser.mjs PAGE_FILE WS_URL TOKEN TEXT EXPECT
//
// One JSON line on stdout: {ok, protocol, output (the page's text), error}. PLAYWRIGHT_DIR: where
// playwright-core is installed; CHROMIUM: the browser (default /usr/bin/chromium).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

const [pageFile, wsUrl, token, text, expect] = process.argv.slice(2);

const page_html = `<!doctype html><meta charset="utf-8"><title>terminal</title>
<textarea id="keys" autofocus></textarea><pre id="out"></pre><div id="state">connecting</div>
<script>
const out = document.getElementById('out'), state = document.getElementById('state');
const ws = new WebSocket(${JSON.stringify(wsUrl)}, ['station-sandbox', 'bearer.' + ${JSON.stringify(token)}]);
ws.binaryType = 'arraybuffer';
const dec = new TextDecoder();
ws.onopen = () => { state.textContent = 'open ' + ws.protocol; };
ws.onclose = (e) => { state.textContent = 'closed ' + e.code; };
ws.onmessage = (m) => {
  if (typeof m.data === 'string') return;
  out.textContent += dec.decode(m.data, { stream: true }).replace(/\\x1b\\[[0-9;?]*[a-zA-Z]/g, '');
};
document.getElementById('keys').addEventListener('keydown', (e) => {
  const k = e.key === 'Enter' ? '\\r' : e.key.length === 1 ? e.key : null;
  if (k !== null && ws.readyState === 1) ws.send(new TextEncoder().encode(k));
  e.preventDefault();
});
</script>`;

function finish(r, code) {
	fs.writeSync(1, JSON.stringify(r) + '\n');
	process.exit(code);
}

let browser;
try {
	fs.writeFileSync(pageFile, page_html);
	browser = await chromium.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
			'--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'],
	});
	const page = await browser.newPage();
	await page.goto('file://' + pageFile);
	await page.waitForFunction(() => document.getElementById('state').textContent.startsWith('open'),
		null, { timeout: 15000 });
	const protocol = (await page.textContent('#state')).slice(5);
	await page.focus('#keys');
	await page.keyboard.type(text);
	await page.keyboard.press('Enter');
	await page.waitForFunction((re) => new RegExp(re).test(document.getElementById('out').textContent),
		expect, { timeout: 15000 });
	const output = await page.textContent('#out');
	await browser.close();
	finish({ ok: true, protocol, output }, 0);
} catch (e) {
	let output = null;
	try {
		output = browser ? await browser.contexts()[0]?.pages()[0]?.textContent('body') : null;
	} catch {}
	if (browser) await browser.close().catch(() => {});
	finish({ ok: false, error: String(e.message || e).slice(0, 2000), output }, 1);
}
