#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# The dashboard's Ports tab in headless Chromium (dashboard-ports.mjs): a container workspace
# without a network runs preview-app on 127.0.0.1:3000; the tab lists it listening, exposes it
# with a token, Open (a new tab) shows the app's page with its WebSocket connected ("ws-ok")
# and no console error; Copy URL copies it, a second expose of the port and a host
# workspace's ports answer 409 in words on the page, Revoke ends it (its URL answers 404);
# the frame on the tab ("Open here") shows the app connected too, framed from another site
# (127.0.0.1 against *.preview.localhost: the token's cookie is a partitioned one there), and
# exposed again public. The dashboard's CSP lets it frame this worker's previews only.
# Screenshots land in BUILD/test-artifacts/dashboard-ports/.
. "$(dirname "$0")/container-lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
SHOTS=${STATION_TEST_ARTIFACTS:-$BUILD/test-artifacts}/dashboard-ports
APP_BIN=$BUILD/test/helpers/preview-app

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
PREVIEW_PORT=$(free_port)
URL=http://127.0.0.1:$PORT
[[ -x $APP_BIN ]] || _container_skip_all "$APP_BIN not built"
require_container_controller --listen "tcp:127.0.0.1:$PORT" --preview-listen "tcp:127.0.0.1:$PREVIEW_PORT"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

# app_answers WS: preview-app answers on the workspace's own 127.0.0.1:3000.
app_answers() {
	run_cmd "$1" 'busybox wget -q -O - http://127.0.0.1:3000/ | grep -c ws-pending' >/dev/null 2>&1 &&
		[[ $(j .exitCode) == 0 ]]
}

WS=
HOST_WS=
t_setup() {
	local code
	new_cws WS '{"network":"none"}' || return 1
	code=$(curl -sS --max-time 60 --unix-socket "$SOCK" -X PUT -o "$TMP/put-body" -w '%{http_code}' \
		-H 'Content-Type: application/octet-stream' --data-binary "@$APP_BIN" \
		"http://station/v1/workspaces/$WS/files?path=preview-app&mode=0755")
	[[ $code == 200 || $code == 201 ]] || {
		_fail "upload preview-app: HTTP $code $(head -c 300 "$TMP/put-body")"
		return 1
	}
	api -q POST "/v1/workspaces/$WS/services" '{"name":"app","command":"./preview-app 3000"}'
	assert_status 201 "start preview-app as a service" || return 1
	wait_for -t 30 app_answers "$WS" || {
		_fail "preview-app does not answer in the workspace: $(_short "$BODY")"
		return 1
	}
	new_ws HOST_WS '{"adapter":"host"}' || return 1
	api -q GET "/v1/workspaces/$WS/ports"
	assert_status 200 "GET …/ports" || return 1
	assert_eq 127.0.0.1 "$(j '[.listening[] | select(.port == 3000) | .address] | first')" \
		"the API lists the app listening on 127.0.0.1:3000"
}

t_csp() {
	local csp
	csp=$(curl -sS --max-time 10 -D - -o /dev/null "$URL/" | tr -d '\r' |
		sed -n 's/^content-security-policy: //ip')
	assert_contains "frame-src http://*.preview.localhost:$PREVIEW_PORT" "$csp" \
		"the dashboard may frame this worker's previews" || return 1
	assert_contains "frame-ancestors 'none'" "$csp" "nothing frames the dashboard" || return 1
	assert_contains "default-src 'self'" "$csp" "the rest stays its own origin's"
}

R=
t_browser() {
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	[[ -n $WS && -n $HOST_WS ]] || {
		skip "$1" "needs the workspaces"
		return 2
	}
	rm -rf "$SHOTS"
	mkdir -p "$SHOTS"
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 300 node \
		"$SRC/test/integration/dashboard-ports.mjs" "$URL" "$TOKEN" "$WS" "$HOST_WS" "$SHOTS" \
		2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	cp "$TMP/browser.err" "$SHOTS/browser.log" 2>/dev/null
	note "screenshots: $SHOTS"
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "page: $(j .pageText "$R" | tr '\n' ' ' | cut -c 1-600)"
		diag "console: $(j .console "$R") preview console: $(j .previewConsole "$R")"
		diag "last steps: $(grep '^# step' "$TMP/browser.err" | tail -n 4 | tr '\n' ' ')"
		return 1
	fi
	assert_eq '[]' "$(j .pageErrors "$R")" "the dashboard: no script error, no CSP refusal"
}

