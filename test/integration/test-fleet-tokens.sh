#!/bin/bash
# run-all: slow: about 40 s: two 5 s calls to a hung etcd, controllers started and stopped
# A fleet's tokens on etcd (docs/operations.md, "Many workers"), beyond test-fleet-etcd: one etcd
# on loopback (etcd-lib.sh), controllers w1 and w2 of their own roots, --fleet with one prefix.
# etcd hung (SIGSTOP: the kernel accepts its connections, nothing answers): a mint on w1 waits its
# 5 s for etcd and answers 503 fleet_unavailable, a revocation likewise (the token still works),
# and meanwhile w1 answers GET /v1/worker and runs a command at once (the loop never waits on
# etcd); etcd continued, both succeed. Ten revocations on w1, each refused by w2 within 1 s (the
# median and the longest noted, measured by revoke-latency.py). A worker that minted tokens before it joined a fleet (w3, first
# started without --fleet) writes them to etcd at its first sync, so they work on w1 too; one it
# had revoked stays revoked; once it has synced, a token missing from etcd is revoked there.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/etcd-lib.sh"

etcd_prereqs
etcd_start || {
	not_ok "etcd starts" "see the diagnostics above"
	exit 1
}

PREFIX=/fleet-tokens-$$/
ADMIN=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
(umask 077 && printf '%s\n' "$ADMIN" >"$TMP/admin.token")
declare -A PORT PID
for w in w1 w2 w3; do PORT[$w]=$(_etcd_free_port); done
url() { echo "http://127.0.0.1:${PORT[$1]}"; }

# start_w NAME [--no-fleet]: a controller on its own root and port.
start_w() {
	local w=$1 fleet=(--fleet "$ETCD_URL" --fleet-prefix "$PREFIX")
	[[ ${2:-} == --no-fleet ]] && fleet=()
	mkdir -p "$TMP/$w"
	"$DAEMON" --root "$TMP/$w" --worker "$w" --log-format text --network-range none \
		--adapters host --default-adapter host --listen "tcp:127.0.0.1:${PORT[$w]}" \
		--admin-token-file "$TMP/admin.token" "${fleet[@]}" \
		>>"$TMP/$w.log" 2>&1 </dev/null &
	PID[$w]=$!
}
w_ready() {
	kill -0 "${PID[$1]}" 2>/dev/null || return 2
	[[ $(curl -s -o /dev/null -w '%{http_code}' "$(url "$1")/v1/ready" \
		-H "Authorization: Bearer $ADMIN") == 200 ]]
}
require_w() {
	start_w "$@"
	wait_for -t 20 w_ready "$1" && return 0
	diag "$1 did not become ready within 20 s"
	tail -n 30 "$TMP/$1.log" | sed 's/^/#   /'
	return 1
}
stop_w() {
	local w=$1
	[[ -n ${PID[$w]:-} ]] || return 0
	kill -TERM "${PID[$w]}" 2>/dev/null
	wait_for -t 20 _pid_gone "${PID[$w]}" || kill -KILL "${PID[$w]}" 2>/dev/null
	wait "${PID[$w]}" 2>/dev/null
	PID[$w]=
}
BG=()
fleet_cleanup() {
	local rc=$? p
	for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
	[[ -n $ETCD_PID ]] && kill -CONT "$ETCD_PID" 2>/dev/null
	for p in w1 w2 w3; do stop_w "$p"; done
	etcd_stop
	(exit "$rc")
	_cleanup
}
trap fleet_cleanup EXIT

