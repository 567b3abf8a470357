// SPDX-License-Identifier: MIT
// Terminals: the list, opening one, and the attached view (xterm.js when the build embedded it,
// else a plain text view). Attaching uses the attach WebSocket with the token as a subprotocol;
// several tabs may attach at once. Closing the view or the tab leaves the terminal running.
import { api, enc, openSocket, liveRefresh } from './api.js';
import { h, replace, append, badge, fmtTime, fmtBytes, showError } from './dom.js';

const LIVE = ['starting', 'running'];

export function terminalsTab(root, ctx, wsPath, base) {
	const err = h('div.error', { hidden: true, role: 'alert' });
	const list = h('div#terminals', h('p.muted', 'Loading…'));
	const command = h('input#term-command', { type: 'text', placeholder: 'login shell', spellcheck: 'false' });
	const openBtn = h('button.primary#term-open', { type: 'submit' }, 'Open terminal');
	replace(root,
		h('form.card#term-form', {
			on: {
				submit: async (ev) => {
					ev.preventDefault();
					openBtn.disabled = true;
					const body = { cols: 100, rows: 30 };
					if (command.value.trim()) body.command = command.value.trim();
					try {
						const t = await api('POST', wsPath + '/terminals', body);
						location.hash = base + '/terminals/' + enc(t.id);
					} catch (e) {
						showError(err, e);
					} finally {
						openBtn.disabled = false;
					}
				},
			},
		},
		h('h2', 'Terminals'),
		h('p.muted', 'A terminal keeps running when its view or the browser tab closes; force-close kills its process tree.'),
		h('div.row', h('label.field', h('span.label', 'Command'), command)),
		err,
		h('div.actions', openBtn)),
		h('section.card', h('div.card-head', h('h2', 'Sessions'),
			h('button', { type: 'button', on: { click: () => load() } }, 'Refresh')), list));

	async function load() {
		let ts;
		try {
			ts = (await api('GET', wsPath + '/terminals', undefined, { signal: ctx.signal })).terminals || [];
		} catch (e) {
			if (e.name !== 'AbortError') showError(err, e);
			return;
		}
		if (!ts.length) {
			replace(list, h('p.muted', 'No terminals yet.'));
			return;
		}
		replace(list, h('div.table-scroll', h('table.list#term-table',
			h('thead', h('tr', ['Terminal', 'State', 'Command', 'Size', 'Output', 'Created', ''].map((t) => h('th', t)))),
			h('tbody', [...ts].reverse().map((t) => h('tr', { 'data-id': t.id },
				h('td', h('a.mono', { href: base + '/terminals/' + enc(t.id) }, t.id)),
				h('td', badge(t.state), t.reason ? h('div.reason', t.reason) : null,
					t.exitCode !== null && t.exitCode !== undefined ? h('span.muted', ` exit ${t.exitCode}`) : null,
					t.signal ? h('span.muted', ` signal ${t.signal}`) : null),
				h('td.mono', t.command ?? '—'),
				h('td', `${t.cols}×${t.rows}`),
				h('td', fmtBytes(t.outputBytes)),
				h('td', fmtTime(t.createdAt)),
				h('td.actions',
					LIVE.includes(t.state) ? h('a.button', { href: base + '/terminals/' + enc(t.id) }, 'Attach') : null,
					LIVE.includes(t.state) ? h('button.danger', { type: 'button', on: { click: () => forceClose(t.id) } }, 'Force close') : null)))))));
	}

	async function forceClose(id) {
		if (!confirm(`Force-close terminal ${id}? Its whole process tree is killed.`)) return;
		try {
			await api('DELETE', wsPath + '/terminals/' + enc(id));
			showError(err, null);
		} catch (e) {
			showError(err, e);
		}
		load();
	}

	load();
	liveRefresh(ctx, { workspace: decodeURIComponent(wsPath.split('/')[3]), types: 'terminal' }, load);
}

let xtermModules; // a promise: {Terminal, FitAddon} or null when the build has no xterm.js
function loadXterm() {
	if (!xtermModules) {
		xtermModules = Promise.all([import('./vendor/xterm.mjs'), import('./vendor/addon-fit.mjs')])
			.then(([x, f]) => {
				if (!document.querySelector('link[data-xterm]')) {
					document.head.append(h('link', { rel: 'stylesheet', href: '/ui/vendor/xterm.css', 'data-xterm': '' }));
				}
				return { Terminal: x.Terminal, FitAddon: f.FitAddon };
			})
			.catch(() => null);
	}
	return xtermModules;
}

