#!/bin/bash
# run-all: not under sanitizers: a browser drives the dashboard; the API paths it uses run in the other scripts
# The dashboard the controller serves at / (web/, embedded by scripts/embed-web, served by
# src/api/web.c): its static responses (no token, strict CSP, caching), then a person's
# session in headless Chromium (Debian's, driven by npm's playwright-core; dashboard.mjs):
# sign in with the admin token, the worker, a host workspace, a command with its output and
# exit code, a terminal, a service; the tab closes and the service keeps running.
. "$(dirname "$0")/lib.sh"

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
require_controller --listen "tcp:127.0.0.1:$PORT" --lxcfs off
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")

# web_get PATH [CURL ARGS...]: no token; sets STATUS, HEADERS (lower-case names) and BODY.
web_get() {
	local path=$1
	shift
	HEADERS=$(curl -sS --max-time 10 -o "$TMP/body" -D - "$@" "$URL$path" 2>/dev/null | tr -d '\r')
	STATUS=$(awk 'NR == 1 {print $2}' <<<"$HEADERS")
	[[ -n $STATUS ]] || STATUS=000
	HEADERS=$(sed 's/^\([^:]*\):/\L\1:/' <<<"$HEADERS")
	BODY=$(cat "$TMP/body" 2>/dev/null)
}

header() {
	sed -n "s/^$1: //p" <<<"$HEADERS" | head -n 1
}

t_static_headers() {
	local csp etag
	web_get /
	assert_status 200 "GET / without a token" || return 1
	assert_eq "text/html; charset=utf-8" "$(header content-type)" "content type of /"
	assert_contains '<script type="module" src="/ui/app.js">' "$BODY" "the page loads its module"
	csp=$(header content-security-policy)
	assert_contains "default-src 'self'" "$csp" "CSP default-src"
	assert_contains "script-src 'self';" "$csp" "CSP script-src: our files only, no inline script"
	assert_contains "connect-src 'self' ws: wss:" "$csp" "CSP connect-src"
	assert_contains "frame-ancestors 'none'" "$csp" "CSP frame-ancestors"
	assert_eq DENY "$(header x-frame-options)" "X-Frame-Options"
	assert_eq nosniff "$(header x-content-type-options)" "X-Content-Type-Options"
	assert_eq no-cache "$(header cache-control)" "Cache-Control"
	if grep -qi '<script>\|<script [^>]*>[^<]' "$TMP/body"; then
		_fail "index.html has an inline script"
	fi

	web_get /ui/app.js
	assert_status 200 "GET /ui/app.js" || return 1
	assert_eq "text/javascript; charset=utf-8" "$(header content-type)" "content type of a module"
	assert_contains "default-src 'self'" "$(header content-security-policy)" "CSP on every asset"
	etag=$(header etag)
	assert_match '^"[0-9a-f]{20}"$' "$etag" "ETag"
	web_get /ui/app.js -H "If-None-Match: $etag"
	assert_status 304 "revalidation with the ETag"
	web_get /ui/style.css
	assert_eq "text/css; charset=utf-8" "$(header content-type)" "content type of the style sheet"
	web_get /ui/favicon.svg
	assert_eq "image/svg+xml" "$(header content-type)" "content type of the icon"

	web_get /ui/nope.js
	assert_status 404 "an unknown asset"
	web_get / -X POST
	assert_status 405 "POST /"
	assert_eq "GET, HEAD" "$(header allow)" "Allow of /"
	web_get /v1/worker
	assert_status 401 "the API still needs the token"
	web_get /v1/worker -H "Authorization: Bearer $TOKEN"
	assert_status 200 "the API with the token"
}

