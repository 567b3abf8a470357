#!/bin/bash
# run-all: serial: checkpoints real workspaces with CRIU (seconds of a whole core each); fetches Debian 13's criu the first time
# Memory snapshots (docs/operations.md "Memory snapshots"), through the controller with Debian
# 13's criu (scripts/criu-trixie, cached in CRIU_TRIXIE): a workspace running a counter is
# checkpointed with its processes and runs on (its agent lets go of the controller's log,
# listener and connection, and is reconnected); the images are root's alone and counted in
# sizeBytes; what the sandbox plants at run/agent.log or run/agent.sock before the request does
# not lead the agent or the controller elsewhere; a networked workspace is refused, naming why.
# A create from the snapshot restores the counter in a new workspace (from the source's value,
# counting on, answering commands and file reads; the source counts on by itself), twice from
# one snapshot, and after the source was deleted; one whose images are gone is refused.
# shellcheck disable=SC2034 # read by container-lib.sh
CONTAINER_RUNTIME=runc
. "$(dirname "$0")/container-lib.sh"

CRIU_TRIXIE=${CRIU_TRIXIE:-$BUILD/criu-trixie}
CRIU=
CRIU_WHY="criu 4.1 could not be had"
rc=0
CRIU=$("$SRC/scripts/criu-trixie" "$CRIU_TRIXIE" 2>"${TMPDIR:-/tmp}/criu-trixie.$$.log" | tail -n 1) || rc=$?
[[ $rc -eq 0 && -x $CRIU ]] || {
	CRIU_WHY="scripts/criu-trixie: exit $rc: $(tail -n 1 "${TMPDIR:-/tmp}/criu-trixie.$$.log")"
	CRIU=
}
rm -f "${TMPDIR:-/tmp}/criu-trixie.$$.log"

if [[ -n $CRIU ]]; then
	require_container_controller --criu "$CRIU"
else
	require_container_controller
fi

_checkpoint_probed() {
	api -q GET /v1/ready
	local m
	m=$(j '.checks[] | select(.name == "checkpoint") | .message')
	[[ -n $m && $m != checking* ]]
}

# The host owner of a workspace's HOME: its uid range (ranges are 65536 apart).
home_owner() {
	stat -c %u "$ROOT/workspaces/$1/home"
}

COUNTER='i=0; while :; do i=$((i+1)); echo $i > $HOME/count; sleep 0.1; done'

_counted_past() {
	local n
	run_cmd "$1" 'cat $HOME/count' || return 1
	n=$(j .stdout | tr -d '\n')
	[[ -n $n && $n -gt $2 ]]
}

count_of() {
	run_cmd "$1" 'cat $HOME/count' >/dev/null || return 1
	j .stdout | tr -d '\n'
}

