#!/bin/bash
# The ports API (docs/api.md, "Previews"): POST …/ports answers 201 with the exposure's exact
# fields (a one-label host, a token shown once with its openUrl), the list shows it without the
# token and shows busybox httpd listening on 127.0.0.1:3000 inside a workspace without a
# network with its pid as the workspace sees it and its command; a second expose of the port,
# a host workspace and bad bodies are refused, each naming why; DELETE answers 204 then 404;
# another tenant's token gets 404 where the owner's succeeds; exposures survive a controller
# restart, leave audit rows, and go with their workspace.
. "$(dirname "$0")/container-lib.sh"
. "$(dirname "$0")/preview-lib.sh"

API_PORT=$(free_port)
API_URL=http://127.0.0.1:$API_PORT

container_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}
require_container_controller --preview-listen "tcp:127.0.0.1:$PREVIEW_PORT" \
	--listen "tcp:127.0.0.1:$API_PORT" --tenant-images 'busybox@*' --tenant-networks none

# tapi TOKEN METHOD PATH [BODY]: one request over TCP with TOKEN; sets STATUS and BODY.
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
	[[ $STATUS == 201 ]] || {
		diag "token create: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	printf -v "$1" '%s' "$(j .token)"
}

new_token TA '{"name":"a","scope":"tenant","tenant":"tenant-a"}' &&
	new_token TB '{"name":"b","scope":"tenant","tenant":"tenant-b"}' || {
	not_ok "tokens are made" "see the diagnostics above"
	exit 1
}

# WS: tenant A's workspace without a network, busybox httpd on its 127.0.0.1:3000.
tapi "$TA" POST /v1/workspaces "$(cws_body '{"network":"none"}')"
WS=$(j .id)
[[ $STATUS == 201 && -n $WS ]] || {
	not_ok "tenant A's workspace is made" "HTTP $STATUS $(_short "$BODY")"
	exit 1
}
WORKSPACES+=("$WS")
HOST='' TOKEN=''

test_expose() {
	start_apps "$WS" web 'mkdir -p /tmp/www && echo hello-preview >/tmp/www/index.html && exec httpd -f -p 127.0.0.1:3000 -h /tmp/www' 3000 || return 1
	api -q POST "/v1/workspaces/$WS/ports" '{"port":3000}'
	assert_status 201 "expose" || return 1
	EXPOSED=$BODY
	assert_eq "$(j '[keys[]] | sort | join(",")')" "access,createdAt,expiresAt,host,openUrl,port,token,url" "fields" || return 1
	assert_eq "$(j .port)" 3000 "port" || return 1
	assert_eq "$(j .access)" token "access by default" || return 1
	assert_match '^3000-[a-z2-7]{26}\.preview\.localhost$' "$(j .host)" "host: one label" || return 1
	assert_eq "$(j .url)" "http://$(j .host):$PREVIEW_PORT/" "url" || return 1
	assert_match '^sp_[A-Za-z0-9_-]{43}$' "$(j .token)" "token" || return 1
	assert_eq "$(j .openUrl)" "$(j .url)?station_preview_token=$(j .token)" "openUrl" || return 1
	local created expires
	created=$(date -d "$(j .createdAt)" +%s) expires=$(date -d "$(j .expiresAt)" +%s)
	assert_eq "$((expires - created))" 86400 "expires 24 h after creation" || return 1
	HOST=$(j .host) TOKEN=$(j .token)
}
run_test "expose: 201 with the exact fields, a one-label host, a token shown once" test_expose

test_through_listener() {
	pv "$HOST" / -H "Authorization: Bearer $TOKEN"
	assert_eq "$CODE" 200 "GET through the preview with the token" || return 1
	assert_eq "$PV_BODY" hello-preview "the app's page" || return 1
	pv "$HOST" /
	assert_eq "$CODE" 401 "without the token" || return 1
}
run_test "the exposed httpd answers through the preview listener (401 without the token)" test_through_listener

test_list() {
	api -q GET "/v1/workspaces/$WS/ports"
	assert_status 200 "list" || return 1
	assert_eq "$(j '.exposed | length')" 1 "one exposure" || return 1
	assert_eq "$(j '.exposed[0] | [keys[]] | sort | join(",")')" "access,createdAt,expiresAt,host,port,url" "listed without token" || return 1
	assert_eq "$(j '.exposed[0].host')" "$HOST" "its host" || return 1
	local l
	l=$(j '[.listening[] | select(.port == 3000)] | first')
	assert_eq "$(j .address "$l")" 127.0.0.1 "httpd's address" || return 1
	assert_eq "$(j .proto "$l")" tcp "proto" || return 1
	assert_eq "$(j .command "$l")" httpd "command" || return 1
	# the pid as the workspace sees it: the httpd process found from inside
	run_cmd "$WS" 'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = httpd ] && echo ${p#/proc/}; done' >/dev/null
	assert_eq "$(j .pid "$l")" "$(j '.stdout | rtrimstr("\n")')" "pid in the workspace" || return 1
}
run_test "list: the exposure without its token; httpd listening on 127.0.0.1:3000 with its pid and command" test_list

