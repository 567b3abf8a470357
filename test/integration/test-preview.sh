#!/bin/bash
# run-all: slow: 1 GiB down and up through the preview listener, 500 connections at once
# Preview URLs end to end (docs/api.md, "Previews"): a container workspace without a network
# runs busybox httpd and preview-app (test/helpers/preview-app.c) on its own 127.0.0.1, and
# their exposed ports answer through the controller's preview listener
# (--preview-listen tcp:127.0.0.1:PORT), each request with the Host a browser sends
# (<label>.preview.localhost). Access: a bearer token, or ?station_preview_token= once, which
# redirects and sets a host-only cookie; the app never sees the token, the cookie or the
# parameter; a token opens its own port only; a missing or wrong one is 401; an expired, deleted
# or unknown host is 404; a public exposure needs none. X-Forwarded-For/-Proto/-Host are the
# listener's: a client's X-Forwarded-For is kept in front, the peer the listener saw is the last
# element, and a client's X-Forwarded-Host/-Proto never arrive. WebSocket echo and SSE pass
# through as they come; 1 GiB down and up arrive intact; 500 connections at once are each served
# or refused with a 503, none hung or reset; another tenant can neither expose the workspace's
# ports nor open a preview with its API token. Hostile requests: test/security/
# test-preview-smuggling.sh.
. "$(dirname "$0")/container-lib.sh"
. "$(dirname "$0")/preview-lib.sh"

API_PORT=$(free_port)
API_URL=http://127.0.0.1:$API_PORT

preview_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}
require_container_controller --preview-listen "tcp:127.0.0.1:$PREVIEW_PORT" \
	--listen "tcp:127.0.0.1:$API_PORT" --tenant-images 'busybox@*' --tenant-networks none

GIB=$((1 << 30))
WS=
H3000='' T3000='' H3001='' T3001='' HPUB=''

t_setup() {
	new_cws WS '{"network":"none","pidsLimit":4096}' || return 1
	run_cmd "$WS" 'mkdir -p www && echo preview-httpd-ok >www/index.html' >/dev/null
	assert_eq 0 "$(j .exitCode)" "write httpd's page" || return 1
	start_apps "$WS" httpd 'httpd -f -p 127.0.0.1:3000 -h "$PWD/www"' 3000 || return 1
	start_apps "$WS" apps 'preview-app 3001 & preview-app 3002 & preview-app 3003 &
		preview-app 3004 & wait' 3001 3002 3003 3004 || return 1
	expose "$WS" 3000 || return 1
	H3000=$PV_HOST T3000=$PV_TOKEN
	expose "$WS" 3001 || return 1
	H3001=$PV_HOST T3001=$PV_TOKEN
	expose "$WS" 3002 '{"access":"public"}' || return 1
	HPUB=$PV_HOST
	assert_match '^.{16,}$' "$T3000" "a token-access exposure's token"
	assert_eq "" "$PV_TOKEN" "a public exposure's token (none)"
	assert_ne "$H3000" "$H3001" "hosts of two ports"
}
run_test "setup: httpd and preview-app in a none workspace, ports 3000, 3001 (token) and 3002 (public) exposed" t_setup
[[ -n $H3001 && -n $HPUB ]] || exit 1

t_httpd() {
	pv "$H3000" / -H "Authorization: Bearer $T3000"
	assert_code 200 "httpd with its bearer token" || return 1
	assert_eq preview-httpd-ok "$PV_BODY" "httpd's page"
	pv "$H3000" /
	assert_code 401 "httpd without a token"
	assert_contains token "$PV_BODY" "the 401 page says a token is needed"
	assert_match '^Bearer' "$(pv_header WWW-Authenticate)" "the 401's WWW-Authenticate"
}
run_test "busybox httpd on the workspace's 127.0.0.1:3000 answers through its URL with the bearer token (401 without)" t_httpd