# the workspace runs a counter: a memory snapshot is 201 memory:true and the source counts on
t_memory_snapshot() {
	[[ -n $CRIU ]] || { skip "$1" "$CRIU_WHY"; return 2; }
	wait_for -t 60 _checkpoint_probed || { _fail "no checkpoint check"; return 1; }
	new_cws WS || return 1
	run_start "$WS" "$(json_cmd "$COUNTER")" || return 1
	wait_for -t 20 _counted_past "$WS" 5 || { _fail "the counter never counted"; return 1; }
	# a service (autostart false) running across the checkpoint's reconnect: the agent's first
	# reconnect after its start is no new agent (it was once taken for one: the service marked
	# stopped, "workspace restarted")
	api -q POST "/v1/workspaces/$WS/services" "$(jq -nc --arg c "$TICKER" '{name: "ticker", command: $c}')"
	assert_eq 201 "$STATUS" "start the ticker service: $(_short "$BODY")" || return 1
	wait_for -t 20 _ticked_past "$WS" 3 || { _fail "the ticker never ticked"; return 1; }
	api -q POST "/v1/workspaces/$WS/snapshots" '{"name":"mem","memory":true}'
	assert_eq 201 "$STATUS" "memory snapshot: $(_short "$BODY")" || {
		ls "$ROOT/checkpoints"/*/work/ 2>/dev/null
		return 1
	}
	SNAP=$(j .id)
	assert_eq true "$(j .memory)" "memory"
	local size n dir=$ROOT/checkpoints/$SNAP
	size=$(j .sizeBytes)
	# the images: root's alone, counted
	assert_eq "700 0" "$(stat -c '%a %u' "$ROOT/checkpoints")" "checkpoints dir"
	assert_eq "700 0" "$(stat -c '%a %u' "$dir")" "the snapshot's checkpoint dir"
	assert_eq "700 0" "$(stat -c '%a %u' "$dir/images")" "images dir"
	[[ -f $dir/images/inventory.img ]] || _fail "no inventory.img in $dir/images"
	local open
	open=$(find "$dir" -type f ! -perm 0600 | head -n 3)
	assert_eq "" "$open" "files not 0600"
	local img_bytes
	img_bytes=$(find "$dir/images" -type f -printf '%s\n' | awk '{s += $1} END {print s}')
	[[ $size -ge $img_bytes && $img_bytes -gt 0 ]] ||
		_fail "sizeBytes $size does not count the images' $img_bytes bytes"
	note "memory snapshot: sizeBytes $size, images $img_bytes bytes, pausedMs $(j .pausedMs)"
	# the source goes on: counts, answers commands, reads files
	n=$(count_of "$WS")
	wait_for -t 20 _counted_past "$WS" "$n" || _fail "the source stopped counting at $n"
	api -q GET "/v1/workspaces/$WS/files?path=/home/node/count"
	assert_eq 200 "$STATUS" "file read after the checkpoint: $(_short "$BODY")"
	api -q GET "/v1/workspaces/$WS/commands"
	assert_eq 200 "$STATUS" "commands"
	assert_eq running "$(j '[.commands[] | select(.status == "running")][0].status')" \
		"the counter's run is running still"
	api -q GET "/v1/workspaces/$WS/services/ticker"
	assert_eq "running 1 null" "$(j '"\(.state) \(.currentAttempt) \(.reason)"')" \
		"the ticker after the checkpoint's reconnect: $(_short "$BODY")"
	# nowhere inside: the workspace sees no checkpoints directory of the controller
	run_cmd "$WS" "ls /run/station; find / -xdev -name inventory.img 2>/dev/null | head -n 1"
	assert_eq "" "$(j .stdout | grep -c inventory.img | grep -v '^0$')" "images seen inside"
	# the log moved inside the container's run dir, mode 0600, root's of the container
	[[ -f $ROOT/workspaces/$WS/run/agent.log ]] || _fail "no run/agent.log"
	# deleted with the snapshot
	api -q DELETE "/v1/snapshots/$SNAP"
	assert_eq 204 "$STATUS" "delete: $(_short "$BODY")"
	[[ ! -e $dir ]] || _fail "$dir stays after its snapshot was deleted"
}

TICKER='i=0; while :; do i=$((i+1)); echo $i > $HOME/tick; sleep 0.1; done'

# tick_of WS: the service's counter file there
tick_of() {
	run_cmd "$1" 'cat $HOME/tick' >/dev/null || return 1
	j .stdout | tr -d '\n'
}

_ticked_past() {
	local n
	n=$(tick_of "$1") || return 1
	[[ -n $n && $n -gt $2 ]]
}

# _service_is WS NAME STATE: the service is listed in that state
_service_is() {
	api -q GET "/v1/workspaces/$1/services"
	[[ $(jq -r --arg n "$2" '[.services[] | select(.name == $n)][0].state' <<<"$BODY") == "$3" ]]
}

# a second memory snapshot of the same workspace (its agent listens itself now) works; the
# workspace's service (the ticker) is listed running before and after
t_memory_snapshot_again() {
	[[ -n $CRIU && -n ${WS:-} ]] || { skip "$1" "no workspace (see above)"; return 2; }
	wait_for -t 20 _service_is "$WS" ticker running || { _fail "the ticker is not running"; return 1; }
	# the count before the request: the dump is later (the count read after its answer may be
	# past the dump's on a loaded worker)
	SNAP2_AT=$(count_of "$WS")
	api -q POST "/v1/workspaces/$WS/snapshots" '{"memory":true}'
	assert_eq 201 "$STATUS" "second memory snapshot: $(_short "$BODY")"
	SNAP2=$(j .id)
	note "second memory snapshot $SNAP2 taken with the source at $SNAP2_AT or past"
	wait_for -t 20 _service_is "$WS" ticker running ||
		_fail "the source's ticker is not listed running after the checkpoint: $(_short "$BODY")"
	# recorded beside the images, root's alone
	assert_eq "600 0" "$(stat -c '%a %u' "$ROOT/checkpoints/$SNAP2/services.json")" "services.json"
	assert_eq ticker "$(jq -r '.[0].name' "$ROOT/checkpoints/$SNAP2/services.json")" "recorded"
}

# new_restored VAR SNAPSHOT: a workspace created from the memory snapshot (201, ready).
new_restored() {
	new_ws "$1" "$(jq -nc --arg s "$2" '{snapshot: $s}')"
}

# a create from the memory snapshot: the counter goes on in the new workspace from where the
# checkpoint found it and keeps counting; the agent answers commands and file reads there; the
# source counts on by itself (what one writes, the other does not see)
t_restore() {
	[[ -n $CRIU && -n ${SNAP2:-} ]] || { skip "$1" "no memory snapshot (see above)"; return 2; }
	local t0 n m
	t0=$(date +%s%N)
	new_restored WR "$SNAP2" || return 1
	note "restore: created in $((($(date +%s%N) - t0) / 1000000)) ms"
	assert_eq ready "$(j .state)" "the restored workspace's state"
	n=$(count_of "$WR")
	[[ -n $n && $n -ge $SNAP2_AT ]] || _fail "the restored count $n is below the source's $SNAP2_AT at the snapshot"
	wait_for -t 20 _counted_past "$WR" "$n" || _fail "the restored counter stays at $n"
	m=$(count_of "$WR")
	note "restored counter: $n then $m (the source was at $SNAP2_AT when checkpointed)"
	# processes of the checkpoint, in the new workspace's cgroup, the counter among them
	local procs
	procs=$(cgroup_dirs "$WR" | while read -r d; do cat "$d"/cgroup.procs "$d"/*/cgroup.procs 2>/dev/null; done | sort -u | wc -l)
	[[ $procs -gt 0 ]] || _fail "no process in the restored workspace's cgroups"
	run_cmd "$WR" 'echo restored; touch $HOME/only-restored'
	assert_eq 0 "$(j .exitCode)" "a command in the restored workspace: $(j .stderr)"
	assert_eq restored "$(j .stdout | head -n 1)" "its output"
	api -q GET "/v1/workspaces/$WR/files?path=/home/node/count"
	assert_eq 200 "$STATUS" "file read in the restored workspace: $(_short "$BODY")"
	# the source: counts on, sees nothing of the restored one's
	n=$(count_of "$WS")
	wait_for -t 20 _counted_past "$WS" "$n" || _fail "the source stopped counting at $n"
	run_cmd "$WS" 'test -e $HOME/only-restored && echo seen || echo unseen'
	assert_eq unseen "$(j .stdout | tr -d '\n')" "the restored workspace's file in the source"
	# stop the restored counter: the source's goes on
	# (busybox: no pkill; the counter's shell by its command line)
	run_cmd "$WR" 'ps -o pid,args | awk "/count; sleep/ && !/awk/ {print \$1}" | xargs kill
		sleep 0.5; cat $HOME/count'
	m=$(j .stdout | tr -d '\n')
	n=$(count_of "$WS")
	wait_for -t 20 _counted_past "$WS" "$n" || _fail "the source stopped with the restored counter"
	assert_eq "$m" "$(count_of "$WR")" "the restored counter, stopped"
}

