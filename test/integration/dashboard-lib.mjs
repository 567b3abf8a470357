// SPDX-License-Identifier: MIT
// What the dashboard's Chromium scripts share: Debian's Chromium through npm's playwright-core
// (found in PLAYWRIGHT_DIR), and a script run: its facts printed as one JSON line at the end,
// named steps on stderr, a wait for a page state that says what the page showed when it gives
// up, full-page screenshots.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.PLAYWRIGHT_DIR || process.cwd(), 'x.js'));
const { chromium } = require('playwright-core');

// Headless Chromium (CHROMIUM, else Debian's) as every dashboard script starts it.
export function launch() {
	return chromium.launch({
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
			'--disable-dev-shm-usage', '--no-first-run', '--disable-extensions'],
	});
}

// result: the facts (result.step, result.shots filled here); T: how long a wait may take (ms);
// shotDir: where screenshots go.
export function scriptRun(result, T, shotDir) {
	const t0 = Date.now();
	return {
		finish(code) {
			fs.writeSync(1, JSON.stringify(result) + '\n');
			process.exit(code);
		},
		step(name) {
			result.step = name;
			process.stderr.write(`# step: ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)\n`);
		},
		async waitState(page, what, fn, arg, seen) {
			try {
				await page.waitForFunction(fn, arg, { timeout: T, polling: 100 });
			} catch (e) {
				let saw;
				try {
					saw = JSON.stringify(await page.evaluate(seen, arg));
				} catch (e2) {
					saw = `nothing readable (${e2.message.split('\n')[0]})`;
				}
				throw new Error(`${what}: not within ${T / 1000} s; the page showed ${saw} (${e.message.split('\n')[0]})`);
			}
		},
		async shot(page, name) {
			const file = path.join(shotDir, name + '.png');
			await page.screenshot({ path: file, fullPage: true });
			result.shots.push(file);
		},
	};
}
