// SPDX-License-Identifier: MIT
// A terminal attacher over a real WebSocket client (the npm `ws` package) for
// test-terminals.sh. Usage:
//
//   node term-client.mjs URL STEPS_JSON OUT_DIR
//
// URL: ws+unix:///path/station.sock:/v1/.../attach or ws://host:port/... ; STEPS_JSON an array of
// steps run in order once the socket is open:
//   {"send": "text"}               a binary message with these bytes (UTF-8)
//   {"expect": "regex", "ms": N}   wait until the output received so far matches (default 10 s)
//   {"resize": [cols, rows]}       a resize control message
//   {"text": "raw"}                a raw text message
//   {"waitFile": "path"}           wait until the file exists (a gate the test opens)
//   {"pauseUntil": "path"}         stop reading from the socket until the file exists
//   {"sleep": ms}
//   {"close": true}                close with 1000 and finish
//   {"waitClose": true}            wait for the server to close, then finish
// OUT_DIR/output collects every binary byte as it arrives, OUT_DIR/open appears once open; an
// expectation is matched against the newest 256 KiB. The result, one JSON line on stdout:
// {open, code, reason, texts: [...], gaps: N, bytes: N, exit, error, output (the newest bytes)}.
// Environment: WS_MODULE_DIR (where ws is installed), TERM_TOKEN (a bearer token, sent as the
// subprotocol "bearer.<token>" next to "station-sandbox"), TERM_TIMEOUT_MS (whole run, 60 s).

import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.WS_MODULE_DIR || process.cwd(), 'x.js'));
const WebSocket = require('ws');

const [url, stepsJson, outDir] = process.argv.slice(2);
const steps = JSON.parse(stepsJson);
const WINDOW = 256 * 1024;
const result = { open: false, texts: [], gaps: 0, bytes: 0 };
const outFile = fs.openSync(path.join(outDir, 'output'), 'w');
let output = Buffer.alloc(0);
let waiters = [];
let closed = false;

function finish(code = 0) {
	result.output = output.toString('latin1');
	fs.writeSync(1, JSON.stringify(result) + '\n'); // whole, before exit, even to a pipe
	process.exit(code);
}

setTimeout(() => {
	result.error = result.error || 'timeout';
	finish(1);
}, Number(process.env.TERM_TIMEOUT_MS || 60000)).unref();

const protocols = process.env.TERM_TOKEN ? ['station-sandbox', `bearer.${process.env.TERM_TOKEN}`] : undefined;
const ws = new WebSocket(url, protocols, { perMessageDeflate: false });

function poke() {
	const w = waiters;
	waiters = [];
	w.forEach((f) => f());
}

function until(pred, ms, what) {
	return new Promise((resolve, reject) => {
		const t = setTimeout(() => reject(new Error(`timeout waiting for ${what}`)), ms);
		const check = () => {
			if (pred()) {
				clearTimeout(t);
				resolve();
			} else {
				waiters.push(check);
			}
		};
		check();
	});
}

function fileGate(file) {
	return new Promise((resolve) => {
		const check = () => (fs.existsSync(file) ? resolve() : setTimeout(check, 20));
		check();
	});
}

ws.on('unexpected-response', (req, res) => {
	let body = '';
	res.on('data', (d) => (body += d));
	res.on('end', () => {
		result.status = res.statusCode;
		result.body = body;
		finish(1);
	});
});
ws.on('error', (e) => {
	result.error = String(e.message || e);
	finish(1);
});
ws.on('message', (data, isBinary) => {
	if (isBinary) {
		// Expectations look at the newest WINDOW bytes only: a flood stays cheap to match.
		output = Buffer.concat([output.length > WINDOW ? output.subarray(-WINDOW) : output, data]);
		result.bytes += data.length;
		fs.writeSync(outFile, data);
	} else {
		const m = JSON.parse(data.toString());
		result.texts.push(m.type);
		if (m.type === 'gap') result.gaps += m.bytes;
		if (m.type === 'exit') result.exit = m;
		if (m.type === 'error') result.lastError = m.error;
	}
	poke();
});
ws.on('close', (code, reason) => {
	closed = true;
	result.code = code;
	result.reason = reason.toString();
	poke();
});

async function run() {
	for (const s of steps) {
		if (s.send !== undefined) ws.send(Buffer.from(s.send, 'utf8'), { binary: true });
		else if (s.text !== undefined) ws.send(s.text, { binary: false });
		else if (s.resize) ws.send(JSON.stringify({ type: 'resize', cols: s.resize[0], rows: s.resize[1] }));
		else if (s.expect !== undefined) {
			const re = new RegExp(s.expect);
			await until(() => re.test(output.toString('latin1')), s.ms || 10000, `/${s.expect}/`);
		} else if (s.waitFile) await fileGate(s.waitFile);
		else if (s.pauseUntil) {
			ws._socket.pause();
			await fileGate(s.pauseUntil);
			ws._socket.resume();
		} else if (s.sleep) await new Promise((r) => setTimeout(r, s.sleep));
		else if (s.close) {
			ws.close(1000, 'bye');
			await until(() => closed, 10000, 'close');
			return;
		} else if (s.waitClose) {
			await until(() => closed, s.ms || 20000, 'the server to close');
			return;
		}
	}
	ws.close(1000, 'done');
	await until(() => closed, 10000, 'close');
}

ws.on('open', () => {
	result.open = true;
	fs.writeFileSync(path.join(outDir, 'open'), '');
	run().then(
		() => finish(0),
		(e) => {
			result.error = String(e.message || e);
			finish(1);
		},
	);
});
