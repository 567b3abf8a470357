// SPDX-License-Identifier: MIT
// The Ports tab: the TCP ports listening in the workspace (GET …/ports reads them in its own
// network namespace), each exposable through its worker's preview listener, with a token or
// public, for a time; the exposed ones with their URL: open in a new tab or in a frame here,
// copy, revoke. A token is in the POST answer only: this page keeps it in memory (never in
// storage) while it is open, so Open can carry it (the preview turns it into a cookie of its
// own host); an exposure whose token the page does not hold opens at its plain URL, where the
// preview asks for the token. Each URL is absolute and names its own worker's preview domain,
// so a workspace on another worker opens the same way.
import { api, enc } from './api.js';
import { h, replace, fmtTime, field, showError } from './dom.js';

const EXPIRIES = [['1 hour', 3600000], ['8 hours', 8 * 3600000], ['24 hours', 24 * 3600000],
	['7 days', 7 * 24 * 3600000], ['30 days', 30 * 24 * 3600000]];
const DEFAULT_EXPIRY = 24 * 3600000;

// host → the URL that opens it with its token (the POST answer's openUrl, or the URL with
// ?station_preview_token=): for this page's life only.
const held = new Map();

function openUrlOf(answer) {
	if (answer.openUrl) return answer.openUrl;
	const u = new URL(answer.url);
	u.searchParams.set('station_preview_token', answer.token);
	return u.href;
}

// Whether url's host is on this page's site (its last two labels; an address is a site of
// its own): roughly the browser's rule for sending a SameSite cookie from a frame.
function sameSite(url) {
	const here = location.hostname;
	const there = new URL(url).hostname;
	if (/^[\d.]+$|:/.test(here) || !here.includes('.')) return here === there;
	const site = here.split('.').slice(-2).join('.');
	return there === site || there.endsWith('.' + site);
}

// Whether the browser takes a Secure cookie from url: https, or a *.localhost host.
function secureCookies(url) {
	const u = new URL(url);
	return u.protocol === 'https:' || u.hostname === 'localhost' || u.hostname.endsWith('.localhost');
}

function accessSelect(id) {
	return h('select', { id, 'aria-label': 'access' },
		h('option', { value: 'token', selected: true }, 'token'),
		h('option', { value: 'public' }, 'public'));
}

function expirySelect(id) {
	return h('select', { id, 'aria-label': 'expires in' },
		EXPIRIES.map(([label, ms]) => h('option', { value: String(ms), selected: ms === DEFAULT_EXPIRY }, label)));
}

// What a refusal means here, besides the API's own words.
function explain(e) {
	if (e.status !== 409) return e;
	const m = e.message || '';
	let hint = '';
	if (/preview/i.test(m) && /off|--preview-listen|not enabled|disabled/i.test(m)) hint = ' The worker serves no previews: its operator starts it with --preview-listen.';
	else if (/host/i.test(m) && /namespace|adapter/i.test(m)) hint = ' A host workspace shares the worker\'s network: only a container workspace\'s ports can be exposed.';
	else if (/expos/i.test(m)) hint = ' Revoke it first to expose it again.';
	const out = new Error(m + hint);
	out.status = e.status;
	out.code = e.code;
	out.field = e.field;
	return out;
}

async function copyText(text) {
	try {
		await navigator.clipboard.writeText(text);
		return true;
	} catch {
		const t = h('textarea', { readonly: true, style: 'position:fixed;top:-1000px' }, text);
		document.body.append(t);
		t.select();
		let ok = false;
		try {
			ok = document.execCommand('copy');
		} catch {}
		t.remove();
		return ok;
	}
}

function flash(btn, text) {
	const was = btn.textContent;
	btn.textContent = text;
	setTimeout(() => (btn.textContent = was), 1500);
}

