#!/bin/bash
# HEAD on every GET operation of docs/openapi.yaml (docs/api.md, "HEAD"): never 405, no byte
# after the headers, the answer ends at once even where GET would wait (a long-poll's waitMs, an
# event stream) or upgrade; where GET ends, HEAD has its status, Content-Type and
# Content-Length. A read token's HEAD is served, its POST refused (403). A revoked token's 401
# says it was revoked; an unknown token's says neither revoked nor expired.
. "$(dirname "$0")/lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT

# A second worker, w2, that the controller forwards /v1/workers/w2/v1/... to.
W2=$TMP/w2
mkdir -p "$W2"
"$DAEMON" --root "$W2" --worker w2 --log-format text --network-range none \
	--adapters host --default-adapter host >>"$W2/controller.log" 2>&1 </dev/null &
W2_PID=$!
trap 'rc=$?; kill -TERM "$W2_PID" 2>/dev/null; wait "$W2_PID" 2>/dev/null; (exit $rc); _cleanup' EXIT
w2_ready() {
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --unix-socket "$W2/station.sock" \
		http://x/v1/ready) == 200 ]]
}
if ! wait_for -t 30 w2_ready; then
	not_ok "worker w2 starts" "$(tail -n 20 "$W2/controller.log")"
	exit 1
fi
require_controller --listen "tcp:127.0.0.1:$PORT" --workers "w2=unix:$W2/station.sock"
ADMIN=$(tr -d '\n' <"$ROOT/admin.token")

