#!/bin/bash
# Previews across workers (docs/operations.md, "Previews" and "The dashboard across workers"):
# two controllers on loopback, each with its own preview listener and preview domain. w2 (this
# script's container controller: --preview-domain w2.preview.localhost) runs busybox httpd on
# 127.0.0.1:3000 of a none workspace; w1 (host adapter, --preview-domain w1.preview.localhost,
# --workers naming both, w2's admin token as its own) exposes that port through its API relay
# (/v1/workers/W2/v1/workspaces/ID/ports, the caller's token). The answer's URL is under
# w2.preview.localhost on w2's listener port and serves the page there; the same label sent to
# w1's listener is 404 (a worker serves its own workspaces' previews only), w2's listener the
# positive control. The CLI with STATION_WORKERS lists the exposure from w2; a revoke through
# the relay ends it. In Chromium (preview-workers-dashboard.mjs), w1's dashboard exposes it from
# the w2 workspace's Ports tab at w2's URL, opens the page and revokes it. Then w2 again as a
# private worker (--tenant acme): acme's token exposes its own workspace's port and the preview
# answers; another tenant's token gets 404 on expose, list and revoke of it, and its preview
# stays the owner's. Last, w2 as a proxy's upstream
# (--preview-url https://w2.preview.example.com): URLs say https without a port, a request as
# the proxy passes it (the browser's Host, X-Forwarded-For) reaches the app with the client's
# address and https, and the token's cookie is Secure.
. "$(dirname "$0")/container-lib.sh"
. "$(dirname "$0")/preview-lib.sh"

W1_API=$(free_port)
W2_API=$(free_port)
PV1=$(free_port)
PV2=$PREVIEW_PORT
W1=http://127.0.0.1:$W1_API
W2=http://127.0.0.1:$W2_API
# w2's worker name is container-lib's WORKER (its workspaces' cgroups are found by it).
W2NAME=$WORKER

preview_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}
W2_FLAGS=(--preview-listen "tcp:127.0.0.1:$PV2" --preview-domain w2.preview.localhost
	--listen "tcp:127.0.0.1:$W2_API" --tenant-images 'busybox@*' --tenant-networks none)
require_container_controller "${W2_FLAGS[@]}"
TOKEN=$(tr -d '\n' <"$ROOT/admin.token")
(umask 077 && printf '%s\n' "$TOKEN" >"$TMP/shared.token")

