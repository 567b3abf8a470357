#!/bin/bash
# run-all: serial: compares nproc and /proc/uptime inside with the host's CPU count and uptime, and stops this script's lxcfs on purpose
# The view inside a container workspace (issue 14 item 4, docs/operations.md "The view
# inside"): with cpus and memoryMb set, nproc, /proc/cpuinfo, /proc/stat,
# /sys/devices/system/cpu/online, /proc/meminfo, free and /proc/uptime tell the workspace's
# limits and its own uptime, through the controller's own lxcfs; a workspace without limits is
# the positive control (the host's numbers). lxcfs's files are read-only inside; a killed lxcfs
# is started again and the workspaces started under it say so; a stopped (hung) lxcfs wedges
# neither the controller nor a cancel of the reader; --lxcfs off gives the host's view and
# ready says why. node's os.cpus() in the tools image agrees.
. "$(dirname "$0")/container-lib.sh"

EXTRA_APPLETS+=(free cat wc)
HOST_CPUS=$(nproc)
HOST_MEM_KB=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)

command -v lxcfs >/dev/null || _container_skip_all "lxcfs not installed (apt-get install lxcfs)"
[[ -c /dev/fuse ]] || _container_skip_all "/dev/fuse missing"
((HOST_CPUS >= 2)) || _container_skip_all "one CPU here: cpus 1 would look like the host"

# The workspaces have no memory limit unless they name one: the control sees the host's.
TOOLS_IMAGE=${TOOLS_IMAGE:-$SRC/build/tools-image}
require_container_controller --default-memory-mb 0 --import-dir "$TOOLS_IMAGE"

lxcfs_check() {
	api -q GET /v1/ready
	[[ $(j '.checks[] | select(.name == "lxcfs") | .ok') == true ]]
}

lxcfs_pid() {
	cat "$ROOT/lxcfs.pid" 2>/dev/null
}

t_ready_names_lxcfs() {
	wait_for -t 20 lxcfs_check || {
		_fail "the lxcfs check never became ok: $(j '.checks[] | select(.name == "lxcfs")')"
		return 1
	}
	assert_contains "$ROOT/lxcfs" "$(j '.checks[] | select(.name == "lxcfs") | .message')" message
	assert_match '^[0-9]+$' "$(lxcfs_pid)" "lxcfs pid file"
	assert_eq lxcfs "$(basename "$(readlink "/proc/$(lxcfs_pid)/exe")")" "the pid is lxcfs"
}

run_test "ready names lxcfs" t_ready_names_lxcfs

new_cws ONE '{"cpus":1,"memoryMb":96}' || exit 1
new_cws FREE || exit 1

# out WS COMMAND: the command's stdout (trimmed) in OUT; fails unless it exited 0.
OUT=
out() {
	OUT=
	run_cmd "$1" "$2" '.timeoutMs = 30000' || return 1
	if [[ $(j .status) != exited || $(j .exitCode) != 0 ]]; then
		_fail "$2: $(j '{status, exitCode, stderr}')"
		return 1
	fi
	OUT=$(j .stdout | sed -e 's/[[:space:]]*$//')
}

t_workspace_says_its_view() {
	api -q GET "/v1/workspaces/$ONE"
	assert_eq lxcfs "$(j .procView)" "procView (cpus 1)"
	assert_match '^[0-9]+$' "$(j .cpuset)" "cpuset: one CPU"
	api -q GET "/v1/workspaces/$FREE"
	assert_eq lxcfs "$(j .procView)" "procView (no limits)"
	assert_eq null "$(j .cpuset)" "no cpuset without cpus"
}

t_nproc() {
	out "$ONE" nproc || return 1
	assert_eq 1 "$OUT" "nproc with cpus 1"
	out "$FREE" nproc || return 1
	assert_eq "$HOST_CPUS" "$OUT" "nproc without cpus (the host's)"
}

t_cpu_files() {
	out "$ONE" 'grep -c ^processor /proc/cpuinfo; grep -c "^cpu[0-9]" /proc/stat; cat /sys/devices/system/cpu/online' || return 1
	local lines
	mapfile -t lines <<<"$OUT"
	assert_eq 1 "${lines[0]}" "processors in /proc/cpuinfo"
	assert_eq 1 "${lines[1]}" "cpuN lines in /proc/stat"
	assert_match '^[0-9]+$' "${lines[2]}" "/sys/devices/system/cpu/online: one CPU"
	out "$FREE" 'grep -c ^processor /proc/cpuinfo; grep -c "^cpu[0-9]" /proc/stat' || return 1
	mapfile -t lines <<<"$OUT"
	assert_eq "$HOST_CPUS" "${lines[0]}" "processors in /proc/cpuinfo (no cpus)"
	assert_eq "$HOST_CPUS" "${lines[1]}" "cpuN lines in /proc/stat (no cpus)"
}

