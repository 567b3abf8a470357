#!/bin/bash
# What persists across a container restart (DESIGN §1, issue 3 item 6): what is written under
# HOME survives POST …/restart; the rest of the root filesystem (/usr here) and /tmp start
# fresh on every container start. The files are read back before the restart, so their absence
# afterwards is the restart's doing.
. "$(dirname "$0")/container-lib.sh"

require_container_controller
new_cws WS || exit 1

WRITE='echo home-data >/home/node/keep.txt && mkdir -p /home/node/workspace/sub &&
echo wd-data >/home/node/workspace/sub/w.txt && echo tmp-data >/tmp/t.txt &&
echo usr-data >/usr/u.txt && echo etc-data >>/etc/passwd && rm /opt/old/new && echo written'
READ='for f in /home/node/keep.txt /home/node/workspace/sub/w.txt /tmp/t.txt /usr/u.txt; do
if [ -e $f ]; then echo "$f=$(cat $f)"; else echo "$f=absent"; fi; done;
grep -c etc-data /etc/passwd; if [ -e /opt/old/new ]; then echo new=present; else echo new=absent; fi'

t_restart_keeps_home_only() {
	local init_before running
	run_cmd "$WS" "$WRITE" || return 1
	assert_eq written "$(j .stdout | tr -d '\n')" "writes" || return 1
	# control: everything is there before the restart
	run_cmd "$WS" "$READ" || return 1
	assert_eq "/home/node/keep.txt=home-data
/home/node/workspace/sub/w.txt=wd-data
/tmp/t.txt=tmp-data
/usr/u.txt=usr-data
1
new=absent" "$(j .stdout)" "before the restart"
	init_before=$(container_init_pid "$WS")

	run_start "$WS" "$(json_cmd 'sleep 1000.81')" || return 1
	running=$RUN
	wait_for -t 5 pgrep -f 'sleep 1000.81' >/dev/null || _fail "the command never started"

	api -q POST "/v1/workspaces/$WS/restart"
	assert_status 200 restart || return 1
	assert_eq ready "$(j .state)" "state after restart"
	assert_ne "$init_before" "$(container_init_pid "$WS")" "container init pid after restart"
	wait_for -t 3 no_process 'sleep 1000.81' || _fail "the run in flight survived the restart"
	run_get "$WS" "$running"
	assert_eq lost "$(j .status)" "the run in flight"
	assert_eq "workspace restarted" "$(j .reason)" "its reason"

	run_cmd "$WS" "$READ" || return 1
	assert_eq "/home/node/keep.txt=home-data
/home/node/workspace/sub/w.txt=wd-data
/tmp/t.txt=absent
/usr/u.txt=absent
0
new=present" "$(j .stdout)" "after the restart"
	# HOME is the host directory, with the container root's (mapped) owner
	assert_eq home-data "$(cat "$ROOT/workspaces/$WS/home/keep.txt" 2>/dev/null)" "HOME file on the host"
	assert_eq "$HOST_ID_BASE" "$(stat -c %u "$ROOT/workspaces/$WS/home/keep.txt" 2>/dev/null)" \
		"its host owner"
	local upper
	upper=$(find "$ROOT/workspaces/$WS/upper/upper" -mindepth 1 -name 'u.txt' 2>/dev/null)
	assert_eq '' "$upper" "the old upper layer's /usr/u.txt"
}

# Twice in a row: the second start also begins fresh (the upper is wiped on every start).
t_second_restart() {
	run_cmd "$WS" 'echo again >/usr/u2.txt && echo more >>/home/node/keep.txt && echo ok' || return 1
	assert_eq ok "$(j .stdout | tr -d '\n')" write
	api -q POST "/v1/workspaces/$WS/restart"
	assert_status 200 restart || return 1
	run_cmd "$WS" 'cat /home/node/keep.txt; [ -e /usr/u2.txt ] && echo u2=present || echo u2=absent' || return 1
	assert_eq $'home-data\nmore\nu2=absent' "$(j .stdout)" "after the second restart"
}

run_test "restart: HOME survives; /tmp, /usr, /etc and whiteouts start fresh" t_restart_keeps_home_only
run_test "a second restart starts fresh again" t_second_restart
