#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# The dashboard's Files tab on a container workspace (headless Chromium, dashboard-files.mjs
# with a workspace): the tree starts at the container's working directory, a file typed and
# saved lands there, and a symlink to /etc/passwd opens the container's file, never this
# machine's. The screenshot is kept in BUILD/test-artifacts/ (STATION_TEST_ARTIFACTS).
. "$(dirname "$0")/container-lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
ARTIFACTS=${STATION_TEST_ARTIFACTS:-$BUILD/test-artifacts}

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_container_controller --listen "tcp:127.0.0.1:$PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")
new_cws WS || exit 1

t_container_files() {
	local R shot=$ARTIFACTS/dashboard-files-container.png
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if [[ $(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$URL/ui/vendor/codemirror.mjs") != 200 ]]; then
		skip "$1" "the build has no CodeMirror bundle"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	run_cmd "$WS" 'ln -s /etc/passwd pw && test -L pw' || return 1
	assert_eq 0 "$(j .exitCode)" "the link made inside the container" || return 1
	mkdir -p "$ARTIFACTS"
	rm -f "$shot" "${shot%.png}-failed.png"
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 240 node \
		"$SRC/test/integration/dashboard-files.mjs" "$URL" "$TOKEN" "$shot" "$WS" 2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "page: $(j .pageText "$R" | tr '\n' ' ' | cut -c 1-600)"
		diag "console: $(j .console "$R")"
		return 1
	fi
	assert_eq /home/node/workspace "$(j .home "$R")" "the tree starts at the container's working directory"
	assert_eq true "$(j .watchLive "$R")" "the watch is live"
	assert_eq markdown "$(j .language "$R")" "notes.md is highlighted as Markdown"
	assert_eq true "$(j .savedExact "$R")" "the saved bytes, through the API"
	assert_eq true "$(j .linkIsContainers "$R")" "the link opens the container's /etc/passwd"
	assert_eq true "$(j .linkIsNotHosts "$R")" "not this machine's"
	assert_eq '[]' "$(j .foreignRequests "$R")" "no request to another origin"
	assert_eq '[]' "$(j .pageErrors "$R")" "no script error, no CSP refusal"
	[[ -s $shot ]] && note "screenshot: $shot"
}

run_or_skip "headless Chromium: Files tab of a container workspace: its workdir, a save, a link to /etc/passwd is the container's" t_container_files
