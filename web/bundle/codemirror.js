// SPDX-License-Identifier: MIT
// The editor of the Files tab: CodeMirror 6 and the languages it highlights, bundled by the
// build (esbuild, pinned in package.json) into one module served as /ui/vendor/codemirror.mjs.
// This file is the bundle's entry, not served itself. files.js imports the bundle and falls
// back to a plain textarea when it is absent.
import { EditorState } from '@codemirror/state';
import {
	EditorView, keymap, lineNumbers, highlightActiveLineGutter, highlightSpecialChars, drawSelection,
	dropCursor, rectangularSelection, crosshairCursor, highlightActiveLine,
} from '@codemirror/view';
import {
	syntaxHighlighting, defaultHighlightStyle, indentOnInput, bracketMatching, foldGutter, foldKeymap,
	StreamLanguage,
} from '@codemirror/language';
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { searchKeymap, highlightSelectionMatches } from '@codemirror/search';
import { closeBrackets, closeBracketsKeymap } from '@codemirror/autocomplete';
import { javascript } from '@codemirror/lang-javascript';
import { json } from '@codemirror/lang-json';
import { markdown } from '@codemirror/lang-markdown';
import { python } from '@codemirror/lang-python';
import { cpp } from '@codemirror/lang-cpp';
import { html } from '@codemirror/lang-html';
import { css } from '@codemirror/lang-css';
import { shell } from '@codemirror/legacy-modes/mode/shell';
import { yaml } from '@codemirror/legacy-modes/mode/yaml';
import { toml } from '@codemirror/legacy-modes/mode/toml';
import { dockerFile } from '@codemirror/legacy-modes/mode/dockerfile';
import { go } from '@codemirror/legacy-modes/mode/go';
import { rust } from '@codemirror/legacy-modes/mode/rust';
import { diff } from '@codemirror/legacy-modes/mode/diff';

export { EditorView };

// name → the extension that highlights it.
const LANGUAGES = {
	javascript: () => javascript({ jsx: true }),
	typescript: () => javascript({ jsx: true, typescript: true }),
	json: () => json(),
	markdown: () => markdown(),
	python: () => python(),
	cpp: () => cpp(),
	html: () => html(),
	css: () => css(),
	shell: () => StreamLanguage.define(shell),
	yaml: () => StreamLanguage.define(yaml),
	toml: () => StreamLanguage.define(toml),
	dockerfile: () => StreamLanguage.define(dockerFile),
	go: () => StreamLanguage.define(go),
	rust: () => StreamLanguage.define(rust),
	diff: () => StreamLanguage.define(diff),
};

const BY_EXTENSION = {
	js: 'javascript', mjs: 'javascript', cjs: 'javascript', jsx: 'javascript',
	ts: 'typescript', mts: 'typescript', cts: 'typescript', tsx: 'typescript',
	json: 'json', jsonc: 'json', map: 'json',
	md: 'markdown', markdown: 'markdown',
	py: 'python', pyi: 'python',
	c: 'cpp', h: 'cpp', cc: 'cpp', cpp: 'cpp', cxx: 'cpp', hh: 'cpp', hpp: 'cpp', hxx: 'cpp',
	html: 'html', htm: 'html',
	css: 'css',
	sh: 'shell', bash: 'shell', zsh: 'shell',
	yml: 'yaml', yaml: 'yaml',
	toml: 'toml',
	go: 'go',
	rs: 'rust',
	diff: 'diff', patch: 'diff',
};

const BY_NAME = {
	Dockerfile: 'dockerfile', Containerfile: 'dockerfile', '.bashrc': 'shell', '.profile': 'shell',
	'.bash_profile': 'shell', '.zshrc': 'shell', 'package-lock.json': 'json',
};

// The language a file name gets, or null (plain text).
export function languageFor(name) {
	const base = String(name).split('/').pop();
	if (BY_NAME[base]) return BY_NAME[base];
	const dot = base.lastIndexOf('.');
	if (dot <= 0 && !base.startsWith('.')) return null;
	return BY_EXTENSION[base.slice(dot + 1).toLowerCase()] ?? null;
}

const theme = EditorView.theme({
	'&': { height: '100%', fontSize: '13px' },
	'.cm-scroller': { fontFamily: 'var(--mono)', overflow: 'auto' },
	'.cm-gutters': { background: '#f7f9f8', borderRight: '1px solid var(--line)' },
});

// An editor in parent: { text(), setText(t, lineSeparator), focus(), destroy(), language }.
// onChange() after each edit, onSave() on Mod-s. lineSeparator: the only line break of the
// text ('\n' keeps a lone '\r' a character of its line), so text() gives back the bytes.
export function createEditor(parent, { doc = '', name = '', lineSeparator = '\n', onChange = () => {}, onSave = () => {} } = {}) {
	const language = languageFor(name);
	const extensions = [
		lineNumbers(), highlightActiveLineGutter(), highlightSpecialChars(), history(), foldGutter(),
		drawSelection(), dropCursor(), EditorState.allowMultipleSelections.of(true), indentOnInput(),
		syntaxHighlighting(defaultHighlightStyle, { fallback: true }), bracketMatching(), closeBrackets(),
		rectangularSelection(), crosshairCursor(), highlightActiveLine(), highlightSelectionMatches(),
		theme,
		keymap.of([
			{ key: 'Mod-s', preventDefault: true, run: () => (onSave(), true) },
			...closeBracketsKeymap, ...defaultKeymap, ...searchKeymap, ...historyKeymap, ...foldKeymap,
			indentWithTab,
		]),
		language ? LANGUAGES[language]() : [],
		EditorView.updateListener.of((u) => {
			if (u.docChanged) onChange();
		}),
	];
	const stateOf = (text, sep) => EditorState.create({ doc: text, extensions: [EditorState.lineSeparator.of(sep), extensions] });
	const view = new EditorView({ parent, state: stateOf(doc, lineSeparator) });
	return {
		language,
		view,
		text: () => view.state.sliceDoc(),
		// A new document (its own undo history), as when the file is opened again.
		setText(t, sep = '\n') {
			view.setState(stateOf(t, sep));
		},
		focus: () => view.focus(),
		destroy: () => view.destroy(),
	};
}