// Keys of the plain fallback as the bytes a terminal would send.
const KEYS = {
	Enter: '\r', Backspace: '\x7f', Tab: '\t', Escape: '\x1b', ArrowUp: '\x1b[A', ArrowDown: '\x1b[B',
	ArrowRight: '\x1b[C', ArrowLeft: '\x1b[D', Home: '\x1b[H', End: '\x1b[F', Delete: '\x1b[3~',
};

// A terminal emulator of last resort: text without escape sequences, keys from a textarea.
function plainTerminal(container, onData) {
	const out = h('pre.output.plain-term#term-plain');
	const keys = h('textarea.plain-keys#term-keys', { rows: 1, placeholder: 'type here (keys go to the terminal)', spellcheck: 'false', autocomplete: 'off' });
	keys.addEventListener('keydown', (e) => {
		let k = null;
		if (e.ctrlKey && e.key.length === 1 && /[a-z]/i.test(e.key)) k = String.fromCharCode(e.key.toUpperCase().charCodeAt(0) - 64);
		else if (KEYS[e.key]) k = KEYS[e.key];
		else if (e.key.length === 1 && !e.metaKey) k = e.key;
		if (k !== null) {
			onData(k);
			e.preventDefault();
		}
	});
	keys.addEventListener('paste', (e) => {
		onData(e.clipboardData.getData('text'));
		e.preventDefault();
	});
	replace(container, out, keys);
	const dec = new TextDecoder();
	return {
		write(bytes) {
			const text = typeof bytes === 'string' ? bytes : dec.decode(bytes, { stream: true });
			// eslint-disable-next-line no-control-regex
			append(out, text.replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]/g, '').replace(/\r\n?/g, '\n'));
			out.scrollTop = out.scrollHeight;
		},
		focus: () => keys.focus(),
		size: () => null,
		dispose() {},
	};
}

