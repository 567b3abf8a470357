#!/bin/bash
# run-all: serial: checkpoints real workspaces with CRIU (seconds of a whole core each); fetches Debian 13's criu the first time
# Memory snapshots (docs/operations.md "Memory snapshots"), through the controller with Debian
# 13's criu (scripts/criu-trixie, cached in CRIU_TRIXIE): a workspace running a counter is
# checkpointed with its processes and runs on (its agent lets go of the controller's log,
# listener and connection, and is reconnected); the images are root's alone and counted in
# sizeBytes; what the sandbox plants at run/agent.log or run/agent.sock before the request does
# not lead the agent or the controller elsewhere; a networked workspace and a create from the
# snapshot are refused, naming why.
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
	api POST "/v1/workspaces/$WS/snapshots" '{"name":"mem","memory":true}'
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
	api GET "/v1/workspaces/$WS/files?path=/home/node/count"
	assert_eq 200 "$STATUS" "file read after the checkpoint: $(_short "$BODY")"
	api GET "/v1/workspaces/$WS/commands"
	assert_eq 200 "$STATUS" "commands"
	assert_eq running "$(j '[.commands[] | select(.status == "running")][0].status')" \
		"the counter's run is running still"
	# nowhere inside: the workspace sees no checkpoints directory of the controller
	run_cmd "$WS" "ls /run/station; find / -xdev -name inventory.img 2>/dev/null | head -n 1"
	assert_eq "" "$(j .stdout | grep -c inventory.img | grep -v '^0$')" "images seen inside"
	# the log moved inside the container's run dir, mode 0600, root's of the container
	[[ -f $ROOT/workspaces/$WS/run/agent.log ]] || _fail "no run/agent.log"
	# deleted with the snapshot
	api DELETE "/v1/snapshots/$SNAP"
	assert_eq 204 "$STATUS" "delete: $(_short "$BODY")"
	[[ ! -e $dir ]] || _fail "$dir stays after its snapshot was deleted"
}

# a second memory snapshot of the same workspace (its agent listens itself now) works
t_memory_snapshot_again() {
	[[ -n $CRIU && -n ${WS:-} ]] || { skip "$1" "no workspace (see above)"; return 2; }
	api POST "/v1/workspaces/$WS/snapshots" '{"memory":true}'
	assert_eq 201 "$STATUS" "second memory snapshot: $(_short "$BODY")"
	SNAP2=$(j .id)
	# a create from it: refused, naming why
	api POST /v1/workspaces "$(jq -nc --arg s "$SNAP2" '{snapshot: $s}')"
	assert_eq 501 "$STATUS" "create from a memory snapshot: $(_short "$BODY")"
	assert_contains "restoring them into a new workspace is not built yet" "$(j .error.message)" "message"
	api DELETE "/v1/snapshots/$SNAP2"
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
	api POST "/v1/workspaces/$WP/snapshots" '{"memory":true}'
	assert_eq 409 "$STATUS" "memory snapshot with a symlink at agent.log: $(_short "$BODY")"
	assert_contains "agent.log in the run directory" "$(j .error.message)" "names the log"
	run_cmd "$WP" 'cat /etc/passwd | head -n 1'
	assert_eq 0 "$(j .exitCode)" "the workspace answers after the refusal"
	# a FIFO there: refused too, the agent not blocked
	run_cmd "$WP" "rm /run/station/agent.log && mkfifo /run/station/agent.log"
	api POST "/v1/workspaces/$WP/snapshots" '{"memory":true}'
	assert_eq 409 "$STATUS" "memory snapshot with a FIFO at agent.log: $(_short "$BODY")"
	run_cmd "$WP" 'echo alive'
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "the agent answers after the FIFO"
	# positive control: the plants gone, a FIFO at agent.sock is replaced, not followed
	run_cmd "$WP" "rm /run/station/agent.log && rm -f /run/station/agent.sock && mkfifo /run/station/agent.sock"
	api POST "/v1/workspaces/$WP/snapshots" '{"memory":true}'
	assert_eq 201 "$STATUS" "memory snapshot once the log is free: $(_short "$BODY")"
	run_cmd "$WP" 'echo alive'
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "the agent answers on its own socket"
	assert_eq "untouched" "$(cat "$victim")" "host file"
	[[ -S $ROOT/workspaces/$WP/run/agent.sock ]] || _fail "run/agent.sock is not a socket"
	api DELETE "/v1/snapshots/$(j .id)" >/dev/null 2>&1 || true
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
	api POST "/v1/workspaces/$WN/snapshots" '{"memory":true}'
	assert_eq 501 "$STATUS" "memory snapshot of a bridged workspace: $(_short "$BODY")"
	assert_contains 'network "none" only' "$(j .error.message)" "message"
}

run_or_skip memory-snapshot-of-a-counting-workspace t_memory_snapshot
run_or_skip memory-snapshot-again-create-refused t_memory_snapshot_again
run_or_skip planted-log-and-socket-not-followed t_planted
run_or_skip network-workspace-refused t_network_refused
