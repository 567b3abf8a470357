#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# The dashboard's Files tab (web/files.js; the editor is CodeMirror, bundled by the build from
# web/package.json's pins, or a textarea without the bundle) in headless Chromium (Debian's,
# driven by npm's playwright-core; dashboard-files.mjs): a folder and a file made, typed and
# saved byte for byte, changes made through the API seen through the watch (a clean editor
# reloads; a modified one says so and saving asks: overwrite, or reload), upload by file
# input and by drag and drop, download, rename, delete with a confirmation naming what goes,
# binary and > 2 MiB files refused for editing, hostile names shown as text, the textarea
# fallback, and no request to another origin. The screenshot of the tab is kept in
# BUILD/test-artifacts/ (STATION_TEST_ARTIFACTS).
. "$(dirname "$0")/lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
ARTIFACTS=${STATION_TEST_ARTIFACTS:-$BUILD/test-artifacts}

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_controller --listen "tcp:127.0.0.1:$PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

HAVE_BUNDLE=1
t_assets() {
	local code
	code=$(curl -sS --max-time 10 -o "$TMP/files.js" -w '%{http_code}' "$URL/ui/files.js")
	assert_eq 200 "$code" "GET /ui/files.js" || return 1
	assert_contains 'export function filesTab' "$(cat "$TMP/files.js")" "the Files tab module"
	code=$(curl -sS --max-time 10 -o "$TMP/cm.mjs" -w '%{http_code}' "$URL/ui/vendor/codemirror.mjs")
	if [[ $code == 404 ]]; then
		HAVE_BUNDLE=0
		skip "$1" "the build has no CodeMirror bundle (web/node_modules without esbuild or @codemirror)"
		return 2
	fi
	assert_eq 200 "$code" "GET /ui/vendor/codemirror.mjs" || return 1
	if ! command -v node >/dev/null; then
		note "no node: the bundle's module is not loaded outside the browser"
		return 0
	fi
	# Node loads it with nothing to resolve: one module, no imports. The languages by name.
	local langs
	langs=$(node --input-type=module -e '
		const m = await import(process.argv[1]);
		const names = ["a.js", "a.ts", "a.json", "a.md", "a.py", "a.c", "a.h", "a.sh", "a.html",
			"a.css", "a.yaml", "Dockerfile", ".bashrc", "a.txt", "noext"];
		console.log(typeof m.createEditor, names.map((n) => String(m.languageFor(n))).join(","));
	' "$TMP/cm.mjs" 2>&1)
	assert_eq "function javascript,typescript,json,markdown,python,cpp,cpp,shell,html,css,yaml,dockerfile,shell,null,null" \
		"$langs" "the bundle loads alone and highlights by extension"
}

BROWSER=
t_browser_files() {
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ((!HAVE_BUNDLE)); then
		skip "$1" "the session drives CodeMirror, which this build lacks (the textarea is its last step)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	mkdir -p "$ARTIFACTS"
	local shot=$ARTIFACTS/dashboard-files.png R
	rm -f "$shot" "${shot%.png}-failed.png"
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 300 node \
		"$SRC/test/integration/dashboard-files.mjs" "$URL" "$TOKEN" "$shot" 2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	BROWSER=$R
	[[ -n $(j .workspace "$R") && $(j .workspace "$R") != null ]] && WORKSPACES+=("$(j .workspace "$R")")
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "page: $(j .pageText "$R" | tr '\n' ' ' | cut -c 1-600)"
		diag "console: $(j .console "$R")"
		return 1
	fi
	local home
	home=$(j .home "$R")
	assert_match '^/' "$home" "the tree starts at the workspace directory"
	assert_eq true "$(j .watchLive "$R")" "the watch is live"
	assert_eq dir "$(j .folderType "$R")" "the new folder in the tree"
	assert_eq 200 "$(j .folderApiStatus "$R")" "the new folder through the API"
	assert_eq codemirror "$(j .renderer "$R")" "the editor is CodeMirror"
	assert_eq javascript "$(j .language "$R")" "app.js is highlighted as JavaScript"
	assert_eq "const greeting = 'héllo, 世界';"$'\n'"export default greeting;" "$(j .editorBeforeSave "$R")" "what was typed"
	assert_eq true "$(j .savedExact "$R")" "the saved bytes, through the API"
	assert_le 3 "$(j .highlightedSpans "$R")" "highlighted tokens"
	assert_contains "changed on disk and was reloaded" "$(j .reloadedNotice "$R")" "a clean editor reloads a change"
	assert_eq unchanged "$(j .stateAfterReload "$R")" "and is clean after it"
	assert_contains "changed on disk since you opened it" "$(j .changedNotice "$R")" "a modified editor says the file changed"
	assert_eq true "$(j .keptMine "$R")" "and keeps what was typed"
	assert_contains "changed since you opened it" "$(j .conflictDialog "$R")" "saving then asks"
	assert_contains "Overwrite" "$(j .conflictDialog "$R")" "overwrite offered"
	assert_contains "Reload" "$(j .conflictDialog "$R")" "reload offered"
	assert_eq true "$(j .overwriteExact "$R")" "overwrite wrote the editor's text"
	assert_eq true "$(j .reloadKeptDisk "$R")" "reload kept what is on disk"
	assert_eq true "$(j .crlfExact "$R")" "CRLF lines stay CRLF"
	assert_eq true "$(j .treeFollowsWatch "$R")" "the tree follows changes made elsewhere"
	assert_eq true "$(j .uploadExact "$R")" "upload through the file input, byte for byte"
	assert_eq true "$(j .dropExact "$R")" "upload by drag and drop, byte for byte"
	assert_contains "is binary" "$(j .binaryRefusal "$R")" "a binary file is not edited"
	assert_eq blob.bin "$(j .downloadName "$R")" "the download's name"
	assert_eq true "$(j .downloadExact "$R")" "the download, byte for byte"
	assert_contains "too large to edit" "$(j .bigRefusal "$R")" "a file over 2 MiB is not edited"
	assert_eq "<img src=x onerror=alert(1)>.js" "$(j .evilName "$R")" "markup in a name is text"
	assert_eq 'evil\u202egnp.js' "$(j .bidiName "$R")" "a bidi override in a name is shown escaped"
	assert_eq 0 "$(j .imgInTree "$R")" "no element made from a name"
	assert_eq true "$(j .inLinkOpens "$R")" "a symlink within the workspace opens its target"
	assert_contains "escapes the workspace" "$(j .outLinkError "$R")" "a symlink out of it: the API's refusal, shown"
	assert_contains "(HTTP 400, invalid_argument, field path)" "$(j .outLinkError "$R")" "with its status, code and field"
	assert_eq true "$(j .outLinkShowsNoSecret "$R")" "and nothing of the file outside"
	assert_eq 404 "$(j .renameOld "$R")" "rename: the old name is gone"
	assert_eq true "$(j .renameNew "$R")" "rename: the content under the new name"
	assert_eq '["<img src=x onerror=alert(1)>.js","app.js","big.txt","blob.bin","evil\\u202egnp.js","in-link","out-link","renamed.txt"]' \
		"$(j '.doomed | sort' "$R")" "the delete confirmation names what goes"
	assert_contains "everything in it" "$(j .deleteDialog "$R")" "it says the folder goes with its content"
	assert_eq 404 "$(j .deletedStatus "$R")" "the folder is gone"
	assert_eq true "$(j .editorClosed "$R")" "the editor of a file in it closed"
	assert_eq true "$(j .outsideKept "$R")" "the file a link in it pointed to outside is untouched"
	assert_eq textarea "$(j .fallbackRenderer "$R")" "without the bundle: a textarea"
	assert_eq true "$(j .fallbackExact "$R")" "the textarea saves (CRLF kept)"
	assert_eq '[]' "$(j .foreignRequests "$R")" "no request to another origin"
	assert_eq '[]' "$(j .pageErrors "$R")" "no script error, no CSP refusal"
	[[ -s $shot ]] && note "screenshot: $shot"
}

run_or_skip "the Files tab and the CodeMirror bundle are served, the bundle one self-contained module" t_assets
run_or_skip "headless Chromium: Files tab: tree, edit, save, conflict, watch, upload, download, rename, delete" t_browser_files