export function portsTab(root, ctx, wsPath) {
	const err = h('div.error#ports-error', { hidden: true, role: 'alert' });
	const fresh = h('div.notice#port-token', { hidden: true, role: 'status' });
	const exposedBox = h('div#ports-exposed', h('p.muted', 'Loading…'));
	const listeningBox = h('div#ports-listening', h('p.muted', 'Loading…'));

	const portIn = h('input#port-number', { type: 'number', min: 1, max: 65535, required: true, placeholder: '3000' });
	const accessIn = accessSelect('port-access');
	const expiryIn = expirySelect('port-expiry');
	const form = h('form#port-form', {
		on: {
			submit: (ev) => {
				ev.preventDefault();
				expose(Number(portIn.value), accessIn.value, Number(expiryIn.value), ev.submitter);
			},
		},
	},
	h('div.row', field('Port', portIn), field('Access', accessIn, 'token: only with its token; public: anyone with the URL'), field('Expires in', expiryIn)),
	h('div.actions', h('button.primary#port-expose', { type: 'submit' }, 'Expose')));

	const frameTitle = h('span.mono#port-frame-url');
	const frameNote = h('div.error#port-frame-error', { hidden: true, role: 'alert' });
	// A frame of another site keeps the preview's cookie only as a partitioned one, which must
	// be Secure: over https, or under *.localhost. A token preview over plain http under
	// another name asks for its token on every page in a frame.
	const frameHint = h('p.muted#port-frame-hint', { hidden: true },
		'This dashboard and the preview are on different sites and the preview is plain http, so the browser does not let the frame keep the preview\'s cookie: a token preview may ask for its token here. Open it in a new tab, expose it public, serve the previews over https, or serve the dashboard under the same domain as the previews.');
	const frameSlot = h('div.port-frame-slot');
	const frameCard = h('section.card#port-frame-card', { hidden: true },
		h('div.card-head', h('h2', 'Preview ', frameTitle),
			h('div.actions', h('button#port-frame-close', { type: 'button', on: { click: () => closeFrame() } }, 'Close'))),
		frameNote, frameHint, frameSlot);

	replace(root,
		err,
		fresh,
		h('section.card', h('div.card-head', h('h2', 'Exposed'),
			h('button#ports-refresh', { type: 'button', on: { click: () => load(true) } }, 'Refresh')), exposedBox),
		frameCard,
		h('section.card', h('h2', 'Listening'), listeningBox),
		h('section.card', h('h2', 'Expose a port'),
			h('p.muted', 'A port that is not listening yet can be exposed too: its URL answers once a server listens on it.'), form));

	let framed = null; // the host shown in the frame
	let lastKey = null;
	let listFailed = false; // err shows why the list failed

	// A frame the dashboard's Content-Security-Policy refuses (a preview domain it does not
	// know, another worker's) says so instead of staying blank.
	const onViolation = (ev) => {
		if (!framed || !/^(frame|child|default)-src/.test(ev.violatedDirective || '')) return;
		showError(frameNote, new Error(`This dashboard may not frame ${ev.blockedURI}: its Content-Security-Policy allows only its own worker's preview domain. Use Open.`));
	};
	document.addEventListener('securitypolicyviolation', onViolation);
	ctx.onClose(() => document.removeEventListener('securitypolicyviolation', onViolation));

	function openFrame(x) {
		framed = x.host;
		showError(frameNote, null);
		replace(frameTitle, x.url);
		frameHint.hidden = !(x.access === 'token' && !sameSite(x.url) && !secureCookies(x.url));
		// No top navigation from the preview, nor the parent's origin (it is another origin anyway).
		replace(frameSlot, h('iframe#port-frame', {
			src: held.get(x.host) ?? x.url, title: 'preview of port ' + x.port,
			sandbox: 'allow-scripts allow-same-origin allow-forms allow-popups allow-modals allow-downloads',
			referrerpolicy: 'no-referrer',
		}));
		frameCard.hidden = false;
		frameCard.scrollIntoView({ block: 'nearest' });
	}

	function closeFrame() {
		framed = null;
		replace(frameSlot);
		showError(frameNote, null);
		frameCard.hidden = true;
	}

	function showToken(a) {
		if (!a.token) {
			showError(fresh, null);
			return;
		}
		const copyBtn = h('button#port-token-copy', { type: 'button', on: { click: async () => flash(copyBtn, (await copyText(a.token)) ? 'Copied' : 'Copy failed') } }, 'Copy token');
		fresh.hidden = false;
		replace(fresh,
			h('div', `Port ${a.port} is exposed at `, h('span.mono', a.url), ' with a token, shown this once:'),
			h('div.actions', h('code.mono#port-token-value', a.token), copyBtn,
				h('button', { type: 'button', on: { click: () => showError(fresh, null) } }, 'Hide')),
			h('div.muted', 'This page keeps it while it is open (Open uses it). Anyone else needs it: the preview asks for it, or send it as Authorization: Bearer.'));
	}

	async function expose(port, access, expiresInMs, btn) {
		if (!Number.isInteger(port) || port < 1 || port > 65535) {
			showError(err, new Error(`Port: "${port}" is not a port number from 1 to 65535.`));
			return;
		}
		if (btn) btn.disabled = true;
		try {
			const a = await api('POST', wsPath + '/ports', { port, access, expiresInMs });
			if (a.token) held.set(a.host, openUrlOf(a));
			showError(err, null);
			showToken(a);
		} catch (e) {
			showError(err, explain(e));
		} finally {
			if (btn) btn.disabled = false;
		}
		load(true);
	}

	async function revoke(x) {
		if (!confirm(`Revoke the preview of port ${x.port}? Its URL answers 404 from now on.`)) return;
		try {
			await api('DELETE', wsPath + '/ports/' + enc(String(x.port)));
			held.delete(x.host);
			if (framed === x.host) closeFrame();
			showError(err, null);
		} catch (e) {
			showError(err, explain(e));
		}
		load(true);
	}

	function exposedTable(exposed) {
		if (!exposed.length) return h('p.muted', 'No port is exposed.');
		return h('div.table-scroll', h('table.list#ports-exposed-table',
			h('thead', h('tr', ['Port', 'URL', 'Access', 'Expires', ''].map((t) => h('th', t)))),
			h('tbody', exposed.map((x) => {
				const copyBtn = h('button.port-copy', { type: 'button', on: { click: async () => flash(copyBtn, (await copyText(x.url)) ? 'Copied' : 'Copy failed') } }, 'Copy URL');
				const mine = held.has(x.host);
				return h('tr', { 'data-port': String(x.port), 'data-host': x.host },
					h('td.mono', String(x.port)),
					h('td.mono.port-url', h('a', { href: x.url, target: '_blank', rel: 'noopener noreferrer' }, x.url)),
					h('td.port-access', x.access, x.access === 'token' && !mine ? h('span.muted', { title: 'this page does not hold its token: the preview asks for it' }, ' (token not here)') : null),
					h('td', { title: 'created ' + fmtTime(x.createdAt) }, fmtTime(x.expiresAt)),
					h('td.actions',
						h('a.button.port-open', { href: held.get(x.host) ?? x.url, target: '_blank', rel: 'noopener noreferrer' }, 'Open'),
						h('button.port-frame', { type: 'button', on: { click: () => openFrame(x) } }, 'Open here'),
						copyBtn,
						h('button.danger.port-revoke', { type: 'button', on: { click: () => revoke(x) } }, 'Revoke')));
			}))));
	}

	function listeningTable(listening, exposed) {
		if (!listening.length) return h('p.muted', 'Nothing listens on a TCP port in the workspace.');
		const open = new Set(exposed.map((x) => x.port));
		return h('div.table-scroll', h('table.list#ports-listening-table',
			h('thead', h('tr', ['Port', 'Address', 'PID', 'Command', ''].map((t) => h('th', t)))),
			h('tbody', listening.map((l) => {
				const access = accessSelect(null);
				const expiry = expirySelect(null);
				return h('tr', { 'data-port': String(l.port), 'data-address': l.address },
					h('td.mono', String(l.port)),
					h('td.mono', l.address + (l.proto && l.proto !== 'tcp' ? ` (${l.proto})` : '')),
					h('td.mono', l.pid ?? '—'),
					h('td.mono.cmd', { title: l.command ?? '' }, l.command ?? '—'),
					h('td.actions', open.has(l.port) ? h('span.muted', 'exposed') : [access, expiry,
						h('button.primary.port-expose', { type: 'button', on: { click: (ev) => expose(l.port, access.value, Number(expiry.value), ev.currentTarget) } }, 'Expose')]));
			}))));
	}

	async function load(force) {
		let r;
		try {
			r = await api('GET', wsPath + '/ports', undefined, { signal: ctx.signal });
		} catch (e) {
			if (e.name === 'AbortError') return;
			showError(err, explain(e));
			replace(exposedBox, h('p.muted', 'The ports could not be listed.'));
			replace(listeningBox);
			lastKey = null;
			listFailed = true;
			return;
		}
		const exposed = [...(r.exposed || [])].sort((a, b) => a.port - b.port);
		// the same socket on 0.0.0.0 and :: is one port to expose
		const listening = [...(r.listening || [])].sort((a, b) => a.port - b.port || String(a.address).localeCompare(String(b.address)));
		if (framed && !exposed.some((x) => x.host === framed)) closeFrame();
		// Redrawn only on a change: a choice being made in a row's selects stays.
		const key = JSON.stringify([exposed, listening, [...held.keys()]]);
		if (!force && key === lastKey) return;
		lastKey = key;
		if (listFailed) showError(err, null);
		listFailed = false;
		replace(exposedBox, exposedTable(exposed));
		replace(listeningBox, listeningTable(listening, exposed));
	}

	load(true);
	// Nothing announces a socket that starts listening: a poll while the tab is shown.
	ctx.every(5000, () => load(false));
}