t_token_param() {
	local jar=$TMP/jar loc cookie
	rm -f "$jar"
	pv "$H3001" "/headers?a=1&station_preview_token=$T3001&b=2" -c "$jar"
	assert_code 302 "the token as a parameter" || return 1
	loc=$(pv_header Location)
	assert_eq "/headers?a=1&b=2" "$loc" "the redirect's Location (the parameter gone)"
	cookie=$(pv_header Set-Cookie)
	assert_match "^station_preview=$T3001(;|$)" "$cookie" "Set-Cookie"
	assert_match '; *HttpOnly' "$cookie" "the cookie is HttpOnly"
	assert_match '; *SameSite=Lax' "$cookie" "the cookie is SameSite=Lax"
	[[ $cookie != *Domain=* ]] || _fail "the cookie names a Domain (want host-only): $cookie"
	[[ $cookie != *Secure* ]] || _fail "a Secure cookie on an http URL: $cookie"
	# a target of two slashes would make the Location another site's ("//host/…"): one slash
	pv "$H3001" "//evil.example/x?station_preview_token=$T3001"
	assert_code 302 "a // target with the token" || return 1
	assert_eq "/evil.example/x" "$(pv_header Location)" "the redirect stays on the preview's host"
	# following the redirect with the cookie jar, plus a cookie of the app's own
	pv "$H3001" "$loc" -b "$jar" -H 'Cookie: app=kept'
	assert_code 200 "the redirect's target with the cookie" || return 1
	assert_match '^GET /headers\?a=1&b=2 HTTP/1.1' "$PV_BODY" "the request line the app got"
	assert_contains 'app=kept' "$PV_BODY" "the app's own cookie arrives"
	[[ $PV_BODY != *station_preview* && $PV_BODY != *"$T3001"* ]] ||
		_fail "the app saw the station's cookie or token: $PV_BODY"
	# curl -L does it all in one go
	rm -f "$jar"
	pv "$H3001" "/headers?station_preview_token=$T3001" -L -c "$jar" -b "$jar"
	assert_code 200 "curl -L through the redirect"
	assert_match '^GET /headers HTTP/1.1' "$PV_BODY" "the request line after -L"
	# control: without the cookie the same URL is 401
	pv "$H3001" /headers
	assert_code 401 "the redirect's target without the cookie"
}
run_test "?station_preview_token= redirects without it and sets a host-only HttpOnly SameSite=Lax cookie that opens the preview; the app sees neither" t_token_param

t_app_sees_no_token() {
	pv "$H3001" /headers -H "Authorization: Bearer $T3001" -H 'X-App: 1'
	assert_code 200 "/headers with the bearer token" || return 1
	assert_contains 'X-App: 1' "$PV_BODY" "the client's own header arrives"
	[[ $PV_BODY != *"$T3001"* ]] || _fail "the app saw the token: $PV_BODY"
	grep -qi '^authorization:' <<<"$PV_BODY" && _fail "the app saw an Authorization header: $PV_BODY"
	assert_match "^Host: $H3001:$PREVIEW_PORT"$'\r'"?$" "$(grep -i '^host:' <<<"$PV_BODY")" \
		"the Host the app got"
	return 0
}
run_test "the app never sees the bearer token; the client's own headers and the Host arrive" t_app_sees_no_token

t_token_per_port() {
	local jar=$TMP/jar3000
	pv "$H3001" /headers -H "Authorization: Bearer $T3000"
	assert_code 401 "port 3000's token on port 3001's host"
	pv "$H3001" "/headers?station_preview_token=$T3000"
	assert_code 401 "port 3000's token as 3001's parameter"
	# 3000's cookie replayed against 3001
	rm -f "$jar"
	pv "$H3000" "/?station_preview_token=$T3000" -c "$jar"
	assert_code 302 "3000's parameter on its own host"
	pv "$H3001" /headers -H "Cookie: station_preview=$T3000"
	assert_code 401 "port 3000's cookie value on port 3001's host"
	# controls: each token on its own host
	pv "$H3001" /headers -H "Authorization: Bearer $T3001"
	assert_code 200 "3001's own token"
	pv "$H3000" / -H "Cookie: station_preview=$T3000"
	assert_code 200 "3000's cookie on its own host"
}
run_test "a token of port 3000 opens nothing on port 3001's host (bearer, parameter, cookie); 3001's own does" t_token_per_port