# the source's service, carried over: listed running in the restored workspace (the agent's
# reports about it recorded, not ignored); a stop there stops its ticker, not the source's; its
# attempt recorded; restart and delete work on it
t_restore_service() {
	[[ -n $CRIU && -n ${WR:-} ]] || { skip "$1" "no restored workspace (see above)"; return 2; }
	local n m src_id
	api -q GET "/v1/workspaces/$WS/services/ticker"
	src_id=$(j .id)
	wait_for -t 20 _service_is "$WR" ticker running ||
		{ _fail "the ticker is not listed running in the restored workspace: $(_short "$BODY")"; return 1; }
	assert_eq "$WR" "$(j '.services[0].workspaceId')" "its workspace"
	[[ $(j '.services[0].id') != "$src_id" ]] || _fail "the restored row reuses the source's id $src_id"
	n=$(tick_of "$WR")
	wait_for -t 20 _ticked_past "$WR" "$n" || _fail "the restored ticker stays at $n"
	api -q POST "/v1/workspaces/$WR/services/ticker/stop"
	assert_eq 200 "$STATUS" "stop the restored ticker: $(_short "$BODY")"
	wait_for -t 20 _service_is "$WR" ticker stopped ||
		{ _fail "the restored ticker is not stopped: $(_short "$BODY")"; return 1; }
	m=$(tick_of "$WR")
	sleep 0.5 # ten ticks' time: a ticker still running would have moved
	assert_eq "$m" "$(tick_of "$WR")" "the restored ticker's file after its stop"
	n=$(tick_of "$WS")
	wait_for -t 20 _ticked_past "$WS" "$n" || _fail "the source's ticker stopped with the restored one"
	assert_eq running "$(api -q GET "/v1/workspaces/$WS/services/ticker"; j .state)" "the source's"
	# the stopped attempt is the restored workspace's
	api -q GET "/v1/workspaces/$WR/services/ticker"
	assert_eq stopped "$(j '.attempts[-1].endReason')" "its last attempt: $(_short "$BODY")"
	# restart (the whole definition again: the agent knows it by the new row's id now) and delete
	api -q POST "/v1/workspaces/$WR/services/ticker/restart"
	assert_eq 200 "$STATUS" "restart: $(_short "$BODY")"
	m=$(tick_of "$WR")
	wait_for -t 20 _service_is "$WR" ticker running || _fail "not running after the restart: $(_short "$BODY")"
	wait_for -t 20 _ticked_past "$WR" "$m" || _fail "the restarted ticker stays at $m"
	api -q DELETE "/v1/workspaces/$WR/services/ticker"
	assert_eq 200 "$STATUS" "delete: $(_short "$BODY")"
	api -q GET "/v1/workspaces/$WR/services"
	assert_eq 0 "$(j '.services | length')" "services left"
	m=$(tick_of "$WR")
	sleep 0.5
	assert_eq "$m" "$(tick_of "$WR")" "the deleted ticker's file"
}