# tcp TOKEN METHOD PATH [BODY]: one request over TCP; sets STATUS, BODY and HEADERS.
tcp() {
	local token=$1 method=$2 path=$3 args=()
	[[ -n $token ]] && args+=(-H "Authorization: Bearer $token")
	if [[ $method == HEAD ]]; then
		args+=(--head)
	else
		args+=(-X "$method")
	fi
	if [[ $# -ge 4 ]]; then
		printf '%s' "$4" >"$TMP/tcp-request"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/tcp-request")
	fi
	STATUS=$(curl -sS --max-time 60 -o "$TMP/tcp-body" -D "$TMP/tcp-headers" -w '%{http_code}' \
		"${args[@]}" "$URL$path" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/tcp-body" 2>/dev/null)
	HEADERS=$(tr -d '\r' <"$TMP/tcp-headers" 2>/dev/null)
}

# mktoken VAR_ID VAR_SECRET BODY: creates a token with the admin token.
mktoken() {
	tcp "$ADMIN" POST /v1/tokens "$3"
	if [[ $STATUS != 201 ]]; then
		_fail "create token $3: HTTP $STATUS $(_short "$BODY")"
		return 1
	fi
	printf -v "$1" '%s' "$(j .id)"
	printf -v "$2" '%s' "$(j .token)"
}

t_walk() {
	local ws run done_run term digest tok secret ids out snap cid eid
	new_ws ws || return 1
	run_start "$ws" "$(json_cmd 'echo hi; exec sleep 600' '.timeoutMs = 600000')" || return 1
	run=$RUN
	run_start "$ws" "$(json_cmd 'echo done')" 30000 || return 1
	done_run=$RUN
	api -q POST "/v1/workspaces/$ws/services" '{"name":"web","command":"echo up; exec sleep 600"}'
	assert_status 201 "service" || return 1
	api -q POST "/v1/workspaces/$ws/terminals" '{"cols":80,"rows":24,"command":"sleep 600"}'
	assert_status 201 "terminal" || return 1
	term=$(j .id)
	api -q PUT "/v1/workspaces/$ws/secrets/gh" '{"value":"s3cret","host":"github.com"}'
	assert_status 201 "secret" || return 1
	printf 'hello\n' >"$TMP/hello"
	STATUS=$(curl -sS --max-time 30 --unix-socket "$SOCK" -X PUT --data-binary "@$TMP/hello" \
		-o /dev/null -w '%{http_code}' "http://station/v1/workspaces/$ws/files?path=hello.txt")
	assert_eq 201 "$STATUS" "file written" || return 1
	# A snapshot: GET /v1/snapshots/{id}, and its image for /v1/images/{digest}[/export].
	api -q POST "/v1/workspaces/$ws/snapshots" '{"name":"walk"}'
	assert_status 201 "snapshot" || return 1
	snap=$(j .id)
	api -q GET /v1/images
	digest=$(j '.images[0].digest // empty')
	[[ -n $digest ]] || digest=sha256:$(printf '%064d' 0)
	# A code context and one cell of it: GET …/contexts/{cid}[/executions[/{eid}[/output]]].
	api -q POST "/v1/workspaces/$ws/contexts" '{"language":"python"}'
	assert_status 201 "code context" || return 1
	cid=$(j .id)
	api -q POST "/v1/workspaces/$ws/contexts/$cid/execute?waitMs=60000" '{"code":"1+1"}'
	assert_status 201 "a cell" || return 1
	eid=$(j .id)
	mktoken tok secret '{"name":"walker","scope":"read"}' || return 1
	api -q GET /v1/openapi.json
	printf '%s' "$BODY" >"$TMP/openapi.json"
	ids=$(jq -nc --arg ws "$ws" --arg run "$run" --arg term "$term" --arg digest "$digest" \
		--arg tok "$tok" --arg snap "$snap" --arg cid "$cid" --arg eid "$eid" '
		{ id: $ws, run: $run, service: "web", secret: "gh", terminal: $term, snapshot: $snap,
		  cid: $cid, eid: $eid,
		  digest: $digest, token: $tok, worker: "w2", path: "workspaces",
		  query: { "/v1/workspaces/{id}/files": "path=hello.txt",
			   "/v1/workspaces/{id}/files/stat": "path=hello.txt",
			   "/v1/workspaces/{id}/files/list": "path=.",
			   "/v1/workspaces/{id}/files/watch": "path=." } }
		| .head_query = (.query + {
			   "/v1/workspaces/{id}/commands/{run}": "waitMs=60000",
			   "/v1/workspaces/{id}/contexts/{cid}/executions/{eid}": "waitMs=60000",
			   "/v1/workspaces/{id}/services/{name}/logs": "follow=1" })')
	printf '%s' "$ids" >"$TMP/ids.json"
	if ! python3 "$SRC/test/integration/head-walk.py" "$SOCK" "$TMP/openapi.json" "$TMP/ids.json" \
		>"$TMP/walk.out" 2>"$TMP/walk.err"; then
		_fail "head-walk failed: $(cat "$TMP/walk.err")"
		return 1
	fi
	assert_eq "$(jq '[.paths[] | select(.get)] | length' "$TMP/openapi.json")" \
		"$(wc -l <"$TMP/walk.out")" "GET operations walked" || return 1
	# Every HEAD: not 405, ended within the bound, nothing after the headers, not chunked.
	out=$(jq -r 'select(.head.status == 405 or .head.status == 0 or (.head.ended | not)
			or .head.rest != 0 or .head.headers["transfer-encoding"] != null)
		| "\(.target): HEAD \(.head.status), ended \(.head.ended), \(.head.rest) bytes after the headers, \(.head.headers)"' \
		"$TMP/walk.out")
	[[ -z $out ]] || _fail "HEAD answers that are not GET's without the body:"$'\n'"$out"
	# Where GET ends: the same status, Content-Type and Content-Length (or none).
	out=$(jq -r 'select(.get) | select(.head.status != .get.status
			or .head.headers["content-type"] != .get.headers["content-type"]
			or (.head.headers["content-length"] != null and
			    .head.headers["content-length"] != .get.headers["content-length"]))
		| "\(.target): HEAD \(.head.status) \(.head.headers), GET \(.get.status) \(.get.headers)"' \
		"$TMP/walk.out")
	[[ -z $out ]] || _fail "HEAD and GET differ:"$'\n'"$out"
	# The walk reached real objects: these answered 200 (a 404 everywhere would pass the above).
	out=$(jq -r 'select(.head.status != 200) | "\(.path) \(.head.status)"' "$TMP/walk.out" |
		grep -v -e '^/v1/images/{digest} 404$' \
			-e '^/v1/workspaces/{id}/terminals/{terminal}/attach 426$')
	[[ -z $out ]] || _fail "HEAD not 200 on an existing object:"$'\n'"$out"
	assert_eq 200 "$(jq -r 'select(.path == "/v1/workspaces/{id}/commands/{run}") | .head.status' \
		"$TMP/walk.out")" "HEAD of a running run with waitMs=60000" || return 1
	assert_eq "text/event-stream" "$(jq -r 'select(.path == "/v1/events") | .head.headers["content-type"]' \
		"$TMP/walk.out")" "HEAD of the event stream"
	api -q POST "/v1/workspaces/$ws/commands/$run/cancel"
	: "$done_run"
}
run_test "HEAD on every GET operation is GET's answer without the body, at once" t_walk

t_read_token_head() {
	local id secret ws
	mktoken id secret '{"name":"viewer","scope":"read"}' || return 1
	tcp "$secret" HEAD /v1/workspaces
	assert_eq 200 "$STATUS" "a read token's HEAD" || return 1
	tcp "$secret" GET /v1/workspaces
	assert_eq 200 "$STATUS" "its GET (positive control)" || return 1
	assert_match "content-length: ${#BODY}\$" "$(grep -i '^content-length:' <<<"$HEADERS" | tr 'A-Z' 'a-z')" \
		"GET's Content-Length is its body's"
	tcp "$secret" POST /v1/workspaces '{}'
	assert_eq 403 "$STATUS" "a read token's POST" || return 1
	assert_eq forbidden "$(j .error.code)" "code"
	tcp "$ADMIN" POST /v1/workspaces '{}'
	assert_eq 201 "$STATUS" "the admin's POST (positive control)" || return 1
	ws=$(j .id)
	WORKSPACES+=("$ws")
}
run_test "a read token may HEAD where it may GET; its POST stays 403" t_read_token_head

t_revoked_says_revoked() {
	local id secret
	mktoken id secret '{"name":"short-lived","scope":"read"}' || return 1
	tcp "$secret" GET /v1/worker
	assert_eq 200 "$STATUS" "the token works before" || return 1
	tcp "$ADMIN" DELETE "/v1/tokens/$id"
	assert_eq 200 "$STATUS" "revoke" || return 1
	tcp "$secret" GET /v1/worker
	assert_eq 401 "$STATUS" "the revoked token" || return 1
	assert_eq unauthorized "$(j .error.code)" "code"
	assert_eq "the bearer token was revoked" "$(j .error.message)" "its message"
	assert_eq "www-authenticate: bearer" "$(grep -i '^www-authenticate:' <<<"$HEADERS" | tr 'A-Z' 'a-z')" \
		"WWW-Authenticate"
	# positive control: a token never made is refused as not valid, not as revoked
	tcp "${secret}x" GET /v1/worker
	assert_eq 401 "$STATUS" "an unknown token" || return 1
	assert_eq "a valid bearer token is required" "$(j .error.message)" "its message"
	tcp "" GET /v1/worker
	assert_eq 401 "$STATUS" "no token" || return 1
	assert_contains "a bearer token is required" "$(j .error.message)" "its message"
}
run_test "a revoked token's 401 says it was revoked; an unknown one's does not" t_revoked_says_revoked
