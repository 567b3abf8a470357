#!/bin/bash
# run-all: slow: three controllers, a lease that must run out (10 s) and etcd stopped and started
# A fleet on etcd (docs/operations.md, "Many workers"): one etcd on loopback (etcd-lib.sh), three
# controllers w1, w2, w3 of their own roots with tcp listeners on loopback, each --fleet with the
# same prefix and the same admin token. They register and GET /v1/workers on each lists all
# three; a tenant token minted on w1 is its tenant's on w2 (a host create meets the tenant rule,
# 403, not 401: tenants create containers only), a token of the admin scope minted on w1 creates
# a host workspace on w2; revoking that one on w3 makes w1 and w2 answer 401 within 1 s and
# closes its event streams (GET /v1/events, seen receiving an event first) on all three. A second worker named w1 refuses to start naming w1's
# URL; w3 killed with SIGKILL starts again at once under its name (its own URL), and killed
# again leaves the list when its lease runs out. etcd stopped: known tokens still work, minting
# is 503 fleet_unavailable; started again, a token minted on w1 works on w2.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"

etcd_prereqs
etcd_start || {
	not_ok "etcd starts" "see the diagnostics above"
	exit 1
}

PREFIX=/fleet-test-$$/
ADMIN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
(umask 077 && printf '%s\n' "$ADMIN" >"$TMP/admin.token")
declare -A PORT PID
for w in w1 w2 w3 w4; do PORT[$w]=$(_etcd_free_port); done
url() { echo "http://127.0.0.1:${PORT[$1]}"; }

# start_w NAME [--as NAME2]: a controller on its own root and port, registered as NAME (or as
# NAME2 with NAME's root and port).
start_w() {
	local w=$1 name=$1
	[[ ${2:-} == --as ]] && name=$3
	mkdir -p "$TMP/$w"
	"$DAEMON" --root "$TMP/$w" --worker "$name" --log-format text --network-range none \
		--adapters host --default-adapter host --listen "tcp:127.0.0.1:${PORT[$w]}" \
		--admin-token-file "$TMP/admin.token" --fleet "$ETCD_URL" --fleet-prefix "$PREFIX" \
		>>"$TMP/$w.log" 2>&1 </dev/null &
	PID[$w]=$!
}
w_ready() {
	kill -0 "${PID[$1]}" 2>/dev/null || return 2
	[[ $(curl -s -o /dev/null -w '%{http_code}' "$(url "$1")/v1/ready" \
		-H "Authorization: Bearer $ADMIN") == 200 ]]
}
require_w() {
	start_w "$1"
	wait_for -t 20 w_ready "$1" && return 0
	diag "$1 did not become ready within 20 s"
	tail -n 30 "$TMP/$1.log" | sed 's/^/#   /'
	return 1
}
stop_w() {
	local w=$1 sig=${2:-TERM}
	[[ -n ${PID[$w]:-} ]] || return 0
	kill -s "$sig" "${PID[$w]}" 2>/dev/null
	wait_for -t 20 _pid_gone "${PID[$w]}" || kill -KILL "${PID[$w]}" 2>/dev/null
	wait "${PID[$w]}" 2>/dev/null
	PID[$w]=
}
STREAMS=()
fleet_cleanup() {
	local rc=$? w
	for w in "${STREAMS[@]}"; do kill "$w" 2>/dev/null; done
	for w in w1 w2 w3 w4; do stop_w "$w"; done
	# agents of workspaces a killed controller left
	for w in $(pgrep -f -- "$TMP/w[1-4]/" 2>/dev/null); do kill -KILL "$w" 2>/dev/null; done
	etcd_stop
	(exit "$rc")
	_cleanup
}
trap fleet_cleanup EXIT

