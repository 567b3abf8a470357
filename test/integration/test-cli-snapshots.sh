#!/bin/bash
# `station-sandbox pause|resume|snapshot|fork` and `create --snapshot` against a real controller
# and container workspaces of the busybox image: pause prints the state and a command on the
# paused workspace exits 1 naming the pause and the CLI's way to resume it (resume the control:
# the command runs after); --auto-resume lets the command through; snapshot create prints the
# id, snapshot ls lists it (table and --json), create --snapshot starts a workspace with the
# files as they were (a later write in the source not in it), --auto-resume and --idle-action
# reach the workspace; fork -n 2 prints two ids, each with the source's files, a write in one in
# neither the other nor the source; snapshot rm of a snapshot in use is refused, then done, then
# 404. Usage errors exit 64 before any request (checked against a socket where nothing listens:
# the same command well formed exits 2 there, the control). With a worker list, snapshot
# create, ls and rm and fork need no --worker: ids name their worker (test-snapshot-workers.sh
# has two workers); a create from a malformed snapshot id is refused naming it.
. "$(dirname "$0")/container-lib.sh"

require_container_controller

# clirun ARGS...: runs the CLI, sets RC, OUT (stdout) and ERR (stderr).
clirun() {
	cli "$@" >"$TMP/cli.out" 2>"$TMP/cli.err" </dev/null
	RC=$?
	OUT=$(cat "$TMP/cli.out")
	ERR=$(cat "$TMP/cli.err")
}

# dead ARGS...: the CLI against a socket nobody listens on: exit 2 once it sends a request.
dead() {
	STATION_SOCKET=$TMP/nobody.sock "$CLI_BIN" "$@" >"$TMP/cli.out" 2>"$TMP/cli.err" </dev/null
	RC=$?
	ERR=$(cat "$TMP/cli.err")
}

# cat_in WS PATH: the file's content as a command in WS prints it (CAT), or fails the test.
CAT=
cat_in() {
	clirun exec "$1" -- cat "$2"
	CAT=$OUT
	assert_eq 0 "$RC" "cat $2 in $1 (stderr: $ERR)"
}

WS=
t_setup() {
	new_cws WS || return 1
	clirun exec "$WS" -- 'echo base >state.txt && echo etc-base >/etc/cli-snap'
	assert_eq 0 "$RC" "write the files (stderr: $ERR)"
}

t_usage_before_request() {
	local args
	for args in "fork" "fork -n 0 WS" "fork -n 101 WS" "fork -n x WS" "fork WS1 WS2" \
		"pause" "pause A B" "resume" "snapshot" "snapshot nope" "snapshot create" \
		"snapshot create --name= WS" "snapshot ls extra" "snapshot rm" \
		"create --idle-action sleep" "create --snapshot s-x --image sha256:00"; do
		# shellcheck disable=SC2086 # words on purpose
		dead $args
		assert_eq 64 "$RC" "'$args' is a usage error (stderr: $ERR)" || return 1
		assert_match '^station-sandbox [a-z ]+: ' "$ERR" "'$args' names the problem" || return 1
	done
	dead fork -n 3 WS
	assert_eq 2 "$RC" "control: fork -n 3 WS makes a request" || return 1
	dead snapshot create --name n WS
	assert_eq 2 "$RC" "control: snapshot create makes a request" || return 1
	dead create --snapshot s-x --idle-action pause --auto-resume
	assert_eq 2 "$RC" "control: create --snapshot makes a request" || return 1
	dead fork -n 101 WS
	assert_contains "out of range (want 1-100)" "$ERR" "-n 101 says the range"
}

t_pause_resume() {
	clirun pause "$WS"
	assert_eq 0 "$RC" "pause (stderr: $ERR)" || return 1
	assert_eq "$WS paused" "$OUT" "pause prints the state" || return 1
	clirun pause --json "$WS"
	assert_eq paused "$(j .state "$OUT")" "pause again: still paused" || return 1
	assert_match '^20[0-9-]+T' "$(j .pausedAt "$OUT")" "pausedAt" || return 1
	clirun exec "$WS" -- true
	assert_eq 1 "$RC" "exec on a paused workspace" || return 1
	assert_match 'paused' "$(head -n 1 <<<"$ERR")" "the controller's message names the pause" || return 1
	assert_contains "station-sandbox resume $WS" "$ERR" "and the CLI's way to resume" || return 1
	clirun files cat "$WS" state.txt
	assert_eq base "$OUT" "a file is read while paused (stderr: $ERR)" || return 1
	clirun resume "$WS"
	assert_eq 0 "$RC" "resume (stderr: $ERR)" || return 1
	assert_eq "$WS ready" "$OUT" "resume prints the state" || return 1
	clirun exec "$WS" -- echo after
	assert_eq after "$OUT" "control: exec after resume (stderr: $ERR)"
}

