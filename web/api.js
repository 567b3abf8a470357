// SPDX-License-Identifier: MIT
// The HTTP API (docs/api.md) from the page: every call carries the bearer token, kept in this
// tab's sessionStorage (never in a URL). A 401 anywhere sends the page back to its login.

const TOKEN_KEY = 'station.token';

export function getToken() {
	return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(t) {
	if (t) sessionStorage.setItem(TOKEN_KEY, t);
	else sessionStorage.removeItem(TOKEN_KEY);
}

export class ApiError extends Error {
	constructor(status, code, message, field) {
		super(message);
		this.status = status;
		this.code = code;
		this.field = field;
	}
}

// Called with the ApiError of every 401; app.js shows the login.
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) {
	onUnauthorized = fn;
}

// The workers this controller knows (GET /v1/workers: {self, names}) when it knows more than
// itself, and the one the current view's calls go to. A view of a workspace on another worker
// sends its calls through /v1/workers/NAME/v1/... (docs/api.md, "Workers"): the controller
// forwards them with this tab's token. WebSockets are relayed to the worker; event streams
// (SSE) are not, so readEvents() takes an endpoint's WebSocket variant there instead.
let fleet = null;
let remote = null;

export function setFleet(f) {
	fleet = f && f.names && f.names.length > 1 ? f : null;
}

export function getFleet() {
	return fleet;
}

// The worker an id names: the longest configured name that, with a '-', begins it.
export function workerOfId(id) {
	if (!fleet) return null;
	let best = null;
	for (const n of fleet.names) if (id.startsWith(n + '-') && (!best || n.length > best.length)) best = n;
	return best;
}

// name: the worker the next calls go to; null (or this controller's own name) for this one.
export function setRemote(name) {
	remote = fleet && name && name !== fleet.self ? name : null;
}

export function remoteWorker() {
	return remote;
}

export function routed(path) {
	if (!remote || !path.startsWith('/v1/') || path.startsWith('/v1/workers')) return path;
	return '/v1/workers/' + encodeURIComponent(remote) + path;
}

function headers(extra) {
	const hd = { ...extra };
	const t = getToken();
	if (t) hd.Authorization = 'Bearer ' + t;
	return hd;
}

async function errorOf(res, quiet401) {
	let code = null, message = `HTTP ${res.status} ${res.statusText}`, field = null;
	try {
		const j = await res.json();
		if (j && j.error) {
			code = j.error.code ?? null;
			message = j.error.message || message;
			field = j.error.field ?? null;
		}
	} catch {}
	const e = new ApiError(res.status, code, message, field);
	if (res.status === 401 && !quiet401) onUnauthorized(e);
	return e;
}

// api('GET', '/v1/worker') → parsed JSON; throws ApiError. okStatuses: more statuses whose body
// is returned rather than thrown (GET /v1/ready answers 503 with its checks).
// quiet401: a 401 is only thrown (the login itself checks a token that way).
export async function api(method, path, body, { signal, okStatuses = [], quiet401 = false } = {}) {
	const init = { method, headers: headers(), signal, cache: 'no-store' };
	if (body !== undefined) {
		init.headers['Content-Type'] = 'application/json';
		init.body = JSON.stringify(body);
	}
	let res;
	try {
		res = await fetch(routed(path), init);
	} catch (e) {
		if (e.name === 'AbortError') throw e;
		throw new ApiError(0, 'network', `cannot reach the controller: ${e.message}`);
	}
	if (!res.ok && !okStatuses.includes(res.status)) throw await errorOf(res, quiet401);
	return res.status === 204 ? null : res.json();
}

export const enc = encodeURIComponent;

