#!/bin/bash
# A HOME size limit (--home-size-mb, docs/operations.md): HOME of a container workspace is an
# ext4 image of that size, loop-mounted nosuid,nodev while the workspace runs. Filling it is
# ENOSPC inside the sandbox only: /tmp still takes the same bytes, the workspace and the worker
# stay healthy, HOME persists across a restart and a controller restart, and delete leaves no
# mount nor loop device. Control: a workspace of a worker without the option writes the same
# 32 MiB into HOME.
. "$(dirname "$0")/../integration/container-lib.sh"

command -v mke2fs >/dev/null || _container_skip_all "mke2fs missing (apt-get install e2fsprogs)"
require_container_controller --home-size-mb 16

WRITE_32M='dd if=/dev/zero of="$HOME/big" bs=1M count=32 2>&1; echo "rc=$?"'

# home_mount ID: the mountinfo line of the workspace's HOME mount (empty when none).
home_mount() {
	awk -v d="/workspaces/$1/home" '$5 ~ d"$"' /proc/self/mountinfo
}

# loops_of ID: loop devices backed by the workspace's image.
loops_of() {
	losetup -a 2>/dev/null | grep -F -- "/workspaces/$1/" || true
}

no_loops() {
	[[ -z $(loops_of "$1") ]]
}

t_home_full() {
	new_cws LIM || return 1
	assert_eq 16 "$(j .homeSizeMb)" "homeSizeMb in the workspace JSON"
	local line
	line=$(home_mount "$LIM")
	assert_match ' - ext4 /dev/loop[0-9]+ ' "$line" "HOME mount" || return 1
	assert_match '(^| )[^ ]*nosuid' "$line" "HOME mount is nosuid"
	assert_match '(^| )[^ ]*nodev' "$line" "HOME mount is nodev"
	run_cmd "$LIM" 'echo kept >"$HOME/keep" && ls -d "$HOME/workspace" && pwd' || return 1
	assert_eq 0 "$(j .exitCode)" "write a small file: $(j .stderr)"
	run_cmd "$LIM" "$WRITE_32M" '.timeoutMs = 60000' || return 1
	note "32 MiB into a 16 MiB HOME: $(j .stdout | tr '\n' ' ')"
	assert_contains "No space left on device" "$(j .stdout)" "dd's error"
	assert_match "^rc=[1-9]" "$(j .stdout | grep "^rc=")" "dd's exit status"
	# /tmp takes the same bytes
	run_cmd "$LIM" 'dd if=/dev/zero of=/tmp/big bs=1M count=32 2>/dev/null; echo "rc=$?"; rm -f /tmp/big' ||
		return 1
	assert_eq rc=0 "$(j .stdout | tr -d '\n')" "32 MiB into /tmp"
	# the workspace recovers once the file is gone, the worker is fine
	run_cmd "$LIM" 'rm -f "$HOME/big" && echo again >"$HOME/small" && cat "$HOME/small"' || return 1
	assert_eq again "$(j .stdout | tr -d '\n')" "HOME after freeing it"
	api -q GET "/v1/workspaces/$LIM"
	assert_eq ready "$(j .state)" "workspace state"
	api -q GET /v1/ready
	assert_status 200 "worker ready"
	assert_eq true "$(j '.checks[] | select(.name == "homeSize") | .ok')" "ready's homeSize check"
	assert_eq 16 "$(api -q GET /v1/worker; j .limits.homeSizeMb)" "worker's homeSizeMb"
}

t_restarts() {
	api -q POST "/v1/workspaces/$LIM/restart"
	assert_status 200 restart || return 1
	assert_match ' - ext4 ' "$(home_mount "$LIM")" "HOME mounted after the restart"
	assert_eq 1 "$(home_mount "$LIM" | wc -l)" "HOME mounts after the restart"
	run_cmd "$LIM" 'cat "$HOME/keep"' || return 1
	assert_eq kept "$(j .stdout | tr -d '\n')" "HOME kept across the restart"
	stop_controller
	restart_controller || return 1
	assert_eq 1 "$(home_mount "$LIM" | wc -l)" "HOME mounts after a controller restart"
	run_cmd "$LIM" "$WRITE_32M" '.timeoutMs = 60000' || return 1
	assert_contains "No space left on device" "$(j .stdout)" "still limited"
	run_cmd "$LIM" 'rm -f "$HOME/big"' || return 1
}

t_delete_leaves_nothing() {
	api -q DELETE "/v1/workspaces/$LIM"
	assert_status 200 delete || return 1
	assert_eq "" "$(home_mount "$LIM")" "HOME mount after delete"
	wait_for -t 10 no_loops "$LIM" || _fail "loop devices left: $(loops_of "$LIM")"
	wait_for -t 10 ws_clean "$LIM" || _fail "leftovers: $(ws_leftovers "$LIM")"
}

# Control: the same write succeeds on a worker without --home-size-mb.
t_control_no_limit() {
	delete_all_ws
	stop_controller
	start_container_controller || return 1
	local ws
	new_cws ws || return 1
	assert_eq null "$(j .homeSizeMb)" "homeSizeMb in the workspace JSON"
	assert_eq "" "$(home_mount "$ws")" "no HOME mount"
	run_cmd "$ws" "$WRITE_32M" '.timeoutMs = 60000' || return 1
	assert_eq rc=0 "$(j .stdout | grep "^rc=")" "32 MiB into HOME: $(j .stdout)"
}

delete_all_ws() {
	local id
	for id in "${WORKSPACES[@]}"; do
		api -q DELETE "/v1/workspaces/$id"
	done
}

run_test "32 MiB into a 16 MiB HOME is ENOSPC; /tmp and the workspace stay fine" t_home_full
run_test "HOME stays limited and kept across restart and controller restart" t_restarts
run_test "delete leaves no HOME mount nor loop device" t_delete_leaves_nothing
run_test "control: without --home-size-mb the same 32 MiB write succeeds" t_control_no_limit
