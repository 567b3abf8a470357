#!/bin/bash
# A full metadata disk (docs/operations.md, "A full disk"): the metadata root lives on a small
# tmpfs this script mounts (in a mount namespace of its own, so nothing outlives it), filled
# with fallocate while commands end. Every result is served terminal at once (GET, waitMs,
# the output stream's end), GET /v1/ready reports the store check failing, and the results
# are recorded once space is freed: by the controller's retry, or after a controller restart
# (the agent sends what was not acknowledged again). A create answers 507 meanwhile (the
# positive control: the disk is really full for the store). A DELETE on the full disk answers
# 507 and leaves the workspace as it was (never a half-deleted one). A service attempt's end is
# kept, listed from memory at once and written the same way.
if [[ -z ${STATION_FULL_DISK_MNT:-} ]]; then
	if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null || ! command -v fallocate >/dev/null; then
		echo "skip $(basename "$0" .sh) needs root, unshare and fallocate (util-linux)"
		exit 0
	fi
	mnt=$(mktemp -d /tmp/station-small.XXXXXX)
	STATION_FULL_DISK_MNT=$mnt unshare -m --propagation private "$0" "$@"
	rc=$?
	rmdir "$mnt" 2>/dev/null
	exit $rc
fi
. "$(dirname "$0")/lib.sh"

MNT=$STATION_FULL_DISK_MNT
mount -t tmpfs -o size=48m,mode=0700 station-small "$MNT" || {
	not_ok "mount a small tmpfs" "mount failed"
	exit 1
}
ROOT=$MNT/root
SOCK=$ROOT/station.sock
CONTROLLER_LOG=$TMP/controller.log
mkdir -p "$ROOT"
GO=$TMP/go
mkdir -p "$GO"
chmod 0755 "$TMP" "$GO"

require_controller
new_ws WS || exit 1

# fill: takes every free byte of the small filesystem.
fill() {
	local avail
	avail=$(df --output=avail -B1 "$MNT" | tail -n 1 | tr -d ' ')
	fallocate -l "$avail" "$MNT/fill" 2>/dev/null || fallocate -l $((avail - 65536)) "$MNT/fill"
	# whatever fallocate left
	dd if=/dev/zero of="$MNT/fill2" bs=4096 status=none 2>/dev/null
	return 0
}

unfill() {
	rm -f "$MNT/fill" "$MNT/fill2"
}

# start_waiting N: N commands that each wait for $GO/N, then print 96 KiB and a line.
WAITING=()
start_waiting() {
	local i
	WAITING=()
	for i in $(seq "$1"); do
		run_start "$WS" "$(json_cmd "while [ ! -e $GO/$2-$i ]; do sleep 0.05; done; head -c 98304 /dev/zero | tr '\\0' x; echo; echo done-$2-$i" '.timeoutMs=600000')" || return 1
		WAITING+=("$RUN")
	done
}

store_check() {
	api -q GET /v1/ready
	j '.checks[] | select(.name == "store") | .ok'
}

store_ok() {
	api -q GET /v1/ready
	[[ $STATUS == 200 && $(j '.checks[] | select(.name == "store") | .ok') == true ]]
}

# assert_done TAG: every WAITING run is exited with its output (long-poll, then plain GET).
assert_done() {
	local i=0 run
	for run in "${WAITING[@]}"; do
		i=$((i + 1))
		run_wait "$WS" "$run" 120 || return 1
		assert_eq exited "$(j .status)" "run $i status ($1)"
		assert_eq 0 "$(j .exitCode)" "run $i exit code ($1)"
		assert_eq "done-$2-$i" "$(j '.stdout | rtrimstr("\n") | split("\n") | last')" \
			"run $i stdout ($1)"
		assert_eq 98314 "$(j .stdoutBytes)" "run $i stdoutBytes ($1)"
	done
}

t_positive_control() {
	run_cmd "$WS" 'echo before'
	assert_eq exited "$(j .status)" "a command before the fill"
	assert_eq true "$(store_check)" "the store check before the fill"
}