# w1: a controller of its own root, given w2's admin token as its own.
W1_PID=
W1_ROOT=$TMP/w1
w1_ready() {
	kill -0 "$W1_PID" 2>/dev/null || return 2
	[[ $(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$W1_ROOT/station.sock" http://x/v1/ready) == 200 ]]
}
start_w1() {
	mkdir -p "$W1_ROOT"
	"$DAEMON" --root "$W1_ROOT" --worker w1 --log-format text --network-range none \
		--adapters host --default-adapter host --listen "tcp:127.0.0.1:$W1_API" \
		--admin-token-file "$TMP/shared.token" --workers "w1=$W1,$W2NAME=$W2" \
		--preview-listen "tcp:127.0.0.1:$PV1" --preview-domain w1.preview.localhost \
		>>"$W1_ROOT/controller.log" 2>&1 </dev/null &
	W1_PID=$!
	wait_for -t 20 w1_ready || {
		diag "w1 did not become ready within 20 s"
		tail -n 30 "$W1_ROOT/controller.log" | sed 's/^/#   /'
		return 1
	}
}
stop_w1() {
	[[ -n $W1_PID ]] || return 0
	kill -TERM "$W1_PID" 2>/dev/null
	wait_for -t 20 _pid_gone "$W1_PID" || kill -KILL "$W1_PID" 2>/dev/null
	wait "$W1_PID" 2>/dev/null
	W1_PID=
}
cleanup_w1() {
	local rc=$?
	stop_w1
	(exit "$rc")
	_container_cleanup
}
trap cleanup_w1 EXIT
start_w1 || {
	not_ok "controller w1 starts" "see the diagnostics above"
	exit 1
}

# tcp TOKEN METHOD URL [BODY]: one request over TCP; sets STATUS and BODY.
tcp() {
	local token=$1 method=$2 url=$3 args
	args=(-sS --max-time 90 -X "$method" -o "$TMP/tcp-body" -w '%{http_code}'
		-H "Authorization: Bearer $token")
	if [[ $# -ge 4 ]]; then
		printf '%s' "$4" >"$TMP/tcp-req"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/tcp-req")
	fi
	: >"$TMP/tcp-body"
	STATUS=$(curl "${args[@]}" "$url" 2>"$TMP/curl-err") || STATUS=000
	BODY=$(cat "$TMP/tcp-body")
}

# pvat PORT HOST PATH [CURL ARGS...]: pv against the listener on PORT.
pvat() {
	local PREVIEW_PORT=$1
	shift
	pv "$@"
}

WS=
HOST='' PTOKEN='' PURL=''

t_setup() {
	new_cws WS '{"network":"none"}' || return 1
	assert_match "^$W2NAME-" "$WS" "the workspace's id names w2" || return 1
	# an icon of its own, so the browser's /favicon.ico is no 404 (no console error at all)
	run_cmd "$WS" 'mkdir -p www && echo preview-on-w2 >www/index.html && : >www/favicon.ico' >/dev/null
	assert_eq 0 "$(j .exitCode)" "write httpd's page" || return 1
	# shellcheck disable=SC2016 # $PWD is the workspace's
	start_apps "$WS" httpd 'httpd -f -p 127.0.0.1:3000 -h "$PWD/www"' 3000
}
run_test "setup: busybox httpd on 127.0.0.1:3000 of a none workspace on w2" t_setup
[[ -n $WS ]] || exit 1

t_expose_through_w1() {
	tcp "$TOKEN" GET "$W1/v1/workers"
	assert_eq 200 "$STATUS" "w1's workers" || return 1
	assert_eq up "$(j ".workers[] | select(.name == \"$W2NAME\") | .state")" "w2 as w1 sees it" || return 1
	tcp "$TOKEN" POST "$W1/v1/workers/$W2NAME/v1/workspaces/$WS/ports" '{"port":3000}'
	assert_eq 201 "$STATUS" "expose through w1's relay: $(_short "$BODY")" || return 1
	PURL=$(j .url) PTOKEN=$(j .token) HOST=$(j .host)
	assert_match '^3000-[a-z2-7]{26}\.w2\.preview\.localhost$' "$HOST" "the host: one label under w2's domain" || return 1
	assert_eq "http://$HOST:$PV2/" "$PURL" "the URL names w2's listener port" || return 1
	assert_eq "http://$HOST:$PV2/?station_preview_token=$PTOKEN" "$(j .openUrl)" "openUrl"
	assert_match '^sp_' "$PTOKEN" "a token-access exposure's token"
	# w1 itself has no such workspace (the exposure is w2's, not w1's)
	tcp "$TOKEN" GET "$W1/v1/workspaces/$WS/ports"
	assert_eq 404 "$STATUS" "w1's own API for w2's workspace"
}
run_test "w1's relay exposes w2's port 3000: the URL is under w2.preview.localhost on w2's listener port" t_expose_through_w1
[[ -n $HOST ]] || exit 1

t_served_by_w2_only() {
	pvat "$PV2" "$HOST" / -H "Authorization: Bearer $PTOKEN"
	assert_code 200 "w2's listener with the token" || return 1
	assert_eq preview-on-w2 "$PV_BODY" "httpd's page through w2's listener" || return 1
	pvat "$PV2" "$HOST" /
	assert_code 401 "w2's listener without the token"
	pvat "$PV1" "$HOST" / -H "Authorization: Bearer $PTOKEN"
	assert_code 404 "the same label and token sent to w1's listener" || return 1
	[[ $PV_BODY != *preview-on-w2* ]] || _fail "w1's listener served w2's page: $PV_BODY"
	# the label under w1's own domain is no exposure of w1's either
	pvat "$PV1" "${HOST%%.*}.w1.preview.localhost" / -H "Authorization: Bearer $PTOKEN"
	assert_code 404 "w2's label under w1's domain on w1's listener"
	# and w2's listener serves nothing under w1's domain (control: the same label, w2's domain)
	pvat "$PV2" "${HOST%%.*}.w1.preview.localhost" / -H "Authorization: Bearer $PTOKEN"
	assert_code 404 "w2's label under w1's domain on w2's listener"
	pvat "$PV2" "$HOST" / -H "Authorization: Bearer $PTOKEN"
	assert_code 200 "control: w2's listener still serves it"
}
run_test "the preview answers on w2's listener (401 without its token); w1's listener answers 404 for it" t_served_by_w2_only

t_listed() {
	tcp "$TOKEN" GET "$W1/v1/workers/$W2NAME/v1/workspaces/$WS/ports"
	assert_eq 200 "$STATUS" "list through w1's relay" || return 1
	assert_eq "$PURL" "$(j '.exposed[] | select(.port == 3000) | .url')" "the relay's list: w2's URL" || return 1
	assert_eq httpd "$(j '.listening[] | select(.port == 3000) | .command')" "httpd listening"
	local out rc
	out=$(STATION_WORKERS="w1=$W1,$W2NAME=$W2" STATION_TOKEN=$TOKEN "$CLI_BIN" port ls "$WS" 2>"$TMP/cli-err")
	rc=$?
	assert_eq 0 "$rc" "CLI port ls exit status (stderr: $(cat "$TMP/cli-err"))" || return 1
	assert_eq "$PURL" "$(awk '$1 == "3000" && $2 == "token" {print $3}' <<<"$out")" \
		"CLI port ls across workers: port 3000's URL (output: $out)" || return 1
	[[ $out != *"$PTOKEN"* ]] || _fail "the CLI listed the token"
	out=$(STATION_WORKERS="w1=$W1,$W2NAME=$W2" STATION_TOKEN=$TOKEN "$CLI_BIN" port ls --json "$WS" 2>"$TMP/cli-err")
	assert_eq "$PURL" "$(j '.exposed[] | select(.port == 3000) | .url' "$out")" "CLI port ls --json"
}
run_test "the exposure is listed through w1's relay and by the CLI with STATION_WORKERS, with w2's URL" t_listed

t_revoke_through_w1() {
	tcp "$TOKEN" DELETE "$W1/v1/workers/$W2NAME/v1/workspaces/$WS/ports/3000"
	assert_eq 204 "$STATUS" "revoke through w1's relay: $(_short "$BODY")" || return 1
	pvat "$PV2" "$HOST" / -H "Authorization: Bearer $PTOKEN"
	assert_code 404 "the revoked preview on w2's listener"
	tcp "$TOKEN" DELETE "$W1/v1/workers/$W2NAME/v1/workspaces/$WS/ports/3000"
	assert_eq 404 "$STATUS" "a second revoke"
}
run_test "a revoke through w1's relay ends the preview on w2 (404)" t_revoke_through_w1

CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
t_dashboard() {
	local r
	if [[ ! -x $CHROMIUM ]] || ! command -v node >/dev/null || ! command -v npm >/dev/null; then
		skip "$1" "chromium, node and npm are needed (scripts/install-deps)"
		return 2
	fi
	if ! npm_tools; then # playwright-core, pinned in test/npm-tools
		skip "$1" "$NPM_TOOLS_ERROR"
		return 2
	fi
	r=$(PLAYWRIGHT_DIR=$NPM_TOOLS CHROMIUM=$CHROMIUM HOME=$TMP timeout 300 node \
		"$SRC/test/integration/preview-workers-dashboard.mjs" "$W1" "$TOKEN" "$WS" 2>"$TMP/browser.err")
	[[ -n $r ]] || r="{\"error\":\"no result: $(tail -c 300 "$TMP/browser.err" | tr '\n"' '  ')\"}"
	if [[ $(j .ok "$r") != true ]]; then
		_fail "the session stopped at \"$(j .step "$r")\": $(j .error "$r")"
		diag "page: $(j .pageText "$r" | tr '\n' ' ' | cut -c 1-600)"
		diag "console: $(j .console "$r")"
		return 1
	fi
	assert_eq httpd "$(j .listedCommand "$r")" "port 3000 listening, as w2 reads it"
	assert_match "^http://3000-[a-z2-7]{26}\\.w2\\.preview\\.localhost:$PV2/\$" "$(j .url "$r")" \
		"the Ports tab's URL: w2's domain and listener port"
	assert_eq preview-on-w2 "$(j .opened.text "$r")" "Open: the page through w2's listener"
	assert_eq "$(j .url "$r")" "$(j .opened.url "$r")" "the tab ends at the URL (the token's parameter gone)"
	assert_eq '[]' "$(j .previewConsole "$r")" "the preview's console errors"
	assert_eq '[]' "$(j .pageErrors "$r")" "the dashboard's script errors"
	tcp "$TOKEN" GET "$W1/v1/workers/$W2NAME/v1/workspaces/$WS/ports"
	assert_eq '[]' "$(j .exposed)" "revoked from the tab: w2 lists no exposure"
}
run_test "w1's dashboard: the Ports tab of w2's workspace exposes port 3000 at w2's URL, Open shows the page, Revoke ends it" t_dashboard

# ---------------------------------------------------------------------------------------------
# w2 as a private worker.

new_token() {
	api -q POST /v1/tokens "$2"
	assert_status 201 "token create" || return 1
	printf -v "$1" '%s' "$(j .token)"
}

t_private_worker() {
	local acme other wa host ptok
	new_token acme '{"name":"acme","scope":"tenant","tenant":"acme"}' || return 1
	new_token other '{"name":"other","scope":"tenant","tenant":"globex"}' || return 1
	stop_controller
	start_container_controller "${W2_FLAGS[@]}" --tenant acme || return 1
	tcp "$acme" GET "$W2/v1/worker"
	assert_eq acme "$(j .tenant)" "the private worker's tenant" || return 1
	tcp "$acme" POST "$W2/v1/workspaces" "$(jq -nc --arg i "$IMAGE" \
		'{adapter: "container", image: $i, network: "none"}')"
	assert_eq 201 "$STATUS" "acme creates a workspace: $(_short "$BODY")" || return 1
	wa=$(j .id)
	WORKSPACES+=("$wa")
	# shellcheck disable=SC2016 # $PWD is the workspace's
	tcp "$acme" POST "$W2/v1/workspaces/$wa/services" \
		'{"name":"httpd","command":"mkdir -p www && echo acme-page >www/index.html && exec httpd -f -p 127.0.0.1:3000 -h \"$PWD/www\""}'
	assert_eq 201 "$STATUS" "acme starts httpd: $(_short "$BODY")" || return 1
	wait_for -t 30 ports_up "$wa" 3000 || {
		_fail "port 3000 does not accept in $wa: $(_short "$BODY")"
		return 1
	}
	tcp "$other" POST "$W2/v1/workspaces/$wa/ports" '{"port":3000}'
	assert_eq 404 "$STATUS" "another tenant exposes acme's port"
	tcp "$acme" POST "$W2/v1/workspaces/$wa/ports" '{"port":3000}'
	assert_eq 201 "$STATUS" "acme exposes its own port: $(_short "$BODY")" || return 1
	host=$(j .host) ptok=$(j .token)
	assert_eq "http://$host:$PV2/" "$(j .url)" "the URL" || return 1
	pvat "$PV2" "$host" / -H "Authorization: Bearer $ptok"
	assert_code 200 "acme's preview with its token" || return 1
	assert_eq acme-page "$PV_BODY" "acme's page"
	pvat "$PV2" "$host" / -H "Authorization: Bearer $other"
	assert_code 401 "another tenant's API token on acme's preview"
	tcp "$other" GET "$W2/v1/workspaces/$wa/ports"
	assert_eq 404 "$STATUS" "another tenant lists acme's ports"
	tcp "$other" DELETE "$W2/v1/workspaces/$wa/ports/3000"
	assert_eq 404 "$STATUS" "another tenant revokes acme's port"
	pvat "$PV2" "$host" / -H "Authorization: Bearer $ptok"
	assert_code 200 "acme's preview still answers after the refused revoke"
	tcp "$acme" GET "$W2/v1/workspaces/$wa/ports"
	assert_eq 200 "$STATUS" "acme lists its ports" &&
		assert_eq "http://$host:$PV2/" "$(j '.exposed[] | select(.port == 3000) | .url')" \
			"acme's list"
	tcp "$acme" DELETE "$W2/v1/workspaces/$wa/ports/3000"
	assert_eq 204 "$STATUS" "acme revokes its port"
	pvat "$PV2" "$host" / -H "Authorization: Bearer $ptok"
	assert_code 404 "acme's revoked preview"
}
run_test "a private worker (--tenant acme): acme's token exposes its workspace's port and the preview answers; another tenant's gets 404" t_private_worker

# ---------------------------------------------------------------------------------------------
# w2 behind a TLS proxy (docs/operations.md, "Previews"): --preview-url names the scheme and
# domain browsers use; the proxy passes the Host on and adds X-Forwarded-For.

t_preview_url() {
	local flags=() i host tok cookie
	for ((i = 0; i < ${#W2_FLAGS[@]}; i++)); do
		if [[ ${W2_FLAGS[i]} == --preview-domain ]]; then
			i=$((i + 1))
		else
			flags+=("${W2_FLAGS[i]}")
		fi
	done
	stop_controller
	start_container_controller "${flags[@]}" --preview-url https://w2.preview.example.com || return 1
	start_apps "$WS" app 'exec preview-app 3001' 3001 || return 1
	api -q POST "/v1/workspaces/$WS/ports" '{"port":3001}'
	assert_status 201 "expose 3001" || return 1
	host=$(j .host) tok=$(j .token)
	assert_match '^3001-[a-z2-7]{26}\.w2\.preview\.example\.com$' "$host" "the host under --preview-url's domain" || return 1
	assert_eq "https://$host/" "$(j .url)" "the URL: https, no port" || return 1
	# what the proxy sends: the browser's Host, X-Forwarded-For with the client's address
	pvat "$PV2" "$host" /headers -H "Authorization: Bearer $tok" -H 'X-Forwarded-For: 198.51.100.7' \
		-H 'X-Forwarded-Proto: http'
	assert_code 200 "the listener with the proxy's request" || return 1
	assert_match "^Host: $host:$PV2"$'\r'"?$" "$(grep -i '^host:' <<<"$PV_BODY")" "the Host the app got"
	assert_match "^X-Forwarded-For: 198\.51\.100\.7, 127\.0\.0\.1"$'\r'"?$" \
		"$(grep -i '^x-forwarded-for:' <<<"$PV_BODY")" "the app's X-Forwarded-For: client, proxy"
	assert_match "^X-Forwarded-Proto: https"$'\r'"?$" "$(grep -i '^x-forwarded-proto:' <<<"$PV_BODY")" \
		"the app's X-Forwarded-Proto (the proxy's http dropped)"
	pvat "$PV2" "$host" "/?station_preview_token=$tok"
	assert_code 302 "the token as a parameter" || return 1
	cookie=$(pv_header Set-Cookie)
	assert_match "^station_preview=$tok;" "$cookie" "the cookie" &&
		assert_match '; *Secure' "$cookie" "an https preview's cookie is Secure"
	pvat "$PV2" "${host%%.*}.w2.preview.localhost" /headers -H "Authorization: Bearer $tok"
	assert_code 404 "the label under the former domain"
}
run_test "--preview-url https://w2.preview.example.com: URLs say https without a port; behind a proxy the app gets the client's X-Forwarded-For and https, the cookie is Secure" t_preview_url