export function wsUrl(path) {
	return (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + path;
}

// A WebSocket with the token as a subprotocol (browsers cannot set Authorization on one).
export function openSocket(path) {
	const protocols = ['station-sandbox'];
	const t = getToken();
	if (t) protocols.push('bearer.' + t);
	const ws = new WebSocket(wsUrl(routed(path)), protocols);
	ws.binaryType = 'arraybuffer';
	return ws;
}

// Follows GET /v1/events (docs/api.md, "Events") over a WebSocket: onEvent(ev) for each state
// change that passes query ({workspace, types}); after a drop it connects again (1 s, doubling
// to 30 s) with since = the last seq seen, so nothing is missed (a `gap` event says when
// something was). Returns the function that stops it.
export function followEvents(query, onEvent) {
	let since = null;
	let ws = null;
	let timer = null;
	let stopped = false;
	let delay = 1000;
	function open() {
		const q = new URLSearchParams();
		for (const [k, v] of Object.entries(query)) if (v) q.set(k, v);
		if (since !== null) q.set('since', String(since));
		const qs = q.toString();
		ws = openSocket('/v1/events' + (qs ? '?' + qs : ''));
		ws.onmessage = (m) => {
			let ev;
			try {
				ev = JSON.parse(m.data);
			} catch {
				return;
			}
			if (typeof ev?.seq !== 'number') return;
			since = ev.seq;
			delay = 1000;
			onEvent(ev);
		};
		ws.onclose = () => {
			ws = null;
			if (stopped) return;
			timer = setTimeout(open, delay);
			delay = Math.min(delay * 2, 30000);
		};
	}
	open();
	return () => {
		stopped = true;
		clearTimeout(timer);
		if (ws) ws.close(1000);
	};
}

// What a view shows is reloaded when an event about it comes (coalesced: once per 250 ms at
// most), and every fallbackMs anyway, slowly, should the event stream be down.
export function liveRefresh(ctx, query, reload, fallbackMs = 30000) {
	let pending = null;
	const soon = () => {
		if (pending) return;
		pending = setTimeout(() => {
			pending = null;
			if (ctx.alive) reload();
		}, 250);
	};
	ctx.onClose(followEvents(query, soon));
	ctx.onClose(() => clearTimeout(pending));
	ctx.every(fallbackMs, reload);
}

// Server-sent events read with fetch (EventSource cannot send Authorization). Calls
// onEvent(name, data) per event; resolves when the stream ends; abort with signal. On another
// worker (event streams are not forwarded) the endpoint's WebSocket variant, read the same way.
export async function readEvents(path, onEvent, signal) {
	if (remote) return readSocketEvents(path, onEvent, signal);
	const res = await fetch(routed(path), { headers: headers({ Accept: 'text/event-stream' }), signal, cache: 'no-store' });
	if (!res.ok) throw await errorOf(res);
	const reader = res.body.getReader();
	const dec = new TextDecoder();
	let buf = '';
	for (;;) {
		const { value, done } = await reader.read();
		if (done) break;
		buf += dec.decode(value, { stream: true });
		let i;
		while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
			const block = buf.slice(0, i);
			buf = buf.slice(i + (buf[i] === '\r' ? 4 : 2));
			let name = 'message';
			const data = [];
			for (const line of block.split(/\r?\n/)) {
				if (line.startsWith(':')) continue;
				const c = line.indexOf(':');
				const k = c < 0 ? line : line.slice(0, c);
				const v = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
				if (k === 'event') name = v;
				else if (k === 'data') data.push(v);
			}
			if (data.length) onEvent(name, data.join('\n'));
		}
	}
}

function b64encode(bytes) {
	let bin = '';
	for (let i = 0; i < bytes.length; i += 8192) bin += String.fromCharCode(...bytes.subarray(i, i + 8192));
	return btoa(bin);
}

// The WebSocket variant of an event stream (docs/api.md: output and logs, file watches) as
// readEvents() calls: a binary output message (1 byte stream, 8 bytes offset, the data) is
// ('output', {stream, offset, data: base64}); a text message {type, ...} is (type, its JSON),
// an end's run or service as the SSE end carries it.
function readSocketEvents(path, onEvent, signal) {
	return new Promise((resolve, reject) => {
		if (signal?.aborted) return reject(new DOMException('aborted', 'AbortError'));
		const ws = openSocket(path);
		let opened = false;
		const onAbort = () => {
			ws.close(1000);
			reject(new DOMException('aborted', 'AbortError'));
		};
		signal?.addEventListener('abort', onAbort, { once: true });
		ws.onopen = () => (opened = true);
		ws.onmessage = (m) => {
			if (typeof m.data !== 'string') {
				const b = new Uint8Array(m.data);
				if (b.length < 9) return;
				const offset = Number(new DataView(m.data).getBigUint64(1));
				onEvent('output', JSON.stringify({ stream: b[0] === 2 ? 'stderr' : 'stdout', offset, data: b64encode(b.subarray(9)) }));
				return;
			}
			let msg;
			try {
				msg = JSON.parse(m.data);
			} catch {
				return;
			}
			if (!msg || typeof msg.type !== 'string') return;
			if (msg.type === 'end' && (msg.run || msg.service)) onEvent('end', JSON.stringify(msg.run || msg.service));
			else onEvent(msg.type, m.data);
		};
		ws.onclose = (ev) => {
			signal?.removeEventListener('abort', onAbort);
			if (opened) resolve();
			else reject(new ApiError(0, 'network', `the stream from worker ${remote} could not be opened (${ev.code})`));
		};
	});
}

export function b64decode(s) {
	const bin = atob(s);
	return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}
