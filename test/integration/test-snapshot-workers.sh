#!/bin/bash
# Snapshots with a worker list (docs/api.md "Snapshots and fork", docs/cli.md "Many workers"):
# two host-adapter controllers on loopback (roots and worker names w1, w2, unix sockets). A
# snapshot's id names its worker (s-w2-…): the CLI over STATION_WORKERS lists it with every
# worker's, creates from it on w2 and deletes it there, with no --worker. Ids of no snapshot
# shape are a 400 naming them (and refused by the CLI without a request); a well-shaped id of
# another worker is a 404 naming that worker. An id of the older shape (s-<26>, rewritten in
# w1's store while w1 is stopped) is still w1's: read, created from and deleted there, through
# --worker w1 (the CLI says so without it).
. "$(dirname "$0")/lib.sh"

NAMES=(w1 w2)
declare -A WPID=()

worker_ready() {
	kill -0 "${WPID[$1]}" 2>/dev/null || return 2
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --unix-socket "$TMP/$1/station.sock" http://x/v1/ready) == 200 ]]
}

start_worker() {
	local name=$1 root=$TMP/$1
	mkdir -p "$root"
	"$DAEMON" --root "$root" --worker "$name" --log-format text --network-range none \
		--adapters host --default-adapter host >>"$root/controller.log" 2>&1 </dev/null &
	WPID[$name]=$!
	if ! wait_for -t 60 worker_ready "$name"; then
		diag "worker $name did not become ready within 60 s"
		tail -n 30 "$root/controller.log" | sed 's/^/#   /'
		return 1
	fi
}

stop_worker() {
	local pid=${WPID[$1]:-}
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null
	wait_for -t 60 _pid_gone "$pid" || kill -KILL "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	WPID[$1]=
}

cleanup_workers() {
	local name id
	for name in "${NAMES[@]}"; do
		[[ -n ${WPID[$name]:-} ]] || continue
		for id in $(wapi "$name" GET /v1/workspaces | jq -r '.workspaces[].id' 2>/dev/null); do
			wapi "$name" DELETE "/v1/workspaces/$id" >/dev/null
		done
		stop_worker "$name"
	done
	_cleanup
}
trap cleanup_workers EXIT

# wapi WORKER METHOD PATH [BODY]: the answer's body on stdout, its status in $TMP/status.
wapi() {
	local args=(-s --max-time 90 --unix-socket "$TMP/$1/station.sock" -X "$2"
		-H "Authorization: Bearer $(cat "$TMP/$1.token")" -o "$TMP/body" -w '%{http_code}')
	[[ -n ${4:-} ]] && args+=(-H 'Content-Type: application/json' -d "$4")
	curl "${args[@]}" "http://x$3" >"$TMP/status"
	cat "$TMP/body"
}

for name in "${NAMES[@]}"; do
	if ! start_worker "$name"; then
		not_ok "workers start" "worker $name: see the diagnostics above"
		exit 1
	fi
	tr -d '\n' <"$TMP/$name/admin.token" >"$TMP/$name.token"
	chmod 0600 "$TMP/$name.token"
	echo "$name unix:$TMP/$name/station.sock $TMP/$name.token" >>"$TMP/workers"
done

# The CLI over both workers, as a user with a workers file has it.
wcli() {
	env -u STATION_SOCKET -u STATION_URL -u STATION_TOKEN STATION_WORKERS_FILE=$TMP/workers \
		HOME=$TMP "$CLI_BIN" "$@"
}

SNAP= WS2= SNAP1=
t_snapshot_on_w2() {
	WS2=$(wcli create --worker w2 --json | jq -r .id)
	assert_match '^w2-[a-z2-7]{26}$' "$WS2" "the workspace's id" || return 1
	wcli exec "$WS2" -- 'echo from-w2 >~/kept.txt' >/dev/null || return 1
	SNAP=$(wcli snapshot create "$WS2")
	assert_match '^s-w2-[a-z2-7]{26}$' "$SNAP" "the snapshot's id (no --worker)" || return 1
	local ws1
	ws1=$(wcli create --worker w1 --json | jq -r .id)
	SNAP1=$(wcli snapshot create "$ws1")
	assert_match '^s-w1-[a-z2-7]{26}$' "$SNAP1" "w1's snapshot's id" || return 1
	wcli rm "$ws1" >/dev/null
}
run_test "a snapshot's id names its worker (s-w2-…)" t_snapshot_on_w2 || exit 1

t_ls() {
	local out want
	out=$(wcli snapshot ls --json)
	want=$(jq -nc --arg a "$SNAP1" --arg b "$SNAP" '[[$a, "w1"], [$b, "w2"]] | sort')
	assert_eq "$want" "$(jq -c 'map([.id, .worker]) | sort' <<<"$out")" "every worker's snapshots" || return 1
	assert_eq "$WS2" "$(jq -r --arg s "$SNAP" '.[] | select(.id == $s) | .workspaceId' <<<"$out")" "w2's snapshot's workspace" || return 1
	out=$(wcli snapshot ls)
	assert_match "^ID +WORKER +WORKSPACE" "$(head -n 1 <<<"$out")" "the table's header" || return 1
	assert_match "^$SNAP +w2 +$WS2 " "$(grep "^$SNAP " <<<"$out")" "w2's row" || return 1
}
run_test "snapshot ls lists every worker's, with no --worker" t_ls