t_refusals() {
	pv "$H3001" /headers
	assert_code 401 "no token"
	pv "$H3001" /headers -H "Authorization: Bearer ${T3001}x"
	assert_code 401 "a wrong token (one character more)"
	pv "$H3001" /headers -H "Authorization: Bearer ${T3001:0:${#T3001}-1}"
	assert_code 401 "a wrong token (one character less)"
	pv "$H3001" /headers -H "Authorization: Basic $(printf 'x:%s' "$T3001" | base64 -w0)"
	assert_code 401 "the token in Basic"
	pv "nosuchlabel.preview.localhost" /headers -H "Authorization: Bearer $T3001"
	assert_code 404 "an unknown label with a valid token"
	pv "preview.localhost" / -H "Authorization: Bearer $T3001"
	assert_code 404 "the bare preview domain"
	pv "x.$H3001" /headers -H "Authorization: Bearer $T3001"
	assert_code 404 "a label in front of the exposure's host"
	# control
	pv "$H3001" /headers -H "Authorization: Bearer $T3001"
	assert_code 200 "the right token"
}
run_test "a missing or wrong token is 401, an unknown host 404 (control: the right token is 200)" t_refusals

ws_port_gone() {
	pv "$1" /headers -H "Authorization: Bearer $2"
	[[ $CODE == 404 ]]
}

t_expired() {
	local h t
	expose "$WS" 3003 '{"expiresInMs":4000}' || return 1
	h=$PV_HOST t=$PV_TOKEN
	pv "$h" /headers -H "Authorization: Bearer $t"
	assert_code 200 "an exposure of 4 s, at once"
	wait_for -t 30 ws_port_gone "$h" "$t" || _fail "still HTTP $CODE 30 s after a 4 s expiry"
	pv "$h" /headers
	assert_code 404 "the expired exposure without its token"
	api -q GET "/v1/workspaces/$WS/ports"
	assert_status 200 "list the ports"
	assert_eq "" "$(j '.exposed[] | select(.port == 3003) | .port')" "the expired port in the list"
}
run_test "an expired exposure is 404 (its token too), and unlisted" t_expired

t_deleted() {
	local h t
	expose "$WS" 3004 || return 1
	h=$PV_HOST t=$PV_TOKEN
	H3004_OLD=$h T3004_OLD=$t
	pv "$h" /headers -H "Authorization: Bearer $t"
	assert_code 200 "before DELETE"
	api -q DELETE "/v1/workspaces/$WS/ports/3004"
	assert_status 204 "DELETE the port"
	pv "$h" /headers -H "Authorization: Bearer $t"
	assert_code 404 "after DELETE, with its token"
	pv "$H3001" /headers -H "Authorization: Bearer $T3001"
	assert_code 200 "another port of the workspace after the DELETE"
}
T3004_OLD=''
H3004_OLD=''
run_test "a deleted exposure is 404 at once, its token too; the workspace's other ports still answer" t_deleted

ws_hold_open() {
	grep -q '^open=1' "$TMP/hold.out"
}

ws_hold_ended() {
	grep -q '^ended=' "$TMP/hold.out"
}