# two workspaces from one memory snapshot: both count, each by itself
t_restore_two() {
	[[ -n $CRIU && -n ${SNAP2:-} ]] || { skip "$1" "no memory snapshot (see above)"; return 2; }
	new_restored WA "$SNAP2" || return 1
	new_restored WB "$SNAP2" || return 1
	local a b
	a=$(count_of "$WA")
	b=$(count_of "$WB")
	wait_for -t 20 _counted_past "$WA" "$a" || _fail "the first copy stays at $a"
	wait_for -t 20 _counted_past "$WB" "$b" || _fail "the second copy stays at $b"
	run_cmd "$WA" 'echo a > $HOME/which'
	run_cmd "$WB" 'cat $HOME/which 2>/dev/null || echo none'
	assert_eq none "$(j .stdout | tr -d '\n')" "the first copy's file in the second"
}

# the source deleted: its memory snapshot restores on this controller still
t_restore_source_deleted() {
	[[ -n $CRIU && -n ${SNAP2:-} ]] || { skip "$1" "no memory snapshot (see above)"; return 2; }
	api -q DELETE "/v1/workspaces/$WS"
	assert_eq 200 "$STATUS" "delete the source: $(_short "$BODY")"
	new_restored WD "$SNAP2" || return 1
	local n
	n=$(count_of "$WD")
	wait_for -t 20 _counted_past "$WD" "$n" || _fail "the counter restored after the source's delete stays at $n"
	run_cmd "$WD" 'echo ok'
	assert_eq ok "$(j .stdout | tr -d '\n')" "a command there" || return 1
	RANGE=$(home_owner "$WD") # the source's, kept by its restores (t_range_reserved)
}

# the recorded services are read back as input: a record that is not what the controller
# writes (a name with a slash, an id the agent protocol refuses, a list that is not one) fails
# the create naming the snapshot and the record, nothing made; put back, the create works
t_restore_services_malformed() {
	[[ -n $CRIU && -n ${SNAP2:-} ]] || { skip "$1" "no memory snapshot (see above)"; return 2; }
	local f=$ROOT/checkpoints/$SNAP2/services.json before after bad
	cp -p "$f" "$TMP/services.json"
	api -q GET /v1/workspaces
	before=$(j '.workspaces | length')
	for bad in '.[0].name = "../x"' '.[0].agentId = "svc x"' '.[0].stopSignal = -1' \
		'.[0].env = {"A=B": "c"}' '.[0].command = 7' '{}'; do
		jq -c "$bad" "$TMP/services.json" >"$f"
		api -q POST /v1/workspaces "$(jq -nc --arg s "$SNAP2" '{snapshot: $s}')"
		assert_eq 500 "$STATUS" "create with services.json $bad: $(_short "$BODY")"
		assert_contains "snapshot \"$SNAP2\": its checkpoint's services.json: the checkpoint's" \
			"$(j .error.message)" "message ($bad)"
	done
	api -q GET /v1/workspaces
	after=$(j '.workspaces | length')
	assert_eq "$before" "$after" "workspaces before and after the refusals"
	# positive control: the file as written
	cp -p "$TMP/services.json" "$f"
	new_restored WM "$SNAP2" || return 1
	wait_for -t 20 _service_is "$WM" ticker running || _fail "not carried once put back: $(_short "$BODY")"
	api -q DELETE "/v1/workspaces/$WM"
}

