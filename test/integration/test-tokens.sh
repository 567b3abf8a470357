#!/bin/bash
# Scoped tokens over TCP (docs/api.md, "Tokens", "Audit"): each scope created and used; the
# secret never shown again nor stored (not in the SQLite file); a read token only GETs; an
# expired token is 401; a revoked one is 401 at once and its open event stream and output
# WebSocket are closed (the admin's stay open); only admin manages tokens; the audit log says
# who did what with which outcome; --admin-token-file refuses bad files and shares one token
# between two controllers; each bad field of POST /v1/tokens is 400 naming it.
. "$(dirname "$0")/lib.sh"

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
URL=http://127.0.0.1:$PORT

require_controller --listen "tcp:127.0.0.1:$PORT" --mcp
ADMIN=$(tr -d '\n' <"$ROOT/admin.token")

# tcp TOKEN METHOD PATH [BODY]: one request over TCP; sets STATUS and BODY.
tcp() {
	local token=$1 method=$2 path=$3 args=()
	[[ -n $token ]] && args+=(-H "Authorization: Bearer $token")
	if [[ $# -ge 4 ]]; then
		printf '%s' "$4" >"$TMP/tcp-request"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/tcp-request")
	fi
	STATUS=$(curl -sS --max-time 60 -X "$method" -o "$TMP/tcp-body" -w '%{http_code}' \
		"${args[@]}" "$URL$path" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/tcp-body" 2>/dev/null)
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

new_ws WS || exit 1

t_each_scope() {
	local scope id secret body
	for scope in admin tenant read; do
		body=$(jq -nc --arg s "$scope" '{name: ("ci-" + $s), scope: $s}')
		[[ $scope == tenant ]] && body=$(jq -c '.tenant = "acme" | .limits = {memoryMb: 512, workspaces: 2, cpus: 1.5}' <<<"$body")
		tcp "$ADMIN" POST /v1/tokens "$body"
		assert_status 201 "create a $scope token" || return 1
		assert_match '^tok-[a-z2-7]{26}$' "$(j .id)" "$scope token id"
		assert_match '^sst_[0-9a-f]{64}$' "$(j .token)" "$scope token secret"
		assert_eq "$scope" "$(j .scope)" "scope"
		id=$(j .id)
		secret=$(j .token)
		tcp "$secret" GET /v1/workspaces
		assert_status 200 "the $scope token lists workspaces"
		tcp "$secret" GET "/v1/workspaces/$WS"
		if [[ $scope == tenant ]]; then # the operator's workspace is no tenant's
			assert_status 404 "the $scope token does not see the operator's workspace"
		else
			assert_status 200 "the $scope token gets a workspace"
		fi
		tcp "$ADMIN" GET "/v1/tokens/$id"
		assert_eq "$scope" "$(j .scope)" "GET shows the scope"
		if [[ $scope == tenant ]]; then
			assert_eq '{"cpus":1.5,"memoryMb":512,"pidsLimit":0,"workspaces":2} acme' \
				"$(j '.limits') $(j .tenant)" "tenant limits and tenant"
		fi
		assert_ne null "$(j .lastUsedAt)" "lastUsedAt set once used"
	done
	# An admin-scoped token can do what admin does.
	mktoken id secret '{"name":"ops","scope":"admin"}' || return 1
	tcp "$secret" GET /v1/tokens
	assert_status 200 "an admin-scoped token manages tokens"
}

t_secret_never_again() {
	local id secret
	mktoken id secret '{"name":"once","scope":"read"}' || return 1
	tcp "$ADMIN" GET /v1/tokens
	assert_status 200 "list tokens" || return 1
	assert_eq 0 "$(grep -c "$secret" <<<"$BODY")" "the list has no secret"
	assert_eq 0 "$(grep -c 'sst_' <<<"$BODY")" "the list has no secret at all"
	assert_eq 0 "$(j '[.tokens[] | select(has("token") or has("hash"))] | length')" "no token or hash field"
	tcp "$ADMIN" GET "/v1/tokens/$id"
	assert_eq false "$(j 'has("token") or has("hash")')" "GET one: no secret nor hash"
	# Neither the store nor its journal holds the secret; it does hold the hash.
	local hash
	hash=$(printf '%s' "$secret" | sha256sum | cut -d' ' -f1)
	assert_eq 0 "$(cat "$ROOT"/station.db* | grep -c -a "$secret")" "secret not in the SQLite files"
	assert_ne 0 "$(cat "$ROOT"/station.db* | grep -c -a "$hash")" "its hash is (positive control)"
}

t_read_only_reads() {
	local id secret
	mktoken id secret '{"name":"viewer","scope":"read"}' || return 1
	tcp "$secret" GET "/v1/workspaces/$WS"
	assert_status 200 "read: GET a workspace"
	tcp "$secret" GET /v1/worker
	assert_status 200 "read: GET the worker"
	tcp "$secret" POST /v1/workspaces '{}'
	assert_status 403 "read: POST a workspace"
	assert_eq forbidden "$(j .error.code)" "code"
	assert_contains "read token" "$(j .error.message)" "the message names the scope"
	tcp "$secret" POST "/v1/workspaces/$WS/commands" '{"command":"true"}'
	assert_status 403 "read: POST a command"
	tcp "$secret" DELETE "/v1/workspaces/$WS"
	assert_status 403 "read: DELETE a workspace"
	tcp "$secret" PUT "/v1/workspaces/$WS/files?path=x" 'data'
	assert_status 403 "read: PUT a file"
	tcp "$secret" GET "/v1/workspaces/$WS/terminals/t-none/attach"
	assert_status 403 "read: a terminal attach"
	assert_contains "terminal" "$(j .error.message)" "the message says why"
	# positive controls: admin passes the same checks
	tcp "$ADMIN" POST "/v1/workspaces/$WS/commands?waitMs=60000" '{"command":"echo hi"}'
	assert_status 201 "admin: POST a command"
	tcp "$ADMIN" GET "/v1/workspaces/$WS/terminals/t-none/attach"
	assert_ne 403 "$STATUS" "admin: the attach is not refused by scope"
	api -q GET /v1/workspaces
	assert_status 200 "the unix socket is admin"
	assert_eq 600 "$(stat -c %a "$SOCK")" "socket mode"
}

expired() {
	tcp "$1" GET /v1/worker
	[[ $STATUS == 401 ]]
}

t_expired() {
	local id secret at
	at=$(date -u -d '+3 seconds' +%Y-%m-%dT%H:%M:%SZ)
	mktoken id secret "{\"name\":\"short\",\"scope\":\"read\",\"expiresAt\":\"$at\"}" || return 1
	wait_for -t 60 expired "$secret" || {
		_fail "the token did not expire: $STATUS"
		return 1
	}
	assert_contains "expired" "$(j .error.message)" "401 says expired"
	tcp "$ADMIN" GET "/v1/tokens/$id"
	assert_eq true "$(j .expired)" "listed as expired"
	tcp "$ADMIN" GET /v1/worker
	assert_status 200 "the admin token still works (positive control)"
}

sse_open() {
	grep -q '^HTTP/1.1 200' "$1" 2>/dev/null
}

gone() {
	! kill -0 "$1" 2>/dev/null
}

t_revoke_closes_streams() {
	local id secret run sse_pid ws_pid admin_pid
	mktoken id secret '{"name":"watcher","scope":"read"}' || return 1
	run_start "$WS" "$(json_cmd 'echo started; exec sleep 600' '.timeoutMs = 600000')" || return 1
	local path="/v1/workspaces/$WS/commands/$RUN/output"
	curl -sS -N --max-time 300 -D "$TMP/sse-h" -H "Authorization: Bearer $secret" \
		"$URL/v1/events" >"$TMP/sse-out" 2>/dev/null &
	sse_pid=$!
	curl -sS -N --max-time 300 -D "$TMP/admin-h" -H "Authorization: Bearer $ADMIN" \
		"$URL/v1/events" >/dev/null 2>&1 &
	admin_pid=$!
	python3 "$SRC/test/integration/ws-close-client.py" "$PORT" "$path" "$secret" "$TMP/ws-open" \
		>"$TMP/ws-out" 2>"$TMP/ws-err" &
	ws_pid=$!
	wait_for -t 30 sse_open "$TMP/sse-h" || _fail "the SSE stream did not open"
	wait_for -t 30 sse_open "$TMP/admin-h" || _fail "the admin's SSE stream did not open"
	wait_for -t 30 test -e "$TMP/ws-open" || _fail "the WebSocket did not open: $(cat "$TMP/ws-out" "$TMP/ws-err")"
	tcp "$secret" GET /v1/worker
	assert_status 200 "the token works before" || return 1

	tcp "$ADMIN" DELETE "/v1/tokens/$id"
	assert_status 200 "revoke" || return 1
	assert_ne null "$(j .revokedAt)" "revokedAt set"
	tcp "$secret" GET /v1/worker
	assert_status 401 "the next request is 401"
	wait_for -t 30 gone "$sse_pid" || _fail "the revoked token's SSE stream is still open"
	wait_for -t 30 gone "$ws_pid" || _fail "the revoked token's WebSocket is still open"
	wait "$ws_pid"
	assert_eq 1008 "$(jq -r .close <"$TMP/ws-out")" "the WebSocket closed with 1008"
	assert_contains "revoked" "$(jq -r .reason <"$TMP/ws-out")" "its reason"
	if gone "$admin_pid"; then
		_fail "the admin's SSE stream was closed too"
	fi
	kill "$admin_pid" 2>/dev/null
	wait "$admin_pid" 2>/dev/null
	tcp "$ADMIN" DELETE "/v1/tokens/admin"
	assert_status 400 "the admin token cannot be revoked"
	assert_contains "admin-token-file" "$(j .error.message)" "the message says how"
	tcp "$ADMIN" DELETE "/v1/tokens/tok-nosuchtoken"
	assert_status 404 "an unknown token"
	api -q POST "/v1/workspaces/$WS/commands/$RUN/cancel"
}

t_tenant_cannot_manage() {
	local id secret
	mktoken id secret '{"name":"acme-ci","scope":"tenant","tenant":"acme"}' || return 1
	tcp "$secret" GET /v1/tokens
	assert_status 403 "tenant: list tokens"
	assert_contains "tenant token" "$(j .error.message)" "the message names the scope"
	tcp "$secret" POST /v1/tokens '{"name":"x","scope":"admin"}'
	assert_status 403 "tenant: create a token"
	tcp "$secret" DELETE "/v1/tokens/$id"
	assert_status 403 "tenant: revoke (its own)"
	tcp "$secret" GET /v1/audit
	assert_status 403 "tenant: read the audit log"
	tcp "$ADMIN" GET "/v1/tokens/$id"
	assert_eq null "$(j .revokedAt)" "still not revoked"
}

t_audit() {
	local id secret
	mktoken id secret '{"name":"audited","scope":"read","tenant":"acme"}' || return 1
	tcp "$secret" GET "/v1/workspaces/$WS"
	tcp "$secret" POST "/v1/workspaces/$WS/restart"
	tcp "$secret" GET /v1/tokens
	tcp "$ADMIN" GET "/v1/audit?tokenId=$id&limit=10"
	assert_status 200 "read the audit log" || return 1
	assert_eq 3 "$(j '.entries|length')" "three requests of the token"
	assert_eq "GET /v1/tokens 403 denied audited acme" \
		"$(j '.entries[0] | "\(.method) \(.path) \(.status) \(.outcome) \(.tokenName) \(.tenant)"')" "newest first"
	assert_eq "POST /v1/workspaces/*/restart $WS 403 denied" \
		"$(j '.entries[1] | "\(.method) \(.route) \(.workspaceId) \(.status) \(.outcome)"')" "the denied POST"
	# a read token of tenant acme: the operator's workspace answers as a missing one
	assert_eq "GET $WS 404 error" "$(j '.entries[2] | "\(.method) \(.workspaceId) \(.status) \(.outcome)"')" "the GET"
	# by workspace, paged with the cursor
	tcp "$ADMIN" GET "/v1/audit?workspace=$WS&limit=1"
	assert_eq 1 "$(j '.entries|length')" "one per page"
	local next first
	next=$(j .nextBefore)
	first=$(j '.entries[0].id')
	assert_ne null "$next" "a cursor"
	tcp "$ADMIN" GET "/v1/audit?workspace=$WS&limit=1&before=$next"
	assert_eq true "$(j ".entries[0].id < $first")" "the next page is older"
	# mutating requests on the unix socket are audited as admin; GETs there are not
	api -q POST "/v1/workspaces/$WS/commands?waitMs=60000" '{"command":"true"}'
	tcp "$ADMIN" GET "/v1/audit?tokenId=admin&limit=5"
	assert_eq "POST admin 201" "$(j '[.entries[] | select(.route == "/v1/workspaces/*/commands")][0] | "\(.method) \(.tokenId) \(.status)"')" "a unix socket POST"
	# a 401 is recorded without a token
	tcp "sst_bogus" GET /v1/worker
	tcp "$ADMIN" GET "/v1/audit?limit=5"
	assert_eq "1" "$(j '[.entries[] | select(.tokenId == null and .status == 401)] | length')" "the 401"
	tcp "$ADMIN" GET "/v1/audit?limit=0"
	assert_status 400 "limit 0"
	assert_eq limit "$(j .error.field)" "names limit"
}

bad_field() {
	local want=$1 body=$2
	tcp "$ADMIN" POST /v1/tokens "$body"
	assert_status 400 "POST /v1/tokens $body" || return 1
	assert_eq "$want" "$(j .error.field)" "field named for $body"
}

t_bad_input() {
	bad_field name '{"scope":"read"}'
	bad_field name '{"name":"","scope":"read"}'
	bad_field name "{\"name\":\"$(printf 'x%.0s' {1..65})\",\"scope\":\"read\"}"
	bad_field name '{"name":"a\u0001b","scope":"read"}'
	bad_field name '{"name":7,"scope":"read"}'
	bad_field scope '{"name":"a"}'
	bad_field scope '{"name":"a","scope":"root"}'
	bad_field tenant '{"name":"a","scope":"tenant"}'
	bad_field tenant '{"name":"a","scope":"tenant","tenant":"-acme"}'
	bad_field tenant '{"name":"a","scope":"tenant","tenant":"Acme"}'
	bad_field tenant "{\"name\":\"a\",\"scope\":\"tenant\",\"tenant\":\"$(printf 'a%.0s' {1..65})\"}"
	bad_field tenant '{"name":"a","scope":"admin","tenant":"acme"}'
	bad_field expiresAt '{"name":"a","scope":"read","expiresAt":"2001-01-01T00:00:00Z"}'
	bad_field expiresAt '{"name":"a","scope":"read","expiresAt":"tomorrow"}'
	bad_field limits '{"name":"a","scope":"tenant","tenant":"t","limits":[]}'
	bad_field limits.memoryMb '{"name":"a","scope":"tenant","tenant":"t","limits":{"memoryMb":-1}}'
	bad_field limits.pidsLimit '{"name":"a","scope":"tenant","tenant":"t","limits":{"pidsLimit":1.5}}'
	bad_field limits.workspaces '{"name":"a","scope":"tenant","tenant":"t","limits":{"workspaces":99999999999}}'
	bad_field limits.cpus '{"name":"a","scope":"tenant","tenant":"t","limits":{"cpus":"two"}}'
	bad_field limits.bogus '{"name":"a","scope":"tenant","tenant":"t","limits":{"bogus":1}}'
	bad_field limits '{"name":"a","scope":"read","limits":{"workspaces":1}}'
	bad_field owner '{"name":"a","scope":"read","owner":"me"}'
	# positive control: the same with every field right
	tcp "$ADMIN" POST /v1/tokens '{"name":"a b-c","scope":"tenant","tenant":"t-1","expiresAt":"2099-01-01T00:00:00Z","limits":{"cpus":2,"memoryMb":1024,"pidsLimit":100,"workspaces":3}}'
	assert_status 201 "a good body"
}

# daemon_alone ROOT ARGS...: a second controller of this test, in the foreground; its exit
# status and stderr in DAEMON_RC and DAEMON_ERR.
daemon_alone() {
	local root=$1
	shift
	mkdir -p "$root"
	DAEMON_ERR=$(timeout 60 "$DAEMON" --root "$root" --worker t2 --log-format text \
		--network-range none --adapters host --lxcfs off "$@" 2>&1 >/dev/null </dev/null)
	DAEMON_RC=$?
}

refused() {
	local file=$1 want=$2
	daemon_alone "$TMP/bad-root" --admin-token-file "$file"
	assert_ne 0 "$DAEMON_RC" "a bad --admin-token-file ($want) is refused"
	assert_contains "$want" "$DAEMON_ERR" "the error says why"
}

token_works() {
	curl -sS --max-time 10 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $2" \
		"http://127.0.0.1:$1/v1/worker" 2>/dev/null | grep -qx 200
}

t_admin_token_file() {
	local dir=$TMP/tokfile secret
	mkdir -p "$dir"
	secret=shared-$(head -c 32 /dev/urandom | sha256sum | cut -c1-40)
	printf '%s\n' "$secret" >"$dir/good"
	chmod 0600 "$dir/good"
	ln -s "$dir/good" "$dir/link"
	cp "$dir/good" "$dir/loose" && chmod 0666 "$dir/loose"
	cp "$dir/good" "$dir/group" && chmod 0620 "$dir/group"
	printf 'too-short-secret\n' >"$dir/short" && chmod 0600 "$dir/short"
	printf '%s\nsecond line\n' "$secret" >"$dir/lines" && chmod 0600 "$dir/lines"
	head -c 5000 /dev/zero | tr '\0' a >"$dir/big" && chmod 0600 "$dir/big"
	refused "$dir/link" "symbolic link"
	refused "$dir/loose" "world-writable"
	refused "$dir/group" "group- or world-writable"
	refused "$dir/short" "shorter than 32"
	refused "$dir/lines" "one line"
	refused "$dir/big" "over 4096 bytes"
	refused "$dir/none" "No such file"
	refused "$dir" "not a regular file"

	# the good file on two controllers at once
	local p1 p2 pid1 pid2
	p1=$(free_port)
	p2=$(free_port)
	for i in 1 2; do
		mkdir -p "$TMP/shared$i"
	done
	"$DAEMON" --root "$TMP/shared1" --worker s1 --log-format text --network-range none \
		--adapters host --lxcfs off --admin-token-file "$dir/good" --listen "tcp:127.0.0.1:$p1" \
		>"$TMP/shared1.log" 2>&1 </dev/null &
	pid1=$!
	"$DAEMON" --root "$TMP/shared2" --worker s2 --log-format text --network-range none \
		--adapters host --lxcfs off --admin-token-file "$dir/good" --listen "tcp:127.0.0.1:$p2" \
		>"$TMP/shared2.log" 2>&1 </dev/null &
	pid2=$!
	wait_for -t 60 token_works "$p1" "$secret" || _fail "controller 1 does not take the file's token: $(tail -3 "$TMP/shared1.log")"
	wait_for -t 60 token_works "$p2" "$secret" || _fail "controller 2 does not take the file's token: $(tail -3 "$TMP/shared2.log")"
	if token_works "$p1" "$ADMIN"; then
		_fail "another controller's admin token works"
	fi
	assert_eq no "$([[ -e $TMP/shared1/admin.token ]] && echo yes || echo no)" "no admin.token written"
	# a new file and a restart replace the token
	kill "$pid1"
	wait "$pid1"
	printf '%s-2\n' "$secret" >"$dir/good"
	"$DAEMON" --root "$TMP/shared1" --worker s1 --log-format text --network-range none \
		--adapters host --lxcfs off --admin-token-file "$dir/good" --listen "tcp:127.0.0.1:$p1" \
		>>"$TMP/shared1.log" 2>&1 </dev/null &
	pid1=$!
	wait_for -t 60 token_works "$p1" "$secret-2" || _fail "the new token does not work after the restart"
	if token_works "$p1" "$secret"; then
		_fail "the old token still works after the restart"
	fi
	kill "$pid1" "$pid2"
	wait "$pid1" "$pid2"
}

t_cli() {
	local secret id out
	secret=$(cli token create --scope read --tenant acme --expires-in 24h cli-made 2>"$TMP/cli-err")
	assert_match '^sst_[0-9a-f]{64}$' "$secret" "create prints the secret alone on stdout" || return 1
	assert_contains "not shown again" "$(cat "$TMP/cli-err")" "and says so on stderr"
	tcp "$secret" GET /v1/worker
	assert_status 200 "the CLI's token works"
	out=$(cli token list)
	assert_contains "cli-made" "$out" "token list shows it"
	assert_eq 0 "$(grep -c sst_ <<<"$out")" "token list shows no secret"
	id=$(cli token list --json | jq -r '.[] | select(.name == "cli-made") | .id')
	assert_match '^tok-' "$id" "its id" || return 1
	assert_eq "$id revoked" "$(cli token revoke "$id")" "token revoke"
	tcp "$secret" GET /v1/worker
	assert_status 401 "revoked through the CLI"
	out=$(cli audit --token "$id" --limit 5 --json)
	assert_eq "GET /v1/worker 200 ok" "$(j '.entries[0] | "\(.method) \(.path) \(.status) \(.outcome)"' "$out")" "audit --token"
	cli token create --scope tenant nameless >/dev/null 2>"$TMP/cli-err"
	assert_ne 0 "$?" "a tenant token without --tenant fails"
	assert_contains "tenant" "$(cat "$TMP/cli-err")" "naming the tenant"
	cli token create --scope read --expires-in 3x x >/dev/null 2>&1
	assert_eq 64 "$?" "a bad --expires-in is a usage error"
}

# mcp_call TOKEN TOOL ARGS_JSON: a tools/call over POST /mcp; sets STATUS and BODY.
mcp_call() {
	tcp "$1" POST /mcp "$(jq -nc --arg t "$2" --argjson a "$3" \
		'{jsonrpc: "2.0", id: 1, method: "tools/call", params: {name: $t, arguments: $a}}')"
}

t_mcp_scoped() {
	local id secret
	mktoken id secret '{"name":"mcp-reader","scope":"read"}' || return 1
	mcp_call "$secret" workspace_list '{}'
	assert_status 200 "read: tools/call workspace_list" || return 1
	assert_eq false "$(j '.result.isError // false')" "a read tool works with a read token"
	assert_contains '"workspaces"' "$(j '.result.content[0].text')" "and answers the list"
	mcp_call "$secret" workspace_create '{}'
	assert_status 200 "read: tools/call workspace_create answers"
	assert_eq true "$(j '.result.isError')" "a write tool is the tool's error"
	assert_contains "read token" "$(j '.result.content[0].text')" "naming the scope"
	tcp "$ADMIN" GET "/v1/audit?tokenId=$id&limit=10"
	assert_eq "POST /v1/workspaces 403" "$(j '[.entries[] | select(.path == "/v1/workspaces")][0] | "\(.method) \(.path) \(.status)"')" \
		"the child's request is audited under the token"
	assert_eq "POST /mcp 200" "$(j '[.entries[] | select(.path == "/mcp")][0] | "\(.method) \(.route) \(.status)"')" \
		"and the /mcp request itself"
}

run_test "each scope is created and used" t_each_scope
run_test "the secret is shown once and stored only hashed" t_secret_never_again
run_test "a read token only reads" t_read_only_reads
run_test "an expired token is 401" t_expired
run_test "a revoked token is 401 and its streams close" t_revoke_closes_streams
run_test "a tenant token cannot manage tokens" t_tenant_cannot_manage
run_test "the audit log says who did what" t_audit
run_test "bad input to POST /v1/tokens names the field" t_bad_input
run_test "--admin-token-file" t_admin_token_file
run_test "the CLI creates, lists, revokes and reads the audit log" t_cli
run_test "/mcp serves a scoped token with its scope" t_mcp_scoped