t_revoke_open() {
	local h_old=$1 t_old=$2 h t pid
	expose "$WS" 3004 || return 1
	h=$PV_HOST t=$PV_TOKEN
	assert_ne "$h_old" "$h" "the host of a port exposed again"
	pv "$h" /headers -H "Authorization: Bearer $t_old"
	assert_code 401 "the old exposure's token on the new one"
	pv "$h_old" /headers -H "Authorization: Bearer $t"
	assert_code 404 "the old host with the new token"
	python3 "$PREVIEW_CLIENT" ws-hold "$PREVIEW_PORT" "$h" 60 --token "$t" >"$TMP/hold.out" 2>&1 &
	pid=$!
	wait_for -t 30 ws_hold_open || {
		_fail "the WebSocket did not open: $(cat "$TMP/hold.out")"
		kill "$pid"
		return 1
	}
	# control: the WebSocket stays open while the exposure lives
	pv "$h" /headers -H "Authorization: Bearer $t"
	assert_code 200 "a request beside the open WebSocket"
	ws_hold_ended && _fail "the WebSocket ended before the DELETE: $(cat "$TMP/hold.out")"
	api -q DELETE "/v1/workspaces/$WS/ports/3004"
	assert_status 204 "DELETE the port"
	wait_for -t 10 ws_hold_ended || _fail "the WebSocket still open 10 s after the DELETE"
	wait "$pid"
	note "after the DELETE: $(grep '^ended=' "$TMP/hold.out")"
	assert_match '^ended=(eof|reset|close-frame)' "$(grep '^ended=' "$TMP/hold.out")" "how it ended"
}

run_test "a port exposed again gets a new host and token (the old ones open nothing); its DELETE ends an open WebSocket at once" \
	t_revoke_open "$H3004_OLD" "$T3004_OLD"

t_public() {
	pv "$HPUB" /headers
	assert_code 200 "a public exposure without a token" || return 1
	assert_match '^GET /headers HTTP/1.1' "$PV_BODY" "the app's echo"
	pv "$HPUB" /headers -H "Authorization: Bearer app-own"
	assert_code 200 "a public exposure with an Authorization of the app's own"
	assert_contains 'Authorization: Bearer app-own' "$PV_BODY" \
		"a public exposure passes the app's own Authorization"
	# control: the token exposure beside it still wants its token
	pv "$H3001" /headers
	assert_code 401 "the token exposure without a token"
}
run_test "a public exposure needs no token (and leaves the app's own Authorization alone)" t_public

t_forwarded() {
	local xff
	pv "$H3001" /headers -H "Authorization: Bearer $T3001"
	assert_code 200 "/headers" || return 1
	assert_eq "127.0.0.1" "$(awk -F': ' 'tolower($1) == "x-forwarded-for" {sub(/\r$/, "", $2); print $2}' <<<"$PV_BODY")" \
		"X-Forwarded-For without a client's"
	assert_eq "http" "$(awk -F': ' 'tolower($1) == "x-forwarded-proto" {sub(/\r$/, "", $2); print $2}' <<<"$PV_BODY")" \
		"X-Forwarded-Proto"
	assert_eq "$H3001:$PREVIEW_PORT" "$(awk -F': ' 'tolower($1) == "x-forwarded-host" {sub(/\r$/, "", $2); print $2}' <<<"$PV_BODY")" \
		"X-Forwarded-Host"
	# a client's own: its X-Forwarded-For kept in front of the peer, one header line; its
	# -Host and -Proto replaced
	pv "$H3001" /headers -H "Authorization: Bearer $T3001" -H 'X-Forwarded-For: 6.6.6.6' \
		-H 'X-Forwarded-Host: evil.example' -H 'X-Forwarded-Proto: https' -H 'X-Real-IP: 6.6.6.6' \
		-H 'Forwarded: for=6.6.6.6'
	assert_code 200 "/headers with forged forwarding headers" || return 1
	xff=$(awk -F': ' 'tolower($1) == "x-forwarded-for" {sub(/\r$/, "", $2); print $2}' <<<"$PV_BODY")
	assert_eq "6.6.6.6, 127.0.0.1" "$xff" "X-Forwarded-For after a client's (one line, the peer last)"
	assert_eq "$H3001:$PREVIEW_PORT" "$(awk -F': ' 'tolower($1) == "x-forwarded-host" {sub(/\r$/, "", $2); print $2}' <<<"$PV_BODY")" \
		"X-Forwarded-Host after a client's"
	assert_eq "http" "$(awk -F': ' 'tolower($1) == "x-forwarded-proto" {sub(/\r$/, "", $2); print $2}' <<<"$PV_BODY")" \
		"X-Forwarded-Proto after a client's"
	[[ $PV_BODY != *evil.example* && $PV_BODY != *X-Real-IP* && $PV_BODY != *"Forwarded: for"* ]] ||
		_fail "a client's forwarding header reached the app: $PV_BODY"
	return 0
}
run_test "X-Forwarded-For (a client's kept in front, the peer last), -Proto and -Host set by the listener; a client's -Host, -Proto, Forwarded, X-Real-IP never arrive" t_forwarded