FROM=
t_create_from() {
	FROM=$(wcli create --snapshot "$SNAP" --json | jq -r .id)
	assert_match '^w2-[a-z2-7]{26}$' "$FROM" "the new workspace is on w2" || return 1
	assert_eq "from-w2" "$(wcli exec "$FROM" -- 'cat ~/kept.txt')" "its HOME's file" || return 1
	if wcli create --snapshot "$SNAP" --worker w1 >/dev/null 2>"$TMP/err"; then
		_fail "a create from w2's snapshot on w1 succeeded"
		return 1
	fi
	assert_contains "kept by worker w2" "$(cat "$TMP/err")" "--worker w1's refusal" || return 1
}
run_test "create --snapshot s-w2-… lands on w2, with no --worker" t_create_from

t_rm() {
	if wcli snapshot rm "$SNAP" >/dev/null 2>"$TMP/err"; then
		_fail "a snapshot in use was deleted"
		return 1
	fi
	assert_contains "$FROM" "$(cat "$TMP/err")" "the refusal names the workspace on it" || return 1
	wcli rm "$FROM" "$WS2" >/dev/null || return 1
	assert_eq "$SNAP" "$(wcli snapshot rm "$SNAP")" "snapshot rm's output" || return 1
	assert_eq "404" "$(wapi w2 GET "/v1/snapshots/$SNAP" >/dev/null; cat "$TMP/status")" "w2's GET after rm" || return 1
	assert_eq "[\"$SNAP1\"]" "$(wcli snapshot ls --json | jq -c 'map(.id)')" "the list after rm" || return 1
}
run_test "snapshot rm s-w2-… deletes it on w2, with no --worker" t_rm

t_bad_ids() {
	local body
	if wcli snapshot rm s-nope >/dev/null 2>"$TMP/err"; then
		_fail "snapshot rm s-nope succeeded"
		return 1
	fi
	assert_contains "invalid snapshot id 's-nope'" "$(cat "$TMP/err")" "the CLI's refusal" || return 1
	body=$(wapi w1 GET /v1/snapshots/s-nope)
	assert_eq "400" "$(cat "$TMP/status")" "GET /v1/snapshots/s-nope" || return 1
	assert_contains 'invalid snapshot id "s-nope"' "$(jq -r .error.message <<<"$body")" "its message" || return 1
	body=$(wapi w1 POST /v1/workspaces '{"snapshot":"w1-abcdefghijklmnopqrstuvwxyz"}')
	assert_eq "400" "$(cat "$TMP/status")" "a create from a workspace id" || return 1
	assert_contains 'invalid snapshot id "w1-abcdefghijklmnopqrstuvwxyz"' "$(jq -r .error.message <<<"$body")" "its message" || return 1
	body=$(wapi w1 GET /v1/snapshots/s-w2-abcdefghijklmnopqrstuvwxyz)
	assert_eq "404" "$(cat "$TMP/status")" "w2's id asked of w1" || return 1
	assert_contains "kept by worker w2, not by this one (w1)" "$(jq -r .error.message <<<"$body")" "its message" || return 1
	# positive control: the same shape on its own worker, and an unknown one there
	wapi w1 GET "/v1/snapshots/$SNAP1" >/dev/null
	assert_eq "200" "$(cat "$TMP/status")" "w1's own snapshot" || return 1
	body=$(wapi w1 GET /v1/snapshots/s-w1-abcdefghijklmnopqrstuvwxyz)
	assert_eq "404" "$(cat "$TMP/status")" "an unknown w1 id" || return 1
	assert_contains "not found" "$(jq -r .error.message <<<"$body")" "its message" || return 1
}
run_test "bad snapshot ids: 400 naming them, another worker's: 404 naming it" t_bad_ids

OLD=s-abcdefghijklmnopqrstuvwxyz
t_older_ids() {
	stop_worker w1
	sqlite3 "$TMP/w1/station.db" "UPDATE snapshots SET id = '$OLD' WHERE id = '$SNAP1'" || return 1
	start_worker w1 || return 1
	assert_eq "$OLD w1" "$(wapi w1 GET "/v1/snapshots/$OLD" | jq -r '"\(.id) \(.worker)"')" "GET on w1" || return 1
	assert_eq "[\"$OLD\"]" "$(wcli snapshot ls --json | jq -c 'map(.id)')" "listed" || return 1
	if wcli create --snapshot "$OLD" >/dev/null 2>"$TMP/err"; then
		_fail "a create from an id naming no worker went somewhere"
		return 1
	fi
	assert_contains "--worker" "$(cat "$TMP/err")" "the refusal says what to add" || return 1
	local ws
	ws=$(wcli create --snapshot "$OLD" --worker w1 --json | jq -r .id)
	assert_match '^w1-[a-z2-7]{26}$' "$ws" "created from it with --worker w1" || return 1
	wcli rm "$ws" >/dev/null || return 1
	if wcli snapshot rm "$OLD" >/dev/null 2>"$TMP/err"; then
		_fail "snapshot rm of an id naming no worker went somewhere"
		return 1
	fi
	assert_contains "--worker NAME" "$(cat "$TMP/err")" "the refusal says what to add" || return 1
	assert_eq "$OLD" "$(wcli --worker w1 snapshot rm "$OLD")" "snapshot rm with --worker w1" || return 1
}
run_test "an id of the older shape (s-…) is still its worker's" t_older_ids

exit 0
