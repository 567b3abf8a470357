// SPDX-License-Identifier: MIT
// A real WebSocket client (the npm `ws` package) for test-websocket.sh. One mode per run; the
// result is one JSON line on stdout. URLs: ws+unix:///path/station.sock:/v1/... or ws://host:port/...
//
//   output URL DIR [PAUSE_FILE]  collect a run's output: DIR/stdout, DIR/stderr (data in arrival
//                                order), DIR/open once open; with PAUSE_FILE, stop reading right
//                                after the handshake until that file exists
//   raw URL HEX                  write HEX to the socket as is (a hand-made frame), then a ping
//   text URL HEX                 send the bytes HEX as one text message, then a ping
//   binary URL BYTES             send BYTES zero bytes as one binary message, then a ping
//                                (these three close with 1000 "bye" once the ping is answered)
//   chat URL                     ping, a fragmented text with a ping inside, then close 1000
//   status URL [TOKEN]           open (with a bearer token), report the status or the close
//   events URL FILE [PAUSE_FILE] append each text message as a line to FILE (FILE.open once
//                                open); with PAUSE_FILE, read nothing until that file exists;
//                                report the close
//
// ws is resolved from WS_MODULE_DIR (where the test installed it).

import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.env.WS_MODULE_DIR || process.cwd(), 'x.js'));
const WebSocket = require('ws');

const [mode, url, ...args] = process.argv.slice(2);
const TIMEOUT_MS = Number(process.env.WS_CLIENT_TIMEOUT_MS || 60000);

function finish(result, code = 0) {
	process.stdout.write(JSON.stringify(result) + '\n');
	process.exit(code);
}

setTimeout(() => finish({ error: 'timeout' }, 1), TIMEOUT_MS).unref();

function connect(options = {}) {
	// No permessage-deflate: RSV1 frames would be a protocol error to a server without it.
	const ws = new WebSocket(url, { perMessageDeflate: false, ...options });
	ws.on('unexpected-response', (req, res) => {
		let body = '';
		res.on('data', (d) => (body += d));
		res.on('end', () => finish({ status: res.statusCode, headers: res.headers, body }));
	});
	ws.on('error', (e) => finish({ error: String(e.message || e) }, 1));
	return ws;
}

function onClose(ws, extra = () => ({})) {
	ws.on('close', (code, reason) => finish({ code, reason: reason.toString(), ...extra() }));
}

function waitForFile(file, then) {
	if (fs.existsSync(file)) return then();
	setTimeout(() => waitForFile(file, then), 20);
}

function modeOutput() {
	const [dir, pauseFile] = args;
	const files = { 1: fs.openSync(path.join(dir, 'stdout'), 'w'), 2: fs.openSync(path.join(dir, 'stderr'), 'w') };
	const next = { 1: 0n, 2: 0n };
	const names = { stdout: 1, stderr: 2 };
	const r = { binary: 0, gaps: [], texts: [], offsetErrors: [], bytes: { stdout: 0, stderr: 0 } };
	const ws = connect();
	ws.on('open', () => {
		if (pauseFile) {
			ws._socket.pause();
			waitForFile(pauseFile, () => ws._socket.resume());
		}
		fs.writeFileSync(path.join(dir, 'open'), '');
	});
	ws.on('message', (data, isBinary) => {
		if (!isBinary) {
			const m = JSON.parse(data.toString());
			r.texts.push(m.type);
			if (m.type === 'gap') {
				const s = names[m.stream];
				if (BigInt(m.offset) !== next[s]) r.offsetErrors.push(`gap at ${m.offset}, expected ${next[s]}`);
				next[s] = BigInt(m.offset) + BigInt(m.bytes);
				r.gaps.push(m);
			} else if (m.type === 'end') {
				r.end = m.run;
			} else {
				r.other = m;
			}
			return;
		}
		r.binary++;
		const s = data[0];
		const offset = data.readBigUInt64BE(1);
		const payload = data.subarray(9);
		if (s !== 1 && s !== 2) return r.offsetErrors.push(`stream byte ${s}`);
		if (offset !== next[s]) r.offsetErrors.push(`stream ${s}: offset ${offset}, expected ${next[s]}`);
		next[s] = offset + BigInt(payload.length);
		fs.writeSync(files[s], payload);
		r.bytes[s === 1 ? 'stdout' : 'stderr'] += payload.length;
	});
	onClose(ws, () => r);
}

// Sends something, then a ping: a connection that survived answers it, and then the client
// closes with 1000 "bye" (the positive control); one that did not closes first, pongs empty.
function sendThenPing(send) {
	const r = { pongs: [] };
	const ws = connect();
	ws.on('open', () => {
		send(ws);
		ws.ping('after');
	});
	ws.on('pong', (data) => {
		r.pongs.push(data.toString());
		ws.close(1000, 'bye');
	});
	onClose(ws, () => r);
}

function modeRaw() {
	sendThenPing((ws) => ws._socket.write(Buffer.from(args[0], 'hex')));
}

function modeText() {
	// ws does not check what it sends: invalid UTF-8 goes out as a text frame.
	sendThenPing((ws) => ws.send(Buffer.from(args[0], 'hex'), { binary: false }));
}

function modeBinary() {
	sendThenPing((ws) => ws.send(Buffer.alloc(Number(args[0])), { binary: true }));
}

function modeChat() {
	const r = { pongs: [] };
	const ws = connect();
	ws.on('pong', (data) => {
		r.pongs.push(data.toString());
		if (r.pongs.length === 1) {
			ws.send('frag-', { fin: false });
			ws.ping('in-between');
			ws.send('ment', { fin: true });
		} else if (r.pongs.length === 2) {
			ws.close(1000, 'bye');
		}
	});
	ws.on('open', () => ws.ping('station-ping'));
	onClose(ws, () => r);
}

function modeStatus() {
	const [token] = args;
	const ws = connect(token ? { headers: { Authorization: `Bearer ${token}` } } : {});
	ws.on('open', () => {
		finish({ open: true });
	});
}

function modeEvents() {
	const [file, pauseFile] = args;
	const fd = fs.openSync(file, 'w');
	const ws = connect();
	ws.on('open', () => {
		if (pauseFile) {
			ws._socket.pause();
			waitForFile(pauseFile, () => ws._socket.resume());
		}
		fs.writeFileSync(file + '.open', '');
	});
	ws.on('message', (data, isBinary) => {
		if (!isBinary) fs.writeSync(fd, data.toString() + '\n');
	});
	onClose(ws);
}

const modes = { events: modeEvents, output: modeOutput, raw: modeRaw, text: modeText, binary: modeBinary, chat: modeChat, status: modeStatus };
if (!modes[mode]) finish({ error: `unknown mode ${mode}` }, 2);
modes[mode]();