t_websocket() {
	pclient ws "$PREVIEW_PORT" "$H3001" --token "$T3001"
	printf '%s\n' "$PC_OUT" | sed 's/^/#   /'
	assert_eq 0 "$PC_RC" "the WebSocket exchange" || return 1
	assert_eq 101 "$(pcval status)" "the upgrade"
	# control: the upgrade without the token is refused before the app
	pclient ws "$PREVIEW_PORT" "$H3001"
	assert_eq 401 "$(pcval status)" "the upgrade without a token"
}
run_test "a WebSocket through the listener: handshake, text, 70000-byte binary, fragments, ping and close echoed" t_websocket

t_sse() {
	pclient sse "$PREVIEW_PORT" "$H3001" 5 --token "$T3001"
	printf '%s\n' "$PC_OUT" | sed 's/^/#   /'
	assert_eq 0 "$PC_RC" "the SSE stream" || return 1
	assert_eq 5 "$(pcval events)" "events"
	# the app writes them 100 ms apart: arriving as written spreads them over >= 400 ms;
	# held back to the end they would arrive together
	assert_le 300 "$(pcval spread_ms)" "ms from the first event to the last"
}
run_test "an SSE stream arrives event by event (5 events 100 ms apart, not together at the end)" t_sse

t_download() {
	pclient download "$PREVIEW_PORT" "$H3001" "$GIB" --token "$T3001"
	note "download: $(tr '\n' ' ' <<<"$PC_OUT")"
	assert_eq 0 "$PC_RC" "1 GiB download" || return 1
	assert_eq "$GIB" "$(pcval bytes)" "bytes received"
	pclient download "$PREVIEW_PORT" "$H3001" 5000001 --chunked --token "$T3001"
	assert_eq 0 "$PC_RC" "a chunked download: $PC_OUT"
	assert_eq chunked "$(pcval framing)" "the chunked download's framing"
}
run_test "1 GiB downloads through the listener intact (every byte compared; a chunked one too)" t_download

t_upload() {
	pclient upload "$PREVIEW_PORT" "$H3001" "$GIB" --token "$T3001"
	note "upload (Content-Length): $PC_OUT"
	assert_eq 0 "$PC_RC" "1 GiB upload with Content-Length"
	pclient upload "$PREVIEW_PORT" "$H3001" "$GIB" --chunked --token "$T3001"
	note "upload (chunked): $PC_OUT"
	assert_eq 0 "$PC_RC" "1 GiB upload chunked"
}
run_test "1 GiB uploads through the listener intact, with Content-Length and chunked (count and CRC-32 as the app read them)" t_upload

t_many() {
	pclient flood "$PREVIEW_PORT" "$H3001" 500 --token "$T3001"
	note "500 at once: $PC_OUT"
	assert_eq 0 "$(pcval bad)" "connections neither served nor refused with a 503" || return 1
	assert_eq 500 "$(($(pcval served) + $(pcval refused)))" "served + refused"
	assert_le 1 "$(pcval served)" "served"
	# control: the listener serves afterwards (no slot left taken)
	pv "$H3001" /headers -H "Authorization: Bearer $T3001"
	assert_code 200 "a request after the 500"
	pclient flood "$PREVIEW_PORT" "$H3001" 100 --token "$T3001"
	assert_eq 100 "$(pcval served)" "100 at once after the 500: $PC_OUT"
}
run_test "500 connections at once: each served (200, the right body) or refused with a 503; none hung or reset" t_many