t_memory() {
	out "$ONE" "awk '/^MemTotal:/ {print \$2}' /proc/meminfo; free -m | awk '/^Mem:/ {print \$2}'" || return 1
	local lines
	mapfile -t lines <<<"$OUT"
	assert_eq $((96 * 1024)) "${lines[0]}" "MemTotal kB with memoryMb 96"
	# busybox's free asks sysinfo(2), which no file changes (procps's free and node read
	# /proc/meminfo): it tells the host's total, documented in docs/operations.md
	note "busybox free -m total with memoryMb 96: ${lines[1]} (sysinfo(2): the host's)"
	out "$FREE" "awk '/^MemTotal:/ {print \$2}' /proc/meminfo" || return 1
	assert_eq "$HOST_MEM_KB" "$OUT" "MemTotal kB without a limit (the host's)"
}

t_uptime() {
	out "$ONE" 'cat /proc/uptime' || return 1
	local inside=${OUT%%.*} host
	host=$(cut -d. -f1 /proc/uptime)
	note "uptime inside $inside s, host $host s"
	assert_match '^[0-9]+$' "$inside" "uptime inside" || return 1
	((inside < host)) || _fail "uptime inside ($inside s) not below the host's ($host s)"
	# a workspace is minutes old at most; the host of a test run is not
	assert_le "$inside" 600 "uptime inside (seconds since the container started)"
}

run_test "the workspace says which view it got" t_workspace_says_its_view
run_test "nproc: 1 with cpus 1, the host's count without" t_nproc
run_test "cpuinfo, stat and cpu/online: one CPU with cpus 1" t_cpu_files
run_test "meminfo: memoryMb, the host's without" t_memory
run_test "uptime: the container's own" t_uptime

# lxcfs's files are bound read-only: container root can neither write them nor remount them
# writable; the positive control writes a file of its own under /tmp.
t_read_only() {
	run_cmd "$ONE" 'echo x >/proc/meminfo; echo "write=$?"; mount -o remount,rw /proc/meminfo; echo "remount=$?"; echo y >/tmp/own && echo own=ok; grep " /proc/meminfo " /proc/self/mountinfo' || return 1
	local o
	o=$(j .stdout)
	assert_match 'write=[1-9]' "$o" "write to /proc/meminfo refused"
	assert_match 'remount=[1-9]' "$o" "remount rw refused"
	assert_contains 'own=ok' "$o" "positive control: a write to /tmp"
	assert_match ' /proc/meminfo ro,nosuid,nodev,noexec' "$o" "mount options inside"
	out "$ONE" "awk '/^MemTotal:/ {print \$2}' /proc/meminfo" || return 1
	assert_eq $((96 * 1024)) "$OUT" "MemTotal unchanged"
}

run_test "lxcfs files are read-only inside" t_read_only

# lxcfs serves the host's cgroup tree (with rmdir) beside its proc files: the controller covers
# it, so that an rm -rf of the root while lxcfs is mounted cannot remove the host's empty
# cgroups. The positive control: the proc files beside it are served.
t_cgroup_tree_covered() {
	# (covered by lxcfs's probe child, started as soon as lxcfs serves)
	wait_for -t 20 bash -c "findmnt -n -o FSTYPE '$ROOT/lxcfs/cgroup' | grep -qx tmpfs"
	assert_eq "" "$(ls -A "$ROOT/lxcfs/cgroup" 2>&1)" "nothing under ROOT/lxcfs/cgroup"
	assert_eq tmpfs "$(findmnt -n -o FSTYPE "$ROOT/lxcfs/cgroup")" "a tmpfs over it"
	assert_match '^MemTotal:' "$(head -n 1 "$ROOT/lxcfs/proc/meminfo")" "proc/meminfo served"
	mkdir "$ROOT/lxcfs/cgroup/x" 2>/dev/null && _fail "a directory was made in the cover"
	return 0
}
run_test "lxcfs's cgroup tree is covered on the host" t_cgroup_tree_covered

lxcfs_hung() {
	api -q GET /v1/ready
	[[ $(j '.checks[] | select(.name == "lxcfs") | .ok') == false ]]
}

# A hung lxcfs (stopped) wedges neither the controller nor a cancel: a reader inside blocks,
# GET /v1/ready and the workspace list answer, the reader's run is cancelled; the controller's
# probe (a child reading a file) finds it hung, ready says so and a workspace created meanwhile
# gets the host's view instead of a start that hangs; once lxcfs resumes, all is back.
t_hung_lxcfs() {
	local pid
	pid=$(lxcfs_pid)
	assert_match '^[0-9]+$' "$pid" "lxcfs pid" || return 1
	kill -STOP "$pid"
	run_start "$ONE" "$(json_cmd 'cat /proc/meminfo >/dev/null; echo read' '.timeoutMs = 120000')" || {
		kill -CONT "$pid"
		return 1
	}
	local reader=$RUN
	api -q GET /v1/ready
	assert_eq 200 "$STATUS" "GET /v1/ready while lxcfs hangs"
	api -q GET /v1/workspaces
	assert_eq 200 "$STATUS" "GET /v1/workspaces while lxcfs hangs"
	run_get "$ONE" "$reader" 500
	assert_eq running "$(j .status)" "the reader blocks"
	api -q POST "/v1/workspaces/$ONE/commands/$reader/cancel"
	run_wait "$ONE" "$reader" 60
	assert_eq cancelled "$(j .status)" "the reader is cancelled while lxcfs hangs"
	if wait_for -t 60 lxcfs_hung; then
		assert_contains "does not answer" "$(j '.checks[] | select(.name == "lxcfs") | .message')" "ready says lxcfs hangs"
		assert_eq 200 "$STATUS" "ready stays 200 (lxcfs never decides it)"
		local during
		new_cws during '{"cpus":1}' && {
			api -q GET "/v1/workspaces/$during"
			assert_eq host "$(j .procView)" "procView of a workspace created while lxcfs hangs"
			api -q DELETE "/v1/workspaces/$during"
		}
	else
		_fail "the lxcfs check stayed ok while lxcfs was stopped"
	fi
	kill -CONT "$pid"
	wait_for -t 60 lxcfs_check || _fail "the lxcfs check did not come back after SIGCONT"
	out "$ONE" nproc || return 1
	assert_eq 1 "$OUT" "nproc after lxcfs resumed"
}

