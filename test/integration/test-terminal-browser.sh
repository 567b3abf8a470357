#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# A browser attaches to a terminal: headless Chromium (Debian's chromium, driven by npm's
# playwright-core) loads a page that opens the attach WebSocket over TCP with the bearer token
# as a subprotocol, types `echo hi` with the keyboard and sees `hi`.
. "$(dirname "$0")/lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "$TEST_NAME" "chromium, node and npm are needed (scripts/install-deps)"
	exit 0
fi
if ! npm_tools; then # playwright-core, pinned in test/npm-tools
	skip "$TEST_NAME" "$NPM_TOOLS_ERROR"
	exit 0
fi

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
require_controller --listen "tcp:127.0.0.1:$PORT"
new_ws WS || exit 1

t_browser_types_echo_hi() {
	local T token
	token=$(tr -d '\n' <"$ROOT/admin.token")
	api -q POST "/v1/workspaces/$WS/terminals" '{"cols":100,"rows":30}'
	assert_status 201 "open terminal" || return 1
	T=$(j .id)
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 120 node \
		"$SRC/test/integration/term-browser.mjs" "$TMP/page.html" \
		"ws://127.0.0.1:$PORT/v1/workspaces/$WS/terminals/$T/attach" "$token" \
		'echo hi' '\rhi\r?\n' 2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	assert_eq true "$(j .ok "$R")" "the page saw hi" || { diag "$(j .error "$R")"; return 1; }
	assert_eq station-sandbox "$(j .protocol "$R")" "subprotocol selected by the server"
	assert_contains 'echo hi' "$(j .output "$R")" "the typed command echoed"
}

run_test "headless Chromium types echo hi and sees hi" t_browser_types_echo_hi