# tcp WORKER TOKEN METHOD PATH [BODY]: one request; sets STATUS, BODY and MS (its time).
tcp() {
	local w=$1 token=$2 method=$3 path=$4 args start
	args=(-sS --max-time 30 -X "$method" -o "$TMP/tcp-body" -w '%{http_code}'
		-H "Authorization: Bearer $token")
	if [[ $# -ge 5 ]]; then
		printf '%s' "$5" >"$TMP/tcp-req"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/tcp-req")
	fi
	: >"$TMP/tcp-body"
	start=${EPOCHREALTIME/./}
	STATUS=$(curl "${args[@]}" "$(url "$w")$path" 2>"$TMP/curl-err") || STATUS=000
	MS=$(((${EPOCHREALTIME/./} - start) / 1000))
	BODY=$(cat "$TMP/tcp-body")
}
hash_of() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

for w in w1 w2; do
	require_w "$w" || {
		not_ok "controller $w starts" "see the diagnostics above"
		exit 1
	}
done

# mint W NAME: a read token minted on W; sets TOKEN and TOKEN_ID.
TOKEN='' TOKEN_ID=''
mint() {
	tcp "$1" "$ADMIN" POST /v1/tokens "{\"name\":\"$2\",\"scope\":\"read\"}"
	[[ $STATUS == 201 ]] || return 1
	TOKEN=$(jq -r .token <<<"$BODY")
	TOKEN_ID=$(jq -r .id <<<"$BODY")
}
answers() {
	tcp "$1" "$2" GET /v1/workspaces
	[[ $STATUS == "$3" ]]
}

# background_call NAME W METHOD PATH [BODY]: the request in the background; its status, then its
# time in ms, land in $TMP/NAME.out; its pid in BG_PID.
background_call() {
	local name=$1
	shift
	(
		tcp "$@"
		printf '%s %s\n' "$STATUS" "$MS" >"$TMP/$name.out"
		printf '%s' "$BODY" >"$TMP/$name.body"
	) &
	BG_PID=$!
	BG+=("$BG_PID")
}

# prompt_while NAME PID: GET /v1/worker and a host command on w1 each answer within 1 s while the
# background request PID is still waiting for etcd (checked after them, so they overlapped it).
prompt_while() {
	local name=$1 pid=$2 ws=$3 worker_ms
	# the request is under way (its etcd call began) before the probes
	sleep 0.5
	tcp w1 "$ADMIN" GET /v1/worker
	assert_eq 200 "$STATUS" "GET /v1/worker during the $name" || return 1
	assert_le "$MS" 999 "GET /v1/worker during the $name: ms" || return 1
	worker_ms=$MS
	tcp w1 "$ADMIN" POST "/v1/workspaces/$ws/commands?waitMs=5000" '{"command":"echo hi"}'
	assert_eq 201 "$STATUS" "a command during the $name: $BODY" || return 1
	assert_eq "hi" "$(jq -r .stdout <<<"$BODY" | tr -d '\n')" "its output" || return 1
	assert_le "$MS" 999 "a command during the $name: ms" || return 1
	note "during the $name on a hung etcd: GET /v1/worker answered in $worker_ms ms, a command in $MS ms"
	kill -0 "$pid" 2>/dev/null || {
		_fail "the $name was not waiting for etcd any more: $(cat "$TMP/$name.out")"
		return 1
	}
}

# hung_answer NAME PID: the background request answered 503 fleet_unavailable after ~5 s.
hung_answer() {
	local name=$1 pid=$2 st ms
	wait "$pid"
	read -r st ms <"$TMP/$name.out"
	assert_eq 503 "$st" "the $name with etcd hung: $(cat "$TMP/$name.body")" || return 1
	assert_eq fleet_unavailable "$(jq -r .error.code "$TMP/$name.body")" "its code" || return 1
	assert_le 4000 "$ms" "the $name waited for etcd (ms)" || return 1
	assert_le "$ms" 15000 "the $name ended within its bound (ms)" || return 1
	note "the $name answered 503 after $ms ms"
}

t_hung_store() {
	local ws pid known known_id
	tcp w1 "$ADMIN" POST /v1/workspaces '{"adapter":"host"}'
	assert_eq 201 "$STATUS" "a host workspace on w1: $BODY" || return 1
	ws=$(jq -r .id <<<"$BODY")
	mint w1 known || {
		_fail "mint before etcd hangs: $STATUS $BODY"
		return 1
	}
	known=$TOKEN known_id=$TOKEN_ID
	kill -STOP "$ETCD_PID"
	background_call mint w1 "$ADMIN" POST /v1/tokens '{"name":"while-hung","scope":"read"}'
	pid=$BG_PID
	prompt_while mint "$pid" "$ws" || return 1
	hung_answer mint "$pid" || return 1
	tcp w1 "$ADMIN" GET /v1/tokens
	assert_eq 0 "$(jq '[.tokens[] | select(.name == "while-hung")] | length' <<<"$BODY")" \
		"no local-only token" || return 1

	background_call revocation w1 "$ADMIN" DELETE "/v1/tokens/$known_id"
	pid=$BG_PID
	prompt_while revocation "$pid" "$ws" || return 1
	hung_answer revocation "$pid" || return 1
	answers w1 "$known" 200 || {
		_fail "the token whose revocation failed answers $STATUS on w1"
		return 1
	}

	# positive control: etcd continued, both succeed
	kill -CONT "$ETCD_PID"
	if ! wait_for -t 20 mint w1 after-hang; then
		_fail "minting on w1 still answers $STATUS 20 s after etcd continued: $BODY"
		return 1
	fi
	tcp w1 "$ADMIN" DELETE "/v1/tokens/$known_id"
	assert_eq 200 "$STATUS" "the revocation once etcd continued: $BODY" || return 1
	wait_for -t 5 answers w2 "$known" 401 || assert_eq 401 "$STATUS" "the token on w2"
}
run_test "etcd hung: a mint and a revocation answer 503 after 5 s, the loop answers meanwhile" \
	t_hung_store

# Measured by one client process that keeps its connections (revoke-latency.py): a curl
# started per request would measure mostly its own start.
t_revoke_latency() {
	local out longest
	if ! out=$(python3 "$SRC/test/integration/revoke-latency.py" --admin-file "$TMP/admin.token" \
		--mint "$(url w1)" --revoke "$(url w1)" --check "$(url w2)" --rounds 10 2>&1); then
		_fail "$out"
		return 1
	fi
	longest=$(tail -n 1 <<<"$out" | sed -n 's/.*longest \([0-9]*\) ms.*/\1/p')
	assert_le "$longest" 999 "the longest of ten, ms: $out" || return 1
	note "revoked on w1, refused by w2: $(tail -n 1 <<<"$out")"
}
run_test "ten revocations on w1: each refused by w2 within 1 s" t_revoke_latency

token_works() {
	tcp "$1" "$2" GET /v1/workspaces
	[[ $STATUS == 200 ]]
}
t_joining() {
	local kept kept_id gone gone_id
	require_w w3 --no-fleet || return 1
	tcp w3 "$ADMIN" POST /v1/tokens '{"name":"before","scope":"tenant","tenant":"acme"}'
	assert_eq 201 "$STATUS" "a tenant token minted on w3 before the fleet" || return 1
	kept=$(jq -r .token <<<"$BODY") kept_id=$(jq -r .id <<<"$BODY")
	mint w3 revoked-before || return 1
	gone=$TOKEN gone_id=$TOKEN_ID
	tcp w3 "$ADMIN" DELETE "/v1/tokens/$gone_id"
	assert_eq 200 "$STATUS" "its revocation before the fleet" || return 1
	stop_w w3
	assert_eq "" "$(ls "$TMP/w3/fleet.synced" 2>/dev/null)" "no fleet.synced before" || return 1

	require_w w3 || return 1
	token_works w3 "$kept" || {
		_fail "w3's own token answers $STATUS on w3 once it joined: $BODY"
		return 1
	}
	assert_eq "$kept_id" "$(etcdctl_ get "${PREFIX}tokens/$(hash_of "$kept")" --print-value-only |
		jq -r .id)" "w3's token written to etcd" || return 1
	wait_for -t 5 token_works w1 "$kept" ||
		assert_eq 200 "$STATUS" "w3's token from before the fleet on w1" || return 1
	tcp w1 "$ADMIN" GET "/v1/tokens/$kept_id"
	assert_eq 200 "$STATUS" "w1 knows it by its id" || return 1
	assert_eq acme "$(jq -r .tenant <<<"$BODY")" "as acme's" || return 1
	# the one revoked before stays revoked, everywhere
	answers w3 "$gone" 401 || assert_eq 401 "$STATUS" "the revoked one on w3" || return 1
	answers w1 "$gone" 401 || assert_eq 401 "$STATUS" "the revoked one on w1" || return 1
	assert_eq "" "$(etcdctl_ get "${PREFIX}tokens/$(hash_of "$gone")" --keys-only)" \
		"the revoked one is not in etcd" || return 1
	[[ -s $TMP/w3/fleet.synced ]] || {
		_fail "no fleet.synced once w3 synced"
		return 1
	}

	# once synced, a token missing from etcd is revoked (deleted while w3 was stopped)
	stop_w w3
	etcdctl_ del "${PREFIX}tokens/$(hash_of "$kept")" >/dev/null
	require_w w3 || return 1
	wait_for -t 5 answers w3 "$kept" 401 ||
		assert_eq 401 "$STATUS" "w3's token deleted from etcd while w3 was stopped"
}
run_test "tokens minted before joining the fleet are written to etcd at the first sync" t_joining