run_test "a hung lxcfs wedges neither the controller nor a cancel" t_hung_lxcfs

lxcfs_pid_is() {
	[[ $(lxcfs_pid) == "$1" ]] && lxcfs_check
}

# The controller stops while containers run: its lxcfs keeps serving them, and the next
# controller on the root adopts it (the same pid).
t_controller_restart() {
	local old
	old=$(lxcfs_pid)
	stop_controller TERM
	assert_eq 0 "$CONTROLLER_EXIT" "controller exit status"
	kill -0 "$old" 2>/dev/null || _fail "lxcfs $old did not outlive the controller"
	restart_controller || return 1
	wait_for -t 20 lxcfs_pid_is "$old" || _fail "lxcfs not adopted: pid $(lxcfs_pid), was $old"
	api -q GET "/v1/workspaces/$ONE"
	assert_eq lxcfs "$(j .procView)" "procView after the controller restart"
	out "$ONE" nproc || return 1
	assert_eq 1 "$OUT" "nproc after the controller restart"
}

run_test "lxcfs outlives the controller and is adopted by the next one" t_controller_restart

lxcfs_restarted() {
	local p
	p=$(lxcfs_pid)
	[[ -n $p && $p != "$1" ]] && lxcfs_check
}

# lxcfs killed: the controller starts it again; a workspace started under the dead one says
# "lxcfs-lost" (its binds are dead until it restarts), a restart brings its view back.
t_lxcfs_restart() {
	local old
	old=$(lxcfs_pid)
	kill -KILL "$old"
	wait_for -t 30 lxcfs_restarted "$old" || {
		_fail "lxcfs not started again: $(j '.checks[] | select(.name == "lxcfs")')"
		return 1
	}
	assert_contains "restarted" "$(j '.checks[] | select(.name == "lxcfs") | .message')" "ready says it restarted"
	api -q GET "/v1/workspaces/$ONE"
	assert_eq lxcfs-lost "$(j .procView)" "procView of a workspace started under the dead lxcfs"
	api -q POST "/v1/workspaces/$ONE/restart"
	assert_status 200 "restart" || return 1
	assert_eq lxcfs "$(j .procView)" "procView after the restart"
	out "$ONE" "nproc; awk '/^MemTotal:/ {print \$2}' /proc/meminfo" || return 1
	assert_eq "1 $((96 * 1024))" "$(tr '\n' ' ' <<<"$OUT" | sed 's/ $//')" "nproc and MemTotal after the restart"
}

run_test "a killed lxcfs is started again; the workspace says its view was lost" t_lxcfs_restart

# node in the tools image: os.cpus() and os.totalmem() agree with cpus and memoryMb.
t_node() {
	[[ -n $TOOLS_DIGEST ]] || {
		_fail "tools image: $TOOLS_IMAGE_WHY"
		return 1
	}
	tools_image_import node-tools
	assert_status 201 "tools image import" || return 1
	local img=node-tools@$(j .digest) n1 n2
	new_ws n1 "$(jq -nc --arg i "$img" '{adapter: "container", image: $i, cpus: 1, memoryMb: 256}')" || return 1
	new_ws n2 "$(jq -nc --arg i "$img" '{adapter: "container", image: $i}')" || return 1
	local js='const os = require("os"); console.log(os.cpus().length, Math.floor(os.totalmem() / 1048576))'
	out "$n1" "node -e '$js'" || return 1
	assert_eq "1 256" "$OUT" "node os.cpus().length and totalmem MiB with cpus 1, memoryMb 256"
	out "$n2" "node -e '$js'" || return 1
	assert_eq "$HOST_CPUS $((HOST_MEM_KB / 1024))" "$OUT" "node without limits (the host's)"
}

tools_image_build
if [[ $? -eq 2 ]]; then
	skip "node os.cpus() and os.totalmem() agree with the limits" "$TOOLS_IMAGE_WHY"
else
	run_test "node os.cpus() and os.totalmem() agree with the limits" t_node
fi