# tcp WORKER TOKEN METHOD PATH [BODY]: one request; sets STATUS and BODY.
tcp() {
	local w=$1 token=$2 method=$3 path=$4 args
	args=(-sS --max-time 30 -X "$method" -o "$TMP/tcp-body" -w '%{http_code}'
		-H "Authorization: Bearer $token")
	if [[ $# -ge 5 ]]; then
		printf '%s' "$5" >"$TMP/tcp-req"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/tcp-req")
	fi
	: >"$TMP/tcp-body"
	STATUS=$(curl "${args[@]}" "$(url "$w")$path" 2>"$TMP/curl-err") || STATUS=000
	BODY=$(cat "$TMP/tcp-body")
}

for w in w1 w2 w3; do
	require_w "$w" || {
		not_ok "controller $w starts" "see the diagnostics above"
		exit 1
	}
done

# listed_on W NAMES: GET /v1/workers on W names exactly NAMES (sorted, comma-separated), all up.
listed_on() {
	tcp "$1" "$ADMIN" GET /v1/workers
	[[ $STATUS == 200 ]] || return 1
	LISTED=$(jq -r '[.workers[] | .name + ":" + .state] | sort | join(",")' <<<"$BODY")
	[[ $LISTED == "$2" ]]
}

t_registered() {
	local w
	for w in w1 w2 w3; do
		if ! wait_for -t 10 listed_on "$w" "w1:up,w2:up,w3:up"; then
			assert_eq "w1:up,w2:up,w3:up" "$LISTED" "GET /v1/workers on $w" || return 1
		fi
	done
	tcp w2 "$ADMIN" GET /v1/workers
	assert_eq "$(url w3)" "$(jq -r '.workers[] | select(.name == "w3") | .url' <<<"$BODY")" \
		"w3 at its registered URL" || return 1
	# the registration in etcd, with its lease
	assert_eq "$(url w1)" "$(etcdctl_ get "${PREFIX}workers/w1" --print-value-only | jq -r .url)" \
		"workers/w1 in etcd" || return 1
	# a forward reaches a registered worker by name
	tcp w1 "$ADMIN" GET /v1/workers/w3/v1/worker
	assert_eq 200 "$STATUS" "w1 forwards to w3" || return 1
	assert_eq w3 "$(jq -r .name <<<"$BODY")" "the forward's answer" || return 1
}
run_test "three workers register: GET /v1/workers on each lists all three" t_registered

# names_on W: the names GET /v1/workers on W lists, sorted, comma-separated
names_on() {
	tcp "$1" "$ADMIN" GET /v1/workers
	[[ $STATUS == 200 ]] || return 1
	LISTED=$(jq -r '[.workers[].name] | sort | join(",")' <<<"$BODY")
	[[ $LISTED == "$2" ]]
}
t_foreign_registrations() {
	local doc='{"name":"%s","url":"%s","version":"x","capacity":{}}'
	# what any member of the fleet could write: a name no worker list takes, a URL that is not
	# one, and (the control) a well-formed worker nobody runs
	etcdctl_ put "${PREFIX}workers/W_9" "$(printf "$doc" W_9 http://127.0.0.1:9)" >/dev/null
	etcdctl_ put "${PREFIX}workers/w9" "$(printf "$doc" w9 'file:///etc/passwd')" >/dev/null
	etcdctl_ put "${PREFIX}workers/w8" "$(printf "$doc" w8 http://127.0.0.1:9)" >/dev/null
	if ! wait_for -t 10 names_on w1 "w1,w2,w3,w8"; then
		assert_eq "w1,w2,w3,w8" "$LISTED" "w1's list with the foreign registrations"
	fi
	etcdctl_ del "${PREFIX}workers/W_9" >/dev/null
	etcdctl_ del "${PREFIX}workers/w9" >/dev/null
	etcdctl_ del "${PREFIX}workers/w8" >/dev/null
	wait_for -t 10 names_on w1 "w1,w2,w3" || assert_eq "w1,w2,w3" "$LISTED" "w1's list after"
}
run_test "registrations with a bad name or URL are not taken; a well-formed one is (control)" t_foreign_registrations

TENANT='' TENANT_ID='' OPS='' OPS_ID='' KNOWN='' NEW_TOKEN=''
t_mint_use() {
	tcp w1 "$ADMIN" POST /v1/tokens '{"name":"acme-ci","scope":"tenant","tenant":"acme"}'
	assert_eq 201 "$STATUS" "mint on w1: $BODY" || return 1
	TENANT=$(jq -r .token <<<"$BODY")
	TENANT_ID=$(jq -r .id <<<"$BODY")
	# the row in etcd holds the hash, never the secret
	local hash
	hash=$(printf '%s' "$TENANT" | sha256sum | cut -d' ' -f1)
	assert_eq "$TENANT_ID" "$(etcdctl_ get "${PREFIX}tokens/$hash" --print-value-only | jq -r .id)" \
		"tokens/HASH in etcd" || return 1
	if etcdctl_ get --prefix "$PREFIX" | grep -qF "$TENANT"; then
		_fail "the secret is in etcd"
		return 1
	fi
	# w2 knows it as acme's: listing works, a host create meets the tenant rule, not a 401
	tcp w2 "$TENANT" GET /v1/workspaces
	assert_eq 200 "$STATUS" "w1's tenant token on w2: $BODY" || return 1
	tcp w2 "$TENANT" POST /v1/workspaces '{"adapter":"host"}'
	assert_eq 403 "$STATUS" "a tenant's host create on w2: $BODY" || return 1
	assert_contains "not for tenants" "$BODY" "refused as a tenant's" || return 1
	# a token of the admin scope (not the admin token) minted on w1 creates on w2
	tcp w1 "$ADMIN" POST /v1/tokens '{"name":"ops","scope":"admin"}'
	assert_eq 201 "$STATUS" "mint ops on w1" || return 1
	OPS=$(jq -r .token <<<"$BODY")
	OPS_ID=$(jq -r .id <<<"$BODY")
	tcp w2 "$OPS" POST /v1/workspaces '{"adapter":"host"}'
	assert_eq 201 "$STATUS" "create on w2 with w1's token: $BODY" || return 1
	assert_match '^w2-' "$(jq -r .id <<<"$BODY")" "the workspace is w2's" || return 1
	tcp w3 "$ADMIN" POST /v1/tokens '{"name":"known","scope":"read"}'
	assert_eq 201 "$STATUS" "a second token, minted on w3" || return 1
	KNOWN=$(jq -r .token <<<"$BODY")
}
run_test "tokens minted on w1 work on w2: a tenant's as its tenant's, another creates there" t_mint_use

# stream W: GET /v1/events with the tenant token into $TMP/events-W; its curl's pid in SPID[W].
declare -A SPID
stream() {
	curl -sS -N --max-time 120 -H "Authorization: Bearer $OPS" \
		-H 'Accept: text/event-stream' "$(url "$1")/v1/events" >"$TMP/events-$1" 2>&1 &
	SPID[$1]=$!
	STREAMS+=("$!")
}
saw_event() { grep -q '"type":"workspace"' "$TMP/events-$1"; }
t_revoke() {
	local w out ms
	for w in w1 w2 w3; do stream "$w"; done
	# positive control: each stream is open and receives its worker's event
	for w in w1 w2 w3; do
		tcp "$w" "$OPS" POST /v1/workspaces '{"adapter":"host"}'
		assert_eq 201 "$STATUS" "create on $w: $BODY" || return 1
		if ! wait_for -t 10 saw_event "$w"; then
			_fail "the stream on $w saw no event: $(head -c 300 "$TMP/events-$w")"
			return 1
		fi
		kill -0 "${SPID[$w]}" 2>/dev/null || {
			_fail "the stream on $w ended before the revocation"
			return 1
		}
	done
	# one client process keeping its connections (revoke-latency.py): w1 and w2 take the
	# token, then the DELETE on w3, then both polled until they refuse it
	if ! out=$(python3 "$SRC/test/integration/revoke-latency.py" --admin-file "$TMP/admin.token" \
		--revoke "$(url w3)" --check "$(url w1)" --check "$(url w2)" --token "$OPS" \
		--id "$OPS_ID" 2>&1); then
		_fail "$out"
		return 1
	fi
	ms=$(tail -n 1 <<<"$out" | sed -n 's/.*longest \([0-9]*\) ms.*/\1/p')
	assert_le "$ms" 999 "w1 and w2 refuse the revoked token within 1 s: $out" || return 1
	note "w1 and w2 refuse the revoked token $ms ms after the revoke was asked on w3"
	for w in w1 w2 w3; do
		if ! wait_for -t 1 _pid_gone "${SPID[$w]}"; then
			_fail "the event stream on $w is still open 1 s after the revocation"
			return 1
		fi
	done
	# the revocation deleted the row in etcd; the copies here say revoked
	local hash
	hash=$(printf '%s' "$OPS" | sha256sum | cut -d' ' -f1)
	assert_eq "" "$(etcdctl_ get "${PREFIX}tokens/$hash" --keys-only)" \
		"the revoked token's row in etcd" || return 1
	tcp w2 "$ADMIN" GET "/v1/tokens/$OPS_ID"
	assert_eq true "$(jq '.revokedAt != null' <<<"$BODY")" "w2's copy is revoked" || return 1
}
run_test "a revocation on w3 makes w1 and w2 refuse the token within 1 s and ends its streams" t_revoke

t_name_conflict() {
	local rc
	start_w w4 --as w1
	wait_for -t 20 _pid_gone "${PID[w4]}" || {
		_fail "a second w1 is still running"
		return 1
	}
	wait "${PID[w4]}" 2>/dev/null
	rc=$?
	PID[w4]=
	assert_ne 0 "$rc" "its exit status" || return 1
	if ! grep -qF "worker \"w1\" is registered in the fleet" "$TMP/w4.log" ||
		! grep -qF "$(url w1)" "$TMP/w4.log"; then
		_fail "the refusal does not name w1's URL: $(tail -n 3 "$TMP/w4.log")"
		return 1
	fi
	# positive control: w3 killed and started again at once keeps its name (its own URL)
	stop_w w3 KILL
	require_w w3 || return 1
	wait_for -t 10 listed_on w1 "w1:up,w2:up,w3:up" ||
		assert_eq "w1:up,w2:up,w3:up" "$LISTED" "the list after w3's restart"
}
run_test "a second worker named w1 refuses to start naming w1's URL; w3 restarted keeps its name" t_name_conflict

t_lease_expiry() {
	local start
	stop_w w3 KILL
	start=${EPOCHREALTIME/./}
	if ! wait_for -t 30 listed_on w1 "w1:up,w2:up"; then
		assert_eq "w1:up,w2:up" "$LISTED" "w1's list 30 s after w3 was killed"
		return 1
	fi
	note "w3 left the list $(((${EPOCHREALTIME/./} - start) / 1000)) ms after SIGKILL (lease 10 s)"
	tcp w2 "$ADMIN" GET /v1/workers/w3/v1/worker
	assert_eq 404 "$STATUS" "a forward to w3 once it left" || return 1
}
run_test "a worker killed with SIGKILL leaves the list when its lease expires" t_lease_expiry

mint_ok() {
	tcp w1 "$ADMIN" POST /v1/tokens '{"name":"after","scope":"read"}'
	[[ $STATUS == 201 ]]
}
works_on_w2() {
	tcp w2 "$NEW_TOKEN" GET /v1/workspaces
	[[ $STATUS == 200 ]]
}
t_etcd_down() {
	local w
	etcd_stop || return 1
	for w in w1 w2; do
		tcp "$w" "$KNOWN" GET /v1/workspaces
		assert_eq 200 "$STATUS" "$w takes a known token with etcd down" || return 1
	done
	tcp w1 "$ADMIN" POST /v1/tokens '{"name":"while-down","scope":"read"}'
	assert_eq 503 "$STATUS" "mint with etcd down" || return 1
	assert_eq fleet_unavailable "$(jq -r .error.code <<<"$BODY")" "its code" || return 1
	assert_contains "127.0.0.1:$ETCD_PORT" "$(jq -r .error.message <<<"$BODY")" \
		"the message names the store" || return 1
	tcp w1 "$ADMIN" GET /v1/tokens
	assert_eq 0 "$(jq '[.tokens[] | select(.name == "while-down")] | length' <<<"$BODY")" \
		"no local-only token" || return 1
	etcd_start || return 1
	if ! wait_for -t 20 mint_ok; then
		_fail "minting on w1 still answers $STATUS 20 s after etcd is back: $BODY"
		return 1
	fi
	NEW_TOKEN=$(jq -r .token <<<"$BODY")
	wait_for -t 20 works_on_w2 || assert_eq 200 "$STATUS" "w1's new token on w2"
}
run_test "etcd stopped: known tokens work, minting is 503; back, w1's new token works on w2" t_etcd_down

# the workspaces made above (w3's by a controller started again)
[[ -n ${PID[w3]:-} ]] || require_w w3 >/dev/null
for w in w1 w2 w3; do
	[[ -n ${PID[$w]:-} ]] || continue
	tcp "$w" "$ADMIN" GET /v1/workspaces
	for id in $(jq -r '.workspaces[].id' <<<"$BODY" 2>/dev/null); do
		tcp "$w" "$ADMIN" DELETE "/v1/workspaces/$id"
	done
done