# a memory snapshot whose images are gone: refused naming it; nothing made (no workspace, no
# cgroup)
t_restore_images_missing() {
	[[ -n $CRIU && -n ${SNAP2:-} ]] || { skip "$1" "no memory snapshot (see above)"; return 2; }
	local before after
	api -q GET /v1/workspaces
	before=$(j '.workspaces | length')
	rm -rf "$ROOT/checkpoints/$SNAP2/images"
	api -q POST /v1/workspaces "$(jq -nc --arg s "$SNAP2" '{snapshot: $s}')"
	assert_eq 500 "$STATUS" "create from a snapshot without its images: $(_short "$BODY")"
	assert_contains "its checkpoint" "$(j .error.message)" "message"
	assert_contains "$SNAP2" "$(j .error.message)" "names the snapshot"
	api -q GET /v1/workspaces
	after=$(j '.workspaces | length')
	assert_eq "$before" "$after" "workspaces before and after the refusal"
	# the snapshot goes once no workspace made from it is left
	local w
	for w in "${WR:-}" "${WA:-}" "${WB:-}" "${WD:-}"; do
		[[ -n $w ]] && api -q DELETE "/v1/workspaces/$w"
	done
	api -q DELETE "/v1/snapshots/$SNAP2"
	assert_eq 204 "$STATUS" "delete the snapshot: $(_short "$BODY")"
}

# the sandbox (container root) plants a symlink at run/agent.log and a FIFO at run/agent.sock
# (and the reverse in a second workspace): the agent neither follows nor blocks, the controller
# never trusts a socket it did not or the agent did not make
t_planted() {
	[[ -n $CRIU ]] || { skip "$1" "$CRIU_WHY"; return 2; }
	new_cws WP || return 1
	local victim=$TMP/victim
	echo untouched >"$victim"
	# run/ is container root's: what a root process inside may do there
	run_cmd "$WP" "ln -s /etc/passwd /run/station/agent.log && ls -l /run/station/agent.log"
	assert_eq 0 "$(j .exitCode)" "planting a symlink: $(j .stderr)"
	api -q POST "/v1/workspaces/$WP/snapshots" '{"memory":true}'
	assert_eq 409 "$STATUS" "memory snapshot with a symlink at agent.log: $(_short "$BODY")"
	assert_contains "agent.log in the run directory" "$(j .error.message)" "names the log"
	run_cmd "$WP" 'cat /etc/passwd | head -n 1'
	assert_eq 0 "$(j .exitCode)" "the workspace answers after the refusal"
	# a FIFO there: refused too, the agent not blocked
	run_cmd "$WP" "rm /run/station/agent.log && mkfifo /run/station/agent.log"
	api -q POST "/v1/workspaces/$WP/snapshots" '{"memory":true}'
	assert_eq 409 "$STATUS" "memory snapshot with a FIFO at agent.log: $(_short "$BODY")"
	run_cmd "$WP" 'echo alive'
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "the agent answers after the FIFO"
	# positive control: the plants gone, a FIFO at agent.sock is replaced, not followed
	run_cmd "$WP" "rm /run/station/agent.log && rm -f /run/station/agent.sock && mkfifo /run/station/agent.sock"
	api -q POST "/v1/workspaces/$WP/snapshots" '{"memory":true}'
	assert_eq 201 "$STATUS" "memory snapshot once the log is free: $(_short "$BODY")"
	run_cmd "$WP" 'echo alive'
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "the agent answers on its own socket"
	assert_eq "untouched" "$(cat "$victim")" "host file"
	[[ -S $ROOT/workspaces/$WP/run/agent.sock ]] || _fail "run/agent.sock is not a socket"
	api -q DELETE "/v1/snapshots/$(j .id)" >/dev/null 2>&1 || true
}