BROWSER=
t_browser_session() {
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	local shot=${DASHBOARD_SCREENSHOT:-$TMP/dashboard.png}
	R=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 240 node \
		"$SRC/test/integration/dashboard.mjs" "$URL" "$TOKEN" test "$shot" 2>"$TMP/browser.err")
	[[ -n $R ]] || R="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' ' ')\"}"
	BROWSER=$R
	if [[ $(j .ok "$R") != true ]]; then
		_fail "the session stopped at \"$(j .step "$R")\": $(j .error "$R")"
		diag "page: $(j .pageText "$R" | tr '\n' ' ' | cut -c 1-600)"
		diag "console: $(j .console "$R")"
		return 1
	fi
	assert_eq 200 "$(j .documentStatus "$R")" "the page loads"
	assert_contains "default-src 'self'" "$(j .csp "$R")" "the browser got the CSP"
	assert_eq "The controller refused this token." "$(j .wrongTokenMessage "$R")" "a wrong token is refused"
	assert_contains 'store:' "$(j '.checks | join(",")' "$R")" "ready checks listed"
	# --lxcfs off is the operator's choice: neither ✓ nor ✗; every other check as the API says
	# (✓ ok, ✗ not ok: whatever this machine gives, the page agrees with GET /v1/ready).
	api -q GET /v1/ready
	assert_eq true "$(j '.checks[] | select(.name == "lxcfs") | .disabled')" "the API says lxcfs is off by choice"
	assert_eq "$(j '[.checks[] | {(.name): (if .disabled then "off –" elif .ok then "ok ✓" else "bad ✗" end)}] | add')" \
		"$(j .checkMarks "$R")" "each check's mark on the page"
	assert_eq "off –" "$(j '.checkMarks.lxcfs' "$R")" "lxcfs off: neither ✓ nor ✗"
	assert_eq "ok ✓" "$(j '.checkMarks.store' "$R")" "a check that passes (control)"
	# No --default-image: the worker view says a create must name its image.
	api -q GET /v1/worker
	assert_eq null "$(j .defaultImage)" "GET /v1/worker: no default image"
	assert_eq "none: a container workspace must name its image (a create without one is refused)" \
		"$(j .defaultImage "$R")" "the page says a create without an image is refused"
	assert_eq false "$(j .tokenInUrl "$R")" "the token stays out of the URL"
	assert_eq none,bridge,restricted "$(j .networkModes "$R")" "the network modes offered"
	assert_eq true "$(j .allowRowHiddenForNone "$R")" "no allow list for network none"
	assert_eq true "$(j .allowRowShownForRestricted "$R")" "an allow list for restricted only"
	assert_eq '[{"domain":"github.com"},{"domain":"*.npmjs.org","ports":[443]},{"cidr":"203.0.113.0/24","ports":[443,80],"proto":"tcp"}]' \
		"$(j .allowParsed "$R")" "allow list lines become egress rules"
	assert_eq host "$(j .workspaceAdapter "$R")" "a host workspace"
	assert_match '^test-[a-z2-7]{26}$' "$(j .workspace "$R")" "its id"
	assert_eq $'hi\nerr' "$(j .runOutput "$R")" "live output, both streams"
	assert_eq $'err' "$(j .runStderr "$R" | tr -d '\n')" "stderr marked as stderr"
	assert_eq exited "$(j .runStatus "$R")" "status"
	assert_eq 3 "$(j .runExit "$R")" "exit code"
	assert_eq exited "$(j .historyStatus "$R")" "history"
	assert_eq hi "$(j .storedStdout "$R" | tr -d '\n')" "stored stdout"
	assert_eq err "$(j .storedStderr "$R" | tr -d '\n')" "stored stderr"
	assert_eq true "$(j .terminalSawHello "$R")" "the terminal echoed hello"
	assert_eq 1 "$(j .serviceAttempts "$R")" "service attempts"
	assert_eq 0 "$(j .serviceRestarts "$R")" "service restarts"
	assert_contains up "$(j .serviceLogs "$R")" "service live logs"
	assert_eq false "$(j .unauthorizedHadToken "$R")" "the 401 call had no token"
	assert_contains 401 "$(j .loginMessage "$R")" "the login says why"
	assert_eq plain "$(j .fallbackRenderer "$R")" "fallback without xterm.js"
	assert_eq true "$(j .fallbackSawOutput "$R")" "the fallback terminal works"
	note "terminal renderer: $(j .terminalRenderer "$R")"
}

t_service_outlives_tab() {
	local ws
	[[ -n $BROWSER && $(j .ok "$BROWSER") == true ]] || {
		skip "$1" "needs the browser session"
		return 2
	}
	ws=$(j .workspace "$BROWSER")
	api -q GET "/v1/workspaces/$ws/services/web"
	assert_status 200 "the service" || return 1
	assert_eq running "$(j .state)" "the service still runs after the tab closed"
	assert_eq 1 "$(j .currentAttempt)" "the same attempt"
	assert_eq 0 "$(j .restartCount)" "no restart"
	api -q GET "/v1/workspaces/$ws/terminals/$(j .terminalId "$BROWSER")"
	assert_eq running "$(j .state)" "the terminal still runs too"
	api -q POST "/v1/workspaces/$ws/services/web/stop"
	api -q GET "/v1/workspaces/$ws/commands?limit=5"
	assert_eq 3 "$(j '.commands[0].exitCode')" "the command the page ran"
}

run_test "static responses: no token, CSP, X-Frame-Options, nosniff, ETag" t_static_headers
run_or_skip "headless Chromium: sign in, worker, workspace, command, terminal, service, 401" t_browser_session
run_or_skip "the service outlives the closed tab" t_service_outlives_tab