t_auto_resume() {
	local ws
	clirun create --json --adapter container --image "$IMAGE" --auto-resume --idle-action pause \
		--idle-timeout-ms 600000
	assert_eq 0 "$RC" "create --auto-resume (stderr: $ERR)" || return 1
	ws=$(j .id "$OUT")
	WORKSPACES+=("$ws")
	assert_eq "true pause" "$(j '"\(.autoResume) \(.idleAction)"' "$OUT")" "the fields reach it" || return 1
	clirun pause "$ws"
	assert_eq "$ws paused" "$OUT" "paused (stderr: $ERR)" || return 1
	clirun exec "$ws" -- echo woke
	assert_eq 0 "$RC" "exec resumes it first (stderr: $ERR)" || return 1
	assert_eq woke "$OUT" "and runs"
	api -q GET "/v1/workspaces/$ws"
	assert_eq ready "$(j .state)" "ready after"
}

SNAP=
t_snapshot_create_ls() {
	local row
	clirun snapshot create --name base "$WS"
	assert_eq 0 "$RC" "snapshot create (stderr: $ERR)" || return 1
	assert_match "^s-$WORKER-[a-z2-7]{26}\$" "$OUT" "prints the id alone" || return 1
	SNAP=$OUT
	clirun snapshot ls
	assert_eq 0 "$RC" "snapshot ls (stderr: $ERR)" || return 1
	assert_match '^ID +WORKSPACE +NAME +SIZE +MEMORY +CREATED$' "$(head -n 1 <<<"$OUT")" "header" || return 1
	row=$(awk -v id="$SNAP" '$1 == id' <<<"$OUT")
	assert_match "^$SNAP +$WS +base +[0-9]+ +no +20[0-9-]+T" "$row" "its row" || return 1
	clirun snapshot ls --json
	assert_eq "$WS base false" "$(j ".[] | select(.id == \"$SNAP\") | \"\(.workspaceId) \(.name) \(.memory)\"" "$OUT")" \
		"--json: the snapshot" || return 1
	clirun snapshot create --json "$WS"
	assert_eq 0 "$RC" "snapshot create --json (stderr: $ERR)" || return 1
	assert_eq "$WS" "$(j .workspaceId "$OUT")" "--json: workspaceId" || return 1
	assert_match '^[0-9]+$' "$(j .pausedMs "$OUT")" "--json: pausedMs" || return 1
	clirun snapshot rm "$(j .id "$OUT")"
	assert_eq 0 "$RC" "rm the second one (stderr: $ERR)"
}

FROM=
t_create_from_snapshot() {
	clirun exec "$WS" -- 'echo later >state.txt'
	assert_eq 0 "$RC" "a write in the source after the snapshot" || return 1
	clirun create --snapshot "$SNAP"
	assert_eq 0 "$RC" "create --snapshot (stderr: $ERR)" || return 1
	FROM=$OUT
	WORKSPACES+=("$FROM")
	cat_in "$FROM" state.txt || return 1
	assert_eq base "$CAT" "HOME as it was at the snapshot" || return 1
	cat_in "$FROM" /etc/cli-snap || return 1
	assert_eq etc-base "$CAT" "and the root filesystem's change"
}