# a terminal (pty) open at the checkpoint: criu carries the pty pair (both ends are the
# container's: the agent's master, the command's slave on the container's devpts), so the
# snapshot is taken and restores; the source's terminal runs on; in the restored workspace the
# terminal's command runs on, unlisted (terminal rows are not carried over)
t_terminal() {
	[[ -n $CRIU ]] || { skip "$1" "$CRIU_WHY"; return 2; }
	new_cws WT || return 1
	local t s mark=1000.$$
	api -q POST "/v1/workspaces/$WT/terminals" "$(jq -nc --arg c "sleep $mark" '{command: $c, cols: 80, rows: 24}')"
	assert_eq 201 "$STATUS" "open a terminal: $(_short "$BODY")" || return 1
	t=$(j .id)
	api -q POST "/v1/workspaces/$WT/snapshots" '{"memory":true}'
	assert_eq 201 "$STATUS" "memory snapshot with a terminal open: $(_short "$BODY")" || return 1
	s=$(j .id)
	api -q GET "/v1/workspaces/$WT/terminals/$t"
	assert_eq running "$(j .state)" "the source's terminal after the checkpoint"
	new_restored WTR "$s" || return 1
	run_cmd "$WTR" "ps -o args | grep -c '^sleep $mark\$'"
	assert_eq 1 "$(j .stdout | tr -d '\n')" "the terminal's command in the restored workspace"
	api -q GET "/v1/workspaces/$WTR/terminals"
	assert_eq 0 "$(j '.terminals | length')" "terminals listed in the restored workspace"
	api -q DELETE "/v1/workspaces/$WTR"
	api -q DELETE "/v1/workspaces/$WT"
	api -q DELETE "/v1/snapshots/$s"
}

# a workspace with a network: refused, naming why
t_network_refused() {
	[[ -n $CRIU ]] || { skip "$1" "$CRIU_WHY"; return 2; }
	api -q GET /v1/ready
	if [[ $(j '.checks[] | select(.name == "network") | .ok') != true ]]; then
		skip "$1" "this worker has no networking: $(j '.checks[] | select(.name == "network") | .message')"
		return 2
	fi
	new_cws WN '{"network":"bridge"}' || return 1
	api -q POST "/v1/workspaces/$WN/snapshots" '{"memory":true}'
	assert_eq 501 "$STATUS" "memory snapshot of a bridged workspace: $(_short "$BODY")"
	assert_contains 'network "none" only' "$(j .error.message)" "message"
}

# A memory snapshot keeps its source's uid range for its restores: with the source and every
# restore gone, a new workspace gets another range while the snapshots last, and that one once
# they are deleted (the control: the lowest free range is handed out).
t_range_reserved() {
	[[ -n $CRIU && -n ${RANGE:-} ]] || { skip "$1" "no memory snapshot restored (see above)"; return 2; }
	local range=$RANGE id ws
	api -q GET /v1/workspaces
	for id in $(j '.workspaces[].id'); do
		[[ $(home_owner "$id" 2>/dev/null) == "$range" ]] || continue
		api -q DELETE "/v1/workspaces/$id"
		assert_eq 200 "$STATUS" "delete $id: $(_short "$BODY")" || return 1
	done
	new_cws ws || return 1
	[[ $(home_owner "$ws") != "$range" ]] || _fail "a new workspace got the memory snapshots' range $range" || return 1
	api -q DELETE "/v1/workspaces/$ws"
	api -q GET /v1/snapshots
	for id in $(j '.snapshots[] | select(.memory) | .id'); do
		api -q DELETE "/v1/snapshots/$id"
		assert_eq 204 "$STATUS" "delete $id: $(_short "$BODY")" || return 1
	done
	new_cws ws || return 1
	assert_eq "$range" "$(home_owner "$ws")" "the range is handed out once no snapshot holds it"
}

run_or_skip memory-snapshot-of-a-counting-workspace t_memory_snapshot
run_or_skip memory-snapshot-again t_memory_snapshot_again
run_or_skip restore-counter-goes-on t_restore
run_or_skip restore-carries-services t_restore_service
run_or_skip terminal-at-checkpoint t_terminal
run_or_skip restore-two-from-one-snapshot t_restore_two
run_or_skip restore-after-source-deleted t_restore_source_deleted
run_or_skip restore-services-malformed-refused t_restore_services_malformed
run_or_skip restore-images-missing-refused t_restore_images_missing
run_or_skip planted-log-and-socket-not-followed t_planted
run_or_skip range-kept-for-restores t_range_reserved
run_or_skip network-workspace-refused t_network_refused
