// SPDX-License-Identifier: MIT
// Building the page without innerHTML: every string goes in as text.

// h('div.cls#id', {attrs, on: {click}}, ...children): children are nodes, strings (as text),
// arrays, or null/false (skipped).
export function h(tag, attrs, ...children) {
	const m = /^([a-z0-9]+)((?:[.#][\w-]+)*)$/i.exec(tag);
	if (!m) throw new Error('bad tag ' + tag);
	const el = document.createElement(m[1]);
	for (const part of m[2].match(/[.#][\w-]+/g) || []) {
		if (part[0] === '.') el.classList.add(part.slice(1));
		else el.id = part.slice(1);
	}
	if (attrs === null || typeof attrs !== 'object' || attrs instanceof Node || Array.isArray(attrs)) {
		children.unshift(attrs);
		attrs = null;
	}
	for (const [k, v] of Object.entries(attrs || {})) {
		if (v === null || v === undefined || v === false) continue;
		if (k === 'on') {
			for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
		} else if (k === 'dataset') {
			Object.assign(el.dataset, v);
		} else if (k === 'value' || k === 'checked' || k === 'disabled' || k === 'selected') {
			el[k] = v;
		} else if (k === 'class') {
			for (const c of String(v).split(/\s+/).filter(Boolean)) el.classList.add(c);
		} else {
			if (/^on/i.test(k)) throw new Error('event attributes are not allowed: ' + k);
			el.setAttribute(k, v === true ? '' : String(v));
		}
	}
	append(el, children);
	return el;
}

export function append(el, ...children) {
	for (const c of children.flat(Infinity)) {
		if (c === null || c === undefined || c === false) continue;
		el.append(c instanceof Node ? c : document.createTextNode(String(c)));
	}
	return el;
}

export function clear(el) {
	while (el.firstChild) el.removeChild(el.firstChild);
	return el;
}

export function replace(el, ...children) {
	clear(el);
	return append(el, children);
}

// "2026-11-29T10:40:07.123Z" → local time, or '—'.
export function fmtTime(iso) {
	if (!iso) return '—';
	const d = new Date(iso);
	if (isNaN(d)) return String(iso);
	return d.toLocaleString(undefined, { hour12: false });
}

export function fmtMs(ms) {
	if (ms === null || ms === undefined) return '—';
	if (ms < 1000) return ms + ' ms';
	if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 2 : 1) + ' s';
	const s = Math.round(ms / 1000);
	return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
}

export function fmtBytes(n) {
	if (n === null || n === undefined) return '—';
	if (n < 1024) return n + ' B';
	if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
	if (n < 1024 * 1024 * 1024) return (n / 1024 / 1024).toFixed(1) + ' MiB';
	return (n / 1024 / 1024 / 1024).toFixed(2) + ' GiB';
}

// "busybox@sha256:0123456789ab…": an image reference with its digest cut to 12 hex digits.
export function shortImage(ref) {
	if (!ref) return '—';
	const m = /^(.*@?sha256:)([0-9a-f]{12})[0-9a-f]+$/.exec(ref);
	return m ? m[1] + m[2] + '…' : ref;
}

// A state word as a coloured badge; the class comes from a fixed list, the text is text.
const GOOD = ['ready', 'running', 'exited-0', 'ok', 'starting'];
const BAD = ['failed', 'exhausted', 'lost', 'killed', 'timed_out', 'failed_to_start', 'closed',
	'exited-bad', 'error', 'cancelled'];
// A paused workspace is neither good nor bad: its own colour, and its title says what it means.
export function badge(state, extra) {
	const key = extra || state;
	const cls = GOOD.includes(key) ? 'good' : BAD.includes(key) ? 'bad' : key === 'paused' ? 'paused' : 'neutral';
	return h('span.badge', { class: cls, 'data-state': state, title: key === 'paused' ? 'paused: its processes are frozen until it is resumed' : null }, state ?? '—');
}

// Output fields of a run or attempt as text: base64 parts decoded (lossy for binary).
export function outputText(obj, field) {
	let v = obj[field];
	if (v === null || v === undefined) return '';
	if (obj.encoding === 'base64') {
		try {
			const bin = atob(v);
			const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
			v = new TextDecoder().decode(bytes);
		} catch {
			v = '(undecodable output)';
		}
	}
	return v;
}

// The kept output of a run or attempt: head, a marker, tail.
export function outputBlock(obj, stream) {
	const head = outputText(obj, stream);
	const tail = outputText(obj, stream + 'Tail');
	const total = obj[stream + 'Bytes'] ?? 0;
	const parts = [head];
	if (tail) {
		const kept = new TextEncoder().encode(head).length + new TextEncoder().encode(tail).length;
		parts.push(h('span.gap', `\n… ${fmtBytes(total - kept)} not kept …\n`), tail);
	}
	return h('pre.output', { class: stream, 'data-stream': stream }, parts);
}

export function field(label, input, hint) {
	return h('label.field', h('span.label', label), input, hint ? h('span.hint', hint) : null);
}

// Keeps one error line per container; null clears it.
export function showError(box, err) {
	if (!box) return;
	if (!err) {
		clear(box);
		box.hidden = true;
		return;
	}
	box.hidden = false;
	const msg = err.message || String(err);
	const extra = err.status ? ` (HTTP ${err.status}${err.code ? ', ' + err.code : ''}${err.field ? ', field ' + err.field : ''})` : '';
	replace(box, msg + extra);
}

// "1.5" (seconds, as typed) → 1500; null when not a finite number.
export function secondsToMs(v) {
	const s = String(v).trim();
	if (!/^\d*\.?\d+$|^\d+\.$/.test(s)) return null;
	const n = Number(s);
	return Number.isFinite(n) ? Math.round(n * 1000) : null;
}

// 1500 → "1.5" for a seconds field.
export function msToSeconds(ms) {
	return String(Math.round(ms) / 1000);
}

// Scrolls a card whose 'inner' part (live output) matters into view: the card from its top when
// inner's first 300 px fit in the window then, else inner from its top.
export function reveal(card, inner) {
	const target = inner || card;
	const lead = target.getBoundingClientRect().top - card.getBoundingClientRect().top;
	(lead + 300 <= window.innerHeight ? card : target).scrollIntoView({ block: 'start' });
}