browser_ran() {
	[[ -n $R && $(j .ok "$R") == true ]] || {
		skip "$1" "needs the browser session"
		return 1
	}
}

t_listed() {
	browser_ran "$1" || return 2
	assert_eq 127.0.0.1 "$(j .listed.address "$R")" "the tab lists port 3000 on 127.0.0.1" || return 1
	assert_match 'preview-app' "$(j .listed.command "$R")" "with its command" || return 1
	assert_match '^[0-9]+$' "$(j .listed.pid "$R")" "and its pid"
}

t_exposed() {
	browser_ran "$1" || return 2
	assert_match "^http://[a-z0-9-]{1,63}\.preview\.localhost:$PREVIEW_PORT/$" "$(j .url "$R")" \
		"the row's URL: a host of its own under the preview domain" || return 1
	assert_eq "$(j .url "$R")" "$(j .apiUrl "$R")" "the URL the API lists" || return 1
	assert_eq token "$(j .apiAccess "$R")" "token access" || return 1
	assert_eq true "$(j .tokenShown "$R")" "the token shown once on the page" || return 1
	assert_eq false "$(j .apiListsToken "$R")" "GET …/ports does not carry the token" || return 1
	assert_eq "$(j .url "$R")" "$(j .copied "$R")" "Copy URL copies the URL"
}

t_open_tab() {
	browser_ran "$1" || return 2
	assert_eq ws-ok "$(j .opened.title "$R")" "Open: the app's page, its WebSocket echoed" || return 1
	assert_eq "$(j .url "$R")" "$(j .opened.url "$R")" "at the URL, the token gone from it" || return 1
	assert_eq '[]' "$(j .previewConsole "$R")" "no console error in the preview"
}

t_open_frame() {
	browser_ran "$1" || return 2
	assert_eq ws-ok "$(j .tokenFramed.ws "$R")" \
		"a token preview framed from another site: the app, its WebSocket echoed (the token's cookie partitioned under the dashboard's site)" || return 1
	assert_eq "$(j .url "$R")" "$(j .tokenFramed.url "$R")" "the frame at the URL, the token gone from it" || return 1
	assert_eq false "$(j .tokenFramed.hint "$R")" "no cookie hint under *.localhost" || return 1
	assert_eq public "$(j .publicAccess "$R")" "exposed again, public" || return 1
	assert_ne "$(j .url "$R")" "$(j .publicUrl "$R")" "under a host of its own" || return 1
	assert_eq ws-ok "$(j .framed.ws "$R")" "Open here: the app in the tab's frame, its WebSocket echoed" || return 1
	assert_eq false "$(j .framed.hint "$R")" "no cookie hint for a public one" || return 1
	assert_eq '[]' "$(j .frameConsole "$R")" "no console error in the frame"
}

t_refusals() {
	browser_ran "$1" || return 2
	assert_match '409' "$(j .again "$R")" "a second expose of port 3000: 409 on the page" || return 1
	assert_match '[a-z]{4,}.*[a-z]{4,}' "$(j .again "$R")" "in words" || return 1
	assert_match '409' "$(j .hostError "$R")" "a host workspace's Ports tab says 409"
}

t_revoked() {
	browser_ran "$1" || return 2
	assert_eq 0 "$(j .rowsAfterRevoke "$R")" "Revoke: the row goes" || return 1
	assert_eq '[]' "$(j .apiExposedAfter "$R")" "and the exposure from the API" || return 1
	assert_eq 404 "$(j .statusAfterRevoke "$R")" "its URL answers 404"
}

run_or_skip "a container workspace (network none) runs preview-app on 127.0.0.1:3000" t_setup
run_or_skip "the dashboard's CSP: frame-src this worker's previews only" t_csp
run_or_skip "headless Chromium: the Ports tab, expose, open in a tab and a frame, copy, revoke" t_browser
run_or_skip "the tab lists port 3000 listening with its address, pid and command" t_listed
run_or_skip "expose (token): the URL, the token shown once, Copy URL" t_exposed
run_or_skip "Open: the app's page with its WebSocket connected, no console error" t_open_tab
run_or_skip "Open here: the app in a frame on the tab, token (its cookie partitioned under the dashboard's site) and public" t_open_frame
run_or_skip "409s (exposed already, a host workspace) read on the page" t_refusals
run_or_skip "Revoke: the row and the exposure go, the URL answers 404" t_revoked