t_results_served_then_retried() {
	start_waiting 3 a || return 1
	fill
	api -q POST /v1/workspaces '{}'
	assert_status 507 "a create on the full disk (the store is really full)"
	local i
	for i in 1 2 3; do touch "$GO/a-$i"; done
	assert_done "while the disk is full" a
	api -q GET "/v1/workspaces/$WS/commands"
	assert_eq '["exited","exited","exited"]' \
		"$(j "[.commands[] | select(.id == \"${WAITING[0]}\" or .id == \"${WAITING[1]}\" or .id == \"${WAITING[2]}\") | .status]")" \
		"the list while the disk is full"
	api -q GET "/v1/workspaces/$WS/commands/${WAITING[0]}/output"
	assert_status 200 "the output stream of a finished run"
	assert_contains "done-a-1" "$BODY" "the stream replays the output and ends"
	api -q POST "/v1/workspaces/$WS/commands/${WAITING[0]}/cancel"
	assert_status 409 "cancel of a run whose result waits"
	api -q GET /v1/ready
	assert_status 503 "ready while the disk is full"
	assert_eq false "$(store_check)" "the store check while the disk is full"
	assert_contains "full" "$(j '.checks[] | select(.name == "store") | .message')" \
		"the store check names the cause"
	grep -q "cannot record run result: kept in memory" "$CONTROLLER_LOG" ||
		_fail "the controller did not say it kept a result in memory"
	unfill
	wait_for -t 60 store_ok || {
		_fail "the store check after freeing space: $BODY"
		df "$MNT"
		ls -la "$MNT" "$ROOT"
	}
	assert_eq 3 "$(grep -c 'run result recorded after a store failure' "$CONTROLLER_LOG")" \
		"results written by the retry"
	# recorded in SQLite: a new controller reads them from the store
	stop_controller
	start_controller "${CONTROLLER_FLAGS[@]}" || return 1
	assert_done "after a restart" a
}

t_results_resent_after_restart() {
	start_waiting 2 b || return 1
	fill
	touch "$GO/b-1" "$GO/b-2"
	assert_done "while the disk is full" b
	# stopped with the results only in memory, not acknowledged: the agents keep them
	stop_controller
	unfill
	start_controller "${CONTROLLER_FLAGS[@]}" || return 1
	assert_done "after a restart with the disk free" b
	wait_for -t 60 store_ok || _fail "the store check: $BODY"
}

svc_attempt_is() {
	api -q GET "/v1/workspaces/$WS/services/svc"
	[[ $STATUS == 200 && $(j '[.attempts[] | select(.number == 1) | .exitCode] == [3]') == true ]]
}

t_service_attempt_end() {
	api -q POST "/v1/workspaces/$WS/services" "$(jq -nc --arg c "while [ ! -e $GO/svc ]; do sleep 0.05; done; echo svc-end; exit 3" \
		'{name: "svc", command: $c, restart: {policy: "no"}}')"
	assert_status 201 "create a service" || return 1
	wait_for -t 60 eval '[[ $(api -q GET "/v1/workspaces/$WS/services/svc"; j .state) == running ]]' ||
		_fail "the service did not run: $BODY"
	fill
	touch "$GO/svc"
	wait_for -t 60 grep -q "cannot record service attempt: kept in memory" "$CONTROLLER_LOG" ||
		_fail "the attempt's end was not kept in memory"
	api -q GET /v1/ready
	assert_status 503 "ready while an attempt's end waits"
	# served from memory at once, while it waits for room
	svc_attempt_is || _fail "attempt 1 while the disk is full: $BODY"
	assert_eq 'svc-end' "$(j '.attempts[] | select(.number == 1) | .stdout' | tr -d '\n')" \
		"the attempt's output while the disk is full"
	assert_eq exited "$(j '.attempts[] | select(.number == 1) | .endReason')" \
		"its end reason while the disk is full"
	api -q GET "/v1/workspaces/$WS/services"
	assert_eq '[3]' "$(j '[.services[] | select(.name == "svc") | .attempts[] | select(.number == 1) | .exitCode]')" \
		"the service list while the disk is full"
	grep -q "service attempt recorded after a store failure" "$CONTROLLER_LOG" &&
		_fail "the attempt was written before space was freed (the disk was not full)"
	unfill
	wait_for -t 60 svc_attempt_is || _fail "attempt 1 after freeing space: $BODY"
	assert_eq 'svc-end' "$(j '.attempts[] | select(.number == 1) | .stdout' | tr -d '\n')" \
		"the attempt's output"
	# listed from memory at once; written by the retry within a second or so
	wait_for -t 60 grep -q "service attempt recorded after a store failure" "$CONTROLLER_LOG" ||
		_fail "written by the retry"
	wait_for -t 60 store_ok || _fail "the store check: $BODY"
}

t_delete_on_full_disk() {
	local other
	new_ws other || return 1
	api -q PUT "/v1/workspaces/$other/files?path=kept.txt" 'kept'
	fill
	api -q DELETE "/v1/workspaces/$other"
	assert_status 507 "DELETE on the full disk"
	assert_eq insufficient_storage "$(j .error.code)" "error code"
	assert_contains "was not deleted and is unchanged" "$(j .error.message)" message
	api -q GET "/v1/workspaces/$other"
	assert_status 200 "the workspace is still there"
	assert_eq ready "$(j .state)" "its state"
	api -q GET "/v1/workspaces/$other/files?path=kept.txt"
	assert_eq kept "$BODY" "its files"
	unfill
	# still usable, and the same DELETE goes through once there is room (positive control)
	run_cmd "$other" 'cat kept.txt'
	assert_eq kept "$(j .stdout)" "a command in it after the disk has room"
	api -q DELETE "/v1/workspaces/$other"
	assert_status 200 "DELETE with room"
	api -q GET "/v1/workspaces/$other"
	assert_status 404 "gone after"
}

run_test "positive control: results and the store check before the fill" t_positive_control
run_test "full disk: results served terminal, written by the retry once space is free" \
	t_results_served_then_retried
run_test "full disk: results not acknowledged come again after a restart" \
	t_results_resent_after_restart
run_test "full disk: a service attempt's end is written by the retry once space is free" \
	t_service_attempt_end
run_test "DELETE on a full disk: 507, the workspace intact and usable; deleted with room" \
	t_delete_on_full_disk
unfill