t_fork() {
	local ids a b
	clirun fork -n 2 "$WS"
	assert_eq 0 "$RC" "fork (stderr: $ERR)" || return 1
	mapfile -t ids <<<"$OUT"
	assert_eq 2 "${#ids[@]}" "two ids, one per line: $OUT" || return 1
	a=${ids[0]} b=${ids[1]}
	WORKSPACES+=("$a" "$b")
	assert_match '^snapshot s-[A-Za-z0-9_-]+, source paused [0-9]+ ms$' "$ERR" "stderr: the snapshot" || return 1
	cat_in "$a" state.txt || return 1
	assert_eq later "$CAT" "fork 1 has the source's file" || return 1
	cat_in "$b" /etc/cli-snap || return 1
	assert_eq etc-base "$CAT" "fork 2 has the source's /etc change" || return 1
	clirun exec "$a" -- 'echo mine >state.txt'
	cat_in "$b" state.txt || return 1
	assert_eq later "$CAT" "a write in fork 1 is not in fork 2" || return 1
	cat_in "$WS" state.txt || return 1
	assert_eq later "$CAT" "nor in the source" || return 1
	clirun fork --json -n 1 "$WS"
	assert_eq 0 "$RC" "fork --json (stderr: $ERR)" || return 1
	WORKSPACES+=("$(j '.workspaces[0].id' "$OUT")")
	assert_eq 1 "$(j '.workspaces | length' "$OUT")" "--json: one workspace" || return 1
	assert_match '^s-' "$(j .snapshot "$OUT")" "--json: the snapshot"
}

t_snapshot_rm() {
	clirun snapshot rm "$SNAP"
	assert_eq 1 "$RC" "rm of a snapshot a workspace runs on (stdout: $OUT)" || return 1
	assert_match '^station-sandbox: ' "$ERR" "the controller's message" || return 1
	clirun rm "$FROM"
	assert_eq 0 "$RC" "rm its workspace (stderr: $ERR)" || return 1
	clirun snapshot rm "$SNAP"
	assert_eq 0 "$RC" "then rm (stderr: $ERR)" || return 1
	assert_eq "$SNAP" "$OUT" "prints the id" || return 1
	clirun snapshot ls --json
	assert_eq "" "$(j ".[] | select(.id == \"$SNAP\") | .id" "$OUT")" "no longer listed" || return 1
	clirun snapshot rm "$SNAP"
	assert_eq 1 "$RC" "rm again" || return 1
	assert_match 'not found|no snapshot|unknown' "$ERR" "says it is gone"
}

t_workers() {
	local list="$WORKER=unix:$SOCK" snap
	STATION_WORKERS=$list "$CLI_BIN" snapshot create "$WS" >"$TMP/cli.out" 2>"$TMP/cli.err"
	assert_eq 0 "$?" "snapshot create routes by the workspace (stderr: $(cat "$TMP/cli.err"))" || return 1
	snap=$(cat "$TMP/cli.out")
	STATION_WORKERS=$list "$CLI_BIN" snapshot ls --json >"$TMP/cli.out" 2>"$TMP/cli.err"
	assert_eq 0 "$?" "snapshot ls with a worker list, no --worker (stderr: $(cat "$TMP/cli.err"))" || return 1
	assert_eq "$WORKER" "$(j ".[] | select(.id == \"$snap\") | .worker" "$(cat "$TMP/cli.out")")" "lists it with its worker" || return 1
	STATION_WORKERS=$list "$CLI_BIN" create --snapshot s-x >"$TMP/cli.out" 2>"$TMP/cli.err"
	assert_eq 1 "$?" "create --snapshot s-x" || return 1
	assert_contains "invalid snapshot id 's-x'" "$(cat "$TMP/cli.err")" "names the bad id" || return 1
	STATION_WORKERS=$list "$CLI_BIN" snapshot rm "$snap" >"$TMP/cli.out" 2>"$TMP/cli.err"
	assert_eq 0 "$?" "snapshot rm routes by the snapshot's id (stderr: $(cat "$TMP/cli.err"))" || return 1
	STATION_WORKERS=$list "$CLI_BIN" fork "$WS" >"$TMP/cli.out" 2>"$TMP/cli.err"
	assert_eq 0 "$?" "fork routes by the workspace (stderr: $(cat "$TMP/cli.err"))" || return 1
	WORKSPACES+=("$(cat "$TMP/cli.out")")
}

run_test "setup: a container workspace with files in HOME and /etc" t_setup || exit 1
run_test "usage errors exit 64 before any request" t_usage_before_request
run_test "pause, a command refused naming resume, resume" t_pause_resume
run_test "create --auto-resume --idle-action pause: a command resumes it" t_auto_resume
run_test "snapshot create, snapshot ls (table and --json)" t_snapshot_create_ls
run_test "create --snapshot: the files as they were" t_create_from_snapshot
run_test "fork -n 2: ids one per line, independent forks" t_fork
run_test "snapshot rm: refused in use, done, then not found" t_snapshot_rm
run_test "worker list: snapshot create, ls, rm and fork with no --worker" t_workers