export function terminalView(root, ctx, wsPath, id, base) {
	const path = wsPath + '/terminals/' + enc(id);
	const state = h('span#term-state', '…');
	const info = h('span.muted#term-info');
	const ended = h('div.term-ended#term-ended', { hidden: true, role: 'status' });
	const conn = h('span.muted#term-conn', 'connecting…');
	const err = h('div.error', { hidden: true, role: 'alert' });
	const screen = h('div.term-screen#term-screen');
	const reattach = h('button#term-reattach', { type: 'button', hidden: true, on: { click: () => attach() } }, 'Reattach');
	const closeBtn = h('button.danger#term-close', {
		type: 'button',
		on: {
			click: async () => {
				if (!confirm(`Force-close terminal ${id}? Its whole process tree is killed.`)) return;
				try {
					const t = await api('DELETE', path);
					renderState(t);
					showError(err, null);
				} catch (e) {
					showError(err, e);
				}
			},
		},
	}, 'Force close');
	replace(root, h('section.card.term-card',
		h('div.card-head',
			h('h2', 'Terminal ', h('span.mono', id), ' ', state),
			h('div.actions', conn, ' ', reattach, h('a.button', { href: base + '/terminals' }, 'All terminals'), closeBtn)),
		info, err, ended, screen));

	let last = null; // the terminal as last fetched
	// The size shown is the screen's own once it is fitted (what the last resize sent), else
	// what the controller has.
	function renderInfo() {
		const t = last;
		if (!t) return;
		const size = term?.size() || { cols: t.cols, rows: t.rows };
		const sizeEl = h('span#term-size', { 'data-cols': String(size.cols), 'data-rows': String(size.rows) }, `${size.cols}×${size.rows}`);
		replace(info, t.command ?? '', ' · ', sizeEl,
			t.exitCode !== null && t.exitCode !== undefined ? ` · exit ${t.exitCode}` : '',
			t.signal ? ` · signal ${t.signal}` : '', t.reason ? ` · ${t.reason}` : '');
	}

	function renderState(t) {
		last = t;
		replace(state, badge(t.state));
		state.dataset.state = t.state;
		renderInfo();
		const live = LIVE.includes(t.state);
		closeBtn.hidden = !live;
		// An ended terminal cannot be attached again: its scrollback went with it. Say how it
		// ended; what this view received stays on the screen.
		if (!live) {
			reattach.hidden = true;
			ended.hidden = false;
			let how = t.state;
			if (t.exitCode !== null && t.exitCode !== undefined) how += `, exit code ${t.exitCode}`;
			if (t.signal) how += `, signal ${t.signal}`;
			if (t.reason) how += ` (${t.reason})`;
			replace(ended, `This terminal has ended: ${how}. Its output is no longer kept; what this view showed stays below.`);
		}
	}

	let term = null, socket = null, resizeObs = null, lastSize = '';
	const enc8 = new TextEncoder();
	const send = (d) => {
		if (socket && socket.readyState === WebSocket.OPEN) socket.send(typeof d === 'string' ? enc8.encode(d) : d);
	};
	function sendResize() {
		const s = term?.size();
		if (!s) return;
		const key = s.cols + 'x' + s.rows;
		renderInfo();
		if (key === lastSize || !socket || socket.readyState !== WebSocket.OPEN) return;
		lastSize = key;
		socket.send(JSON.stringify({ type: 'resize', cols: s.cols, rows: s.rows }));
	}

	function attach() {
		if (last && !LIVE.includes(last.state)) {
			replace(conn, 'not attached');
			conn.dataset.state = 'ended';
			return;
		}
		if (socket) {
			socket.onclose = null;
			socket.close(1000);
		}
		reattach.hidden = true;
		lastSize = '';
		replace(conn, 'connecting…');
		term?.reset?.();
		const ws = (socket = openSocket(path + '/attach'));
		ws.onopen = () => {
			replace(conn, 'attached');
			conn.dataset.state = 'attached';
			sendResize();
			term?.focus();
		};
		ws.onmessage = (m) => {
			if (typeof m.data !== 'string') {
				term?.write(new Uint8Array(m.data));
				return;
			}
			let msg;
			try { msg = JSON.parse(m.data); } catch { return; }
			if (msg.type === 'gap') term?.write(`\r\n[${fmtBytes(msg.bytes)} of output not shown]\r\n`);
			else if (msg.type === 'exit') {
				term?.write(`\r\n[terminal ${msg.state}${msg.exitCode !== null && msg.exitCode !== undefined ? ', exit ' + msg.exitCode : ''}${msg.signal ? ', signal ' + msg.signal : ''}]\r\n`);
				refresh();
			} else if (msg.type === 'error') showError(err, new Error(msg.error?.message || 'terminal error'));
		};
		ws.onclose = (ev) => {
			if (socket !== ws) return;
			socket = null;
			conn.dataset.state = 'closed';
			replace(conn, `detached (${ev.code}${ev.reason ? ': ' + ev.reason : ''})`);
			// Reattach only while the terminal lives (renderState hides it otherwise).
			refresh().then(() => { reattach.hidden = !last || !LIVE.includes(last.state); });
		};
	}

	async function refresh() {
		try {
			renderState(await api('GET', path, undefined, { signal: ctx.signal }));
		} catch (e) {
			if (e.name !== 'AbortError') showError(err, e);
		}
	}

	ctx.onClose(() => {
		if (socket) {
			socket.onclose = null;
			socket.close(1000);
			socket = null;
		}
		resizeObs?.disconnect();
		term?.dispose();
	});

	(async () => {
		await refresh();
		const x = await loadXterm();
		if (!ctx.alive) return;
		if (x) {
			const t = new x.Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, fontFamily: 'ui-monospace, "DejaVu Sans Mono", monospace' });
			const fit = new x.FitAddon();
			t.loadAddon(fit);
			t.open(screen);
			screen.dataset.renderer = 'xterm';
			try { fit.fit(); } catch {}
			t.onData((d) => send(d));
			t.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0) & 255)));
			term = {
				write: (d) => t.write(d),
				focus: () => t.focus(),
				size: () => ({ cols: t.cols, rows: t.rows }),
				reset: () => t.reset(),
				dispose: () => t.dispose(),
			};
			t.onResize(() => sendResize());
			resizeObs = new ResizeObserver(() => {
				try { fit.fit(); } catch {}
			});
			resizeObs.observe(screen);
		} else {
			screen.dataset.renderer = 'plain';
			term = plainTerminal(screen, send);
		}
		attach();
	})();
}
