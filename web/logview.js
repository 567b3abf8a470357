// SPDX-License-Identifier: MIT
// A log viewer for command output and service logs: the text of stdout and stderr as it comes
// (each chunk a span that knows its stream), a filter by stream, search with highlighted
// matches and next/previous, copy and download of what is shown, and auto-scroll that pauses
// when asked or when the reader scrolls up, and resumes at the bottom. Text only, no innerHTML.
import { h, replace, append, clear } from './dom.js';

// What the viewer keeps: older chunks go once the text passes this (a marker says so).
const MAX_CHARS = 2 * 1024 * 1024;
const FLUSH_MS = 50;

// logViewer({id, name}): id for the <pre> (tests and styles find it), name for downloads.
// Returns {el, pre, write(stream, text), note(text), clear(), text()}.
export function logViewer({ id, name = 'output' }) {
	const chunks = []; // {stream, text, el}: stream 'stdout' | 'stderr' | 'note'
	let chars = 0;
	let dropped = 0;
	let follow = true;
	let marks = [];
	let current = -1;

	const pre = h('pre.output.live.logview-text', { id, 'data-filter': 'all', tabindex: '0' });
	const filter = h('select.logview-filter', { 'aria-label': 'streams shown', on: { change: () => { pre.dataset.filter = filter.value; search(false); } } },
		h('option', { value: 'all' }, 'stdout + stderr'),
		h('option', { value: 'stdout' }, 'stdout only'),
		h('option', { value: 'stderr' }, 'stderr only'));
	const query = h('input.logview-search', { type: 'search', placeholder: 'search', spellcheck: 'false', 'aria-label': 'search the output' });
	const count = h('span.muted.logview-count', { 'aria-live': 'polite' });
	const prev = h('button.logview-prev', { type: 'button', title: 'previous match', on: { click: () => go(-1) } }, '↑');
	const next = h('button.logview-next', { type: 'button', title: 'next match', on: { click: () => go(1) } }, '↓');
	const status = h('span.muted.logview-status', { 'aria-live': 'polite' });
	const pause = h('button.logview-pause', { type: 'button', on: { click: () => setFollow(!follow, true) } });
	const copy = h('button.logview-copy', { type: 'button', on: { click: () => copyText() } }, 'Copy');
	const download = h('button.logview-download', { type: 'button', on: { click: () => downloadText() } }, 'Download');
	query.addEventListener('input', () => search(true));
	query.addEventListener('keydown', (ev) => {
		if (ev.key === 'Enter') {
			ev.preventDefault();
			go(ev.shiftKey ? -1 : 1);
		}
	});
	// The height the text had at the last scroll: output that came after the reader reached
	// the bottom (before this event) must not count against having reached it.
	let seenHeight = 0;
	// Where the viewer itself last scrolled to (follow, resume): the scroll event of that jump
	// comes a frame later, maybe after the reader pressed Pause, and is not the reader's doing.
	let ownTop = -1;
	function scrollToEnd() {
		pre.scrollTop = pre.scrollHeight;
		ownTop = pre.scrollTop;
	}
	pre.addEventListener('scroll', () => {
		if (pre.scrollTop === ownTop) {
			ownTop = -1;
			seenHeight = pre.scrollHeight;
			return;
		}
		ownTop = -1;
		const atBottom = pre.scrollTop + pre.clientHeight >= Math.min(pre.scrollHeight, seenHeight) - 4;
		seenHeight = pre.scrollHeight;
		if (atBottom !== follow) setFollow(atBottom, false);
	});

	const el = h('div.logview', { 'data-follow': '1' },
		h('div.logview-bar', filter, h('span.logview-find', query, prev, next, count), h('span.logview-tools', pause, copy, download, status)),
		pre);

	function setFollow(on, scroll) {
		follow = on;
		el.dataset.follow = on ? '1' : '0';
		replace(pause, on ? 'Pause auto-scroll' : 'Resume auto-scroll');
		if (on && scroll) scrollToEnd();
		seenHeight = pre.scrollHeight;
	}
	setFollow(true, false);

	function visible(c) {
		return c.stream === 'note' || pre.dataset.filter === 'all' || pre.dataset.filter === c.stream;
	}

	// The chunk's text, with every match of q wrapped in <mark>.
	function paint(c, q) {
		clear(c.el);
		if (!q) {
			append(c.el, c.text);
			return;
		}
		const low = c.text.toLowerCase();
		let at = 0;
		for (let i = low.indexOf(q); i >= 0; i = low.indexOf(q, i + q.length)) {
			if (i > at) append(c.el, c.text.slice(at, i));
			append(c.el, h('mark', c.text.slice(i, i + q.length)));
			at = i + q.length;
		}
		if (at < c.text.length) append(c.el, c.text.slice(at));
	}

	function collectMarks() {
		marks = chunks.filter((c) => c.stream !== 'note' && visible(c)).flatMap((c) => [...c.el.querySelectorAll('mark')]);
	}

	function showCount() {
		const q = query.value;
		replace(count, q ? (marks.length ? `${current + 1}/${marks.length}` : 'no match') : '');
		count.dataset.matches = String(marks.length);
	}

	// reset: the query changed, start from the first match.
	function search(reset) {
		flush();
		const q = query.value.toLowerCase();
		for (const c of chunks) if (c.stream !== 'note') paint(c, q);
		collectMarks();
		if (reset || current >= marks.length) current = marks.length ? 0 : -1;
		highlight(reset);
	}

	function highlight(scroll) {
		marks.forEach((m, i) => m.classList.toggle('current', i === current));
		showCount();
		if (scroll && current >= 0) {
			setFollow(false, false);
			const m = marks[current];
			pre.scrollTop = m.offsetTop - pre.offsetTop - pre.clientHeight / 2;
		}
	}

	function go(step) {
		if (!marks.length) return;
		current = (current + step + marks.length) % marks.length;
		highlight(true);
	}

	function trim() {
		while (chars > MAX_CHARS && chunks.length > 1) {
			const c = chunks.shift();
			chars -= c.text.length;
			dropped += c.text.length;
			c.el.remove();
		}
		let marker = pre.querySelector('.logview-dropped');
		if (dropped && !marker) {
			marker = h('span.gap.logview-dropped');
			pre.prepend(marker);
		}
		if (marker) replace(marker, `[${dropped} older characters not kept here; Download has what is shown]\n`);
	}

	// Output comes in many small pieces: they are queued and put on the page at most every
	// FLUSH_MS, in one go, so a chatty command costs one layout per flush, not one per piece.
	let pending = [];
	let flushTimer = null;
	function add(stream, text) {
		if (!text) return;
		pending.push([stream, text]);
		if (!flushTimer) flushTimer = setTimeout(flush, FLUSH_MS);
	}

	function flush() {
		clearTimeout(flushTimer);
		flushTimer = null;
		if (!pending.length) return;
		const q = query.value.toLowerCase();
		let added = false;
		for (const [stream, text] of pending) {
			const last = chunks.at(-1);
			if (last && last.stream === stream && stream !== 'note' && !q) {
				last.text += text;
				const node = last.el.lastChild;
				if (node && node.nodeType === Node.TEXT_NODE) node.appendData(text);
				else append(last.el, text);
			} else {
				const c = { stream, text, el: stream === 'note' ? h('span.gap', { 'data-stream': 'note' }) : h('span.chunk', { 'data-stream': stream, class: stream === 'stderr' ? 'stderr' : '' }) };
				chunks.push(c);
				if (stream === 'note') append(c.el, text);
				else paint(c, q);
				pre.append(c.el);
				added = true;
			}
			chars += text.length;
		}
		pending = [];
		if (q && added) {
			collectMarks();
			if (current < 0 && marks.length) current = 0;
			highlight(false);
		}
		if (chars > MAX_CHARS) trim();
		if (follow) {
			scrollToEnd();
			seenHeight = pre.scrollHeight;
		}
	}

	// What the filter shows, as one string (copy and download take this).
	function text() {
		flush();
		return chunks.filter((c) => c.stream !== 'note' && visible(c)).map((c) => c.text).join('');
	}

	function flash(msg) {
		replace(status, msg);
		status.dataset.state = msg;
	}

	async function copyText() {
		const t = text();
		try {
			await navigator.clipboard.writeText(t);
			flash('copied');
		} catch {
			// Without the clipboard API: select the text so Ctrl+C takes it.
			const range = document.createRange();
			range.selectNodeContents(pre);
			const sel = getSelection();
			sel.removeAllRanges();
			sel.addRange(range);
			flash(document.execCommand('copy') ? 'copied' : 'selected: press Ctrl+C');
		}
	}

	let lastUrl = null; // the previous download's, released when the next one starts
	function downloadText() {
		if (lastUrl) URL.revokeObjectURL(lastUrl);
		const url = (lastUrl = URL.createObjectURL(new Blob([text()], { type: 'text/plain;charset=utf-8' })));
		const suffix = pre.dataset.filter === 'all' ? '' : '.' + pre.dataset.filter;
		const a = h('a', { href: url, download: `${name}${suffix}.txt`, hidden: true });
		document.body.append(a);
		a.click();
		a.remove();
		flash('downloaded');
	}

	return {
		el,
		pre,
		write: add,
		note: (t) => add('note', t),
		clear() {
			clearTimeout(flushTimer);
			flushTimer = null;
			pending = [];
			chunks.length = 0;
			chars = dropped = 0;
			marks = [];
			current = -1;
			clear(pre);
			showCount();
		},
		text,
	};
}