# Tenants: B's workspace runs the app; A's API token neither exposes B's port nor opens it.
tapi() {
	local token=$1 method=$2 path=$3 args
	args=(-sS --max-time 90 -X "$method" -o "$TMP/tbody" -w '%{http_code}'
		-H "Authorization: Bearer $token")
	if [[ $# -ge 4 ]]; then
		printf '%s' "$4" >"$TMP/treq"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/treq")
	fi
	: >"$TMP/tbody"
	STATUS=$(curl "${args[@]}" "$API_URL$path" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/tbody")
}

new_token() {
	api -q POST /v1/tokens "$2"
	assert_status 201 "token create" || return 1
	printf -v "$1" '%s' "$(j .token)"
}

t_tenants() {
	local ta tb wb hb tokb
	new_token ta '{"name":"a","scope":"tenant","tenant":"tenant-a"}' || return 1
	new_token tb '{"name":"b","scope":"tenant","tenant":"tenant-b"}' || return 1
	tapi "$tb" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" \
		'{adapter: "container", image: $i, network: "none"}')"
	assert_status 201 "tenant B creates a workspace" || return 1
	wb=$(j .id)
	WORKSPACES+=("$wb")
	tapi "$tb" POST "/v1/workspaces/$wb/services" '{"name":"app","command":"preview-app 3000"}'
	assert_status 201 "tenant B starts the app" || return 1
	wait_for -t 30 ports_up "$wb" 3000 || {
		_fail "the app does not accept in B's workspace"
		return 1
	}
	# A on B's workspace: as if it did not exist
	tapi "$ta" POST "/v1/workspaces/$wb/ports" '{"port":3000}'
	assert_status 404 "tenant A exposes B's port"
	tapi "$ta" GET "/v1/workspaces/$wb/ports"
	assert_status 404 "tenant A lists B's ports"
	# control: B exposes its own
	tapi "$tb" POST "/v1/workspaces/$wb/ports" '{"port":3000}'
	assert_status 201 "tenant B exposes its own port" || return 1
	hb=$(j .url)
	hb=${hb#*://}
	hb=${hb%%/*}
	hb=${hb%:*}
	tokb=$(j .token)
	tapi "$ta" DELETE "/v1/workspaces/$wb/ports/3000"
	assert_status 404 "tenant A deletes B's exposure"
	# API tokens are not preview tokens, B's own included
	pv "$hb" /headers -H "Authorization: Bearer $ta"
	assert_code 401 "tenant A's API token on B's preview"
	pv "$hb" /headers -H "Authorization: Bearer $tb"
	assert_code 401 "tenant B's API token on its own preview"
	pv "$hb" "/headers?station_preview_token=$ta"
	assert_code 401 "tenant A's API token as the parameter"
	# control: the exposure's token
	pv "$hb" /headers -H "Authorization: Bearer $tokb"
	assert_code 200 "B's preview token"
	# and A's token on the operator's workspace too
	tapi "$ta" POST "/v1/workspaces/$WS/ports" '{"port":3005}'
	assert_status 404 "tenant A exposes the operator's port"
	# the workspace's deletion ends its exposures
	tapi "$tb" DELETE "/v1/workspaces/$wb"
	assert_status 200 "tenant B deletes its workspace"
	pv "$hb" /headers -H "Authorization: Bearer $tokb"
	assert_code 404 "B's preview after its workspace's deletion"
}
run_test "another tenant's API token cannot expose, list or delete a workspace's port (404) and is no preview token (401); the owner's works" t_tenants
