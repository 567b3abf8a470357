#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# The dashboard's Code tab in headless Chromium (dashboard-code.mjs) on a host workspace (the
# host's python3-ipykernel and python3-matplotlib): 1+1 shows 2; a matplotlib plot is an <img>
# of the figure's size; 1 / 0 shows ZeroDivisionError's traceback; Interrupt stops an endless
# loop and the next cell still sees x; an HTML result is shown as text, never live (no img
# element made from it, no alert). No console error. Screenshots under the build directory.
. "$(dirname "$0")/lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SHOTS=${STATION_TEST_ARTIFACTS:-$BUILD/test-artifacts}/dashboard-code
MARKUP='<img src=x onerror=alert(1)>'

if ! /usr/bin/python3 -c 'import ipykernel, matplotlib' 2>/dev/null; then
	skip "$TEST_NAME" "python3-ipykernel and python3-matplotlib are needed (scripts/install-deps)"
	exit 0
fi
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_controller --listen "tcp:127.0.0.1:$PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

R=
WS=
t_browser() {
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	new_ws WS '{"adapter":"host"}' || return 1
	rm -rf "$SHOTS"
	mkdir -p "$SHOTS"
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 600 node \
		"$SRC/test/integration/dashboard-code.mjs" "$URL" "$TOKEN" "$WS" "$SHOTS" \
		2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	cp "$TMP/browser.err" "$SHOTS/browser.log" 2>/dev/null
	note "screenshots: $(j '.shots | join(" ")' "$R")"
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "cells: $(j .cells "$R")"
		diag "console: $(j .console "$R")"
		return 1
	fi
	assert_eq '[]' "$(j .console "$R")" "no console errors or CSP reports"
	assert_eq python "$(j .language "$R")" "the language picked by default"
}

browser_ran() {
	[[ -n $R && $(j .ok "$R") == true ]] || {
		skip "$1" "needs the browser session"
		return 1
	}
}

# cell N: what the page showed of the Nth cell run (0-based).
cell() { j ".cells[$1]" "$R"; }

t_value() {
	browser_ran "$1" || return 2
	assert_eq ok "$(j .status "$(cell 0)")" "1+1's status" || return 1
	assert_eq '["2"]' "$(j .results "$(cell 0)")" "1+1's result"
	assert_match '^c-' "$(j .context "$R")" "the context named on the page"
	api -q GET "/v1/workspaces/$WS/contexts"
	assert_eq "[\"$(j .context "$R")\"]" "$(j '[.contexts[].id]')" "the API's contexts: the page's one"
}

t_plot() {
	browser_ran "$1" || return 2
	assert_eq ok "$(j .plot.status "$R")" "the plot's status" || return 1
	# figsize 4x3 inches at 50 dpi, not cropped (bbox_inches None)
	assert_eq '[{"complete":true,"w":200,"h":150}]' "$(j .plot.imgs "$R")" "the plot's <img>, decoded"
}

t_error() {
	browser_ran "$1" || return 2
	assert_eq error "$(j .status "$(cell 2)")" "1 / 0's status" || return 1
	assert_contains "ZeroDivisionError" "$(j .error "$(cell 2)")" "the traceback shown" || return 1
	assert_contains "----> 1 1 / 0" "$(j .error "$(cell 2)")" "the traceback's line"
	assert_contains "division by zero" "$(j .error "$(cell 2)")" "the error's value"
	[[ $(j .error "$(cell 2)") != *$'\033'* ]] || _fail "the traceback shows terminal colours"
}

t_interrupt() {
	browser_ran "$1" || return 2
	assert_eq ok "$(j .status "$(cell 3)")" "x = 41" || return 1
	assert_eq true "$(j .interruptEnabled "$R")" "Interrupt enabled while the loop runs"
	assert_eq interrupted "$(j .status "$(cell 4)")" "the loop's status after Interrupt" || return 1
	assert_eq looping "$(j .stdout "$(cell 4)" | tr -d '\n')" "the loop's stdout, live"
	assert_contains "KeyboardInterrupt" "$(j .error "$(cell 4)")" "the interrupted cell's traceback"
	assert_eq ok "$(j .status "$(cell 5)")" "x + 1 after the interrupt" || return 1
	assert_eq '["42"]' "$(j .results "$(cell 5)")" "x is still 41"
}

t_html() {
	browser_ran "$1" || return 2
	assert_eq ok "$(j .status "$(cell 6)")" "the HTML cell's status" || return 1
	assert_eq "[\"$MARKUP\"]" "$(j .html "$(cell 6)")" "the markup shown literally, as text" || return 1
	assert_eq '[true]' "$(j .htmlOpen "$(cell 6)")" "shown open (its text/plain is only a repr)"
	assert_eq '[]' "$(j .imgs "$(cell 6)")" "no img element in the HTML cell's output"
	assert_eq 1 "$(j '[.imgsOnPage[] | select(startswith("data:image/png"))] | length' "$R")" \
		"the page's only img: the plot ($(j .imgsOnPage "$R"))"
	assert_eq '[]' "$(j .dialogs "$R")" "nothing ran (no alert)"
}

run_or_skip "headless Chromium: the Code tab runs cells" t_browser
run_or_skip "1+1 shows 2 in the page's context" t_value
run_or_skip "a matplotlib plot is an <img> of the figure's size" t_plot
run_or_skip "1 / 0 shows ZeroDivisionError's traceback" t_error
run_or_skip "Interrupt stops while True: pass; the next cell still sees x" t_interrupt
run_or_skip "an HTML result is shown as text, never live" t_html