test_conflicts() {
	api -q POST "/v1/workspaces/$WS/ports" '{"port":3000,"access":"public"}'
	assert_status 409 "second expose" || return 1
	assert_contains DELETE "$(j .error.message)" "names DELETE" || return 1
	local body field
	for body in '{"port":0}:port' '{"port":65536}:port' '{"port":"80"}:port' '{}:port' \
		'{"port":80,"access":"open"}:access' '{"port":80,"expiresInMs":0}:expiresInMs' \
		'{"port":80,"expiresInMs":2592000001}:expiresInMs' '{"port":80,"x":1}:x' \
		'{"port":80.5}:port'; do
		field=${body##*:} body=${body%:*}
		api -q POST "/v1/workspaces/$WS/ports" "$body"
		assert_status 400 "$body" || return 1
		assert_eq "$(j .error.field)" "$field" "$body names its field" || return 1
	done
	new_ws HWS '{"adapter":"host"}' || return 1
	api -q POST "/v1/workspaces/$HWS/ports" '{"port":3000}'
	assert_status 409 "host workspace" || return 1
	assert_contains "network namespace" "$(j .error.message)" "says why" || return 1
}
run_test "refused: a port exposed already (409), bad bodies (400 naming the field), a host workspace (409)" test_conflicts

test_tenants() {
	tapi "$TB" POST "/v1/workspaces/$WS/ports" '{"port":3001}'
	assert_eq "$STATUS" 404 "B exposes A's port" || return 1
	tapi "$TB" GET "/v1/workspaces/$WS/ports"
	assert_eq "$STATUS" 404 "B lists A's ports" || return 1
	tapi "$TB" DELETE "/v1/workspaces/$WS/ports/3000"
	assert_eq "$STATUS" 404 "B revokes A's port" || return 1
	# positive control: A's own token on the same workspace
	tapi "$TA" POST "/v1/workspaces/$WS/ports" '{"port":3001,"access":"public","expiresInMs":60000}'
	assert_eq "$STATUS" 201 "A exposes its own port: $(_short "$BODY")" || return 1
	assert_eq "$(j 'has("token")')" false "a public one has no token" || return 1
	tapi "$TA" GET "/v1/workspaces/$WS/ports"
	assert_eq "$STATUS" 200 "A lists" || return 1
	assert_eq "$(j '[.exposed[].port] | join(",")')" 3000,3001 "both, by port" || return 1
}
run_test "another tenant's token gets 404 on expose, list and revoke; the owner's succeeds" test_tenants

test_restart() {
	stop_controller
	restart_controller || return 1
	api -q GET "/v1/workspaces/$WS/ports"
	assert_eq "$(j '[.exposed[].host] | first')" "$HOST" "kept across the restart" || return 1
	wait_for -t 30 ports_up "$WS" 3000 || return 1
	pv "$HOST" / -H "Authorization: Bearer $TOKEN"
	assert_eq "$CODE" 200 "the token still opens it" || return 1
}
run_test "exposures survive a controller restart (the same host, the same token)" test_restart

test_revoke() {
	api -q DELETE "/v1/workspaces/$WS/ports/3000"
	assert_status 204 "revoke" || return 1
	pv "$HOST" / -H "Authorization: Bearer $TOKEN"
	assert_eq "$CODE" 404 "its URL after" || return 1
	api -q DELETE "/v1/workspaces/$WS/ports/3000"
	assert_status 404 "again" || return 1
	api -q GET "/v1/audit?workspace=$WS"
	assert_eq "$(j '[.entries[] | select(.method == "POST" and (.path | endswith("/ports")))] | length >= 2')" true "audit: the exposes" || return 1
	assert_eq "$(j '[.entries[] | select(.method == "DELETE" and (.path | endswith("/ports/3000")) and .status == 204)] | length')" 1 "audit: the revoke" || return 1
}
run_test "DELETE: 204, the URL 404, a second DELETE 404; audit rows for expose and revoke" test_revoke

test_workspace_delete() {
	api -q POST "/v1/workspaces/$WS/ports" '{"port":3000}'
	assert_status 201 "expose again" || return 1
	HOST=$(j .host) TOKEN=$(j .token)
	api -q DELETE "/v1/workspaces/$WS"
	[[ $STATUS == 204 || $STATUS == 200 ]] || _fail "delete workspace: HTTP $STATUS"
	pv "$HOST" / -H "Authorization: Bearer $TOKEN"
	assert_eq "$CODE" 404 "its URL after the workspace is gone" || return 1
	stop_controller
	restart_controller || return 1
	assert_eq "$(sqlite3 "$ROOT/station.db" "SELECT count(*) FROM workspace_ports WHERE workspace_id = '$WS'" 2>/dev/null || echo "?")" 0 "no row left" || return 1
}
run_test "a workspace's deletion ends its exposures (URL 404, no row left)" test_workspace_delete

