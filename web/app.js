// SPDX-License-Identifier: MIT
// The dashboard: Sandboxes → worker → workspace. Hash routes (nothing secret in them):
//   #/                          the worker: checks, workspaces, create form; when the controller
//                               knows other workers (GET /v1/workers), the list of workers
//   #/workers/NAME              one worker of that list (its calls forwarded when not this one)
//   #/w/ID[/commands|services|terminals|files|ports|snapshots]   a workspace, one tab, on the
//                               worker its id names
//   #/w/ID/terminals/T          a terminal, attached
import { api, getToken, setToken, setUnauthorizedHandler, ApiError, setFleet, getFleet, setRemote, remoteWorker, workerOfId } from './api.js';
import { fleetView, fleetOf } from './fleet.js';
import { h, replace, showError } from './dom.js';
import { workerView } from './worker.js';
import { workspaceView } from './workspace.js';

const main = document.getElementById('main');
const crumbs = document.getElementById('crumbs');
const account = document.getElementById('account');

let current = null; // the view's context: aborted on navigation
let workerName = null;
let fleetLoaded = false;

// What a view gets: an abort signal for its fetches, timers and sockets that end with it.
function newContext() {
	const ac = new AbortController();
	const timers = new Set();
	const closers = new Set();
	return {
		signal: ac.signal,
		get alive() {
			return !ac.signal.aborted;
		},
		every(ms, fn) {
			const id = setInterval(() => {
				if (!ac.signal.aborted) fn();
			}, ms);
			timers.add(id);
			return () => {
				clearInterval(id);
				timers.delete(id);
			};
		},
		onClose(fn) {
			closers.add(fn);
			return () => closers.delete(fn);
		},
		setCrumbs,
		workerName: () => remoteWorker() || workerName,
		close() {
			ac.abort();
			for (const id of timers) clearInterval(id);
			for (const fn of closers) {
				try {
					fn();
				} catch {}
			}
			timers.clear();
			closers.clear();
		},
	};
}

function setCrumbs(items) {
	// items: [label, href|null]…; "Sandboxes" and the worker always lead.
	const shown = remoteWorker() || workerName || 'worker';
	const all = getFleet() ? [['Sandboxes', '#/'], [shown, '#/workers/' + encodeURIComponent(shown)], ...items] :
		[['Sandboxes', '#/'], [shown, '#/'], ...items];
	if (getFleet() && items.length === 0 && location.hash.replace(/^#\/?/, '') === '') all.pop();
	replace(crumbs, all.map(([label, href], i) => [
		i ? h('span.sep', '›') : null,
		href && i < all.length - 1 ? h('a', { href }, label) : h('span.here', label),
	]));
}

function showLogin(message) {
	if (current) current.close();
	current = null;
	replace(crumbs, h('span.here', 'Sandboxes'));
	replace(account);
	const input = h('input#token', {
		type: 'password', name: 'token', autocomplete: 'current-password', required: true,
		placeholder: 'admin token', spellcheck: 'false',
	});
	const err = h('div.error', { hidden: !message, role: 'alert' }, message || '');
	const button = h('button.primary', { type: 'submit' }, 'Sign in');
	const form = h('form.login#login', {
		on: {
			submit: async (ev) => {
				ev.preventDefault();
				const t = input.value.trim();
				if (!t) return;
				button.disabled = true;
				setToken(t);
				fleetLoaded = false;
				try {
					const w = await api('GET', '/v1/worker', undefined, { quiet401: true });
					workerName = w.name;
					route();
				} catch (e) {
					setToken(null);
					showError(err, e.status === 401 ? new Error('The controller refused this token.') : e);
				} finally {
					button.disabled = false;
				}
			},
		},
	},
	h('h1', 'Sign in'),
	h('p', 'Enter the controller\'s bearer token. The admin token is in ', h('code', '<root>/admin.token'),
		' on the worker. It is kept in this tab\'s session storage only.'),
	h('input', { type: 'text', name: 'username', autocomplete: 'username', value: 'station-sandbox', hidden: true, readonly: true, 'aria-hidden': 'true' }),
	h('label.field', h('span.label', 'Token'), input),
	err,
	h('div.actions', button));
	replace(main, form);
	input.focus();
}

setUnauthorizedHandler((e) => {
	setToken(null);
	showLogin('Signed out: the controller answered 401 (' + e.message + '). Enter a valid token.');
});

function renderAccount() {
	replace(account, h('button.link#logout', {
		type: 'button',
		on: { click: () => { setToken(null); showLogin(null); } },
	}, 'Sign out'));
}

async function route() {
	if (!getToken()) {
		showLogin(null);
		return;
	}
	if (current) current.close();
	const ctx = (current = newContext());
	setRemote(null);
	renderAccount();
	if (!workerName) {
		try {
			workerName = (await api('GET', '/v1/worker', undefined, { signal: ctx.signal })).name;
		} catch (e) {
			if (e instanceof ApiError && e.status === 401) return; // the login is shown
			if (e.name === 'AbortError') return;
		}
	}
	if (!fleetLoaded) {
		// Other workers, when this controller knows any; an older one without the endpoint
		// is alone.
		try {
			const ws = (await api('GET', '/v1/workers', undefined, { signal: ctx.signal })).workers || [];
			setFleet(fleetOf(ws));
			fleetLoaded = true;
		} catch (e) {
			if (e instanceof ApiError && e.status === 401) return;
			if (e.name === 'AbortError') return;
			fleetLoaded = true;
		}
	}
	if (!ctx.alive) return;
	const hash = location.hash.replace(/^#/, '') || '/';
	const parts = hash.split('/').filter(Boolean).map(decodeURIComponent);
	const view = h('div.view');
	replace(main, view);
	setRemote(null);
	try {
		if (parts.length === 0 && getFleet()) {
			fleetView(view, ctx);
		} else if (parts.length === 0) {
			workerView(view, ctx);
		} else if (parts[0] === 'workers' && parts[1] && getFleet()?.names.includes(parts[1])) {
			setRemote(parts[1]);
			workerView(view, ctx);
		} else if (parts[0] === 'w' && parts[1]) {
			setRemote(workerOfId(parts[1]));
			workspaceView(view, ctx, parts[1], parts[2] || 'commands', parts[3] || null);
		} else {
			setCrumbs([['not found', null]]);
			replace(view, h('div.error', 'No such page: ' + hash), h('p', h('a', { href: '#/' }, 'Back to the worker')));
		}
	} catch (e) {
		replace(view, h('div.error', String(e.message || e)));
	}
}

window.addEventListener('hashchange', route);
route();
