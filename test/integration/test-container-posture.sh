#!/bin/bash
# The posture of a container workspace (DESIGN §6, issue 3 item 8), read from inside by the
# static posture probe: user namespace, capabilities, no_new_privs, seccomp, mounts, masked and
# read-only /proc paths, open fds, network interfaces. Every denial has its positive control:
# the same probe on the host, or in a test-only workspace with an unconfined profile.
. "$(dirname "$0")/container-lib.sh"

require_container_controller
new_cws WS || exit 1

# The probe on the host: what the container must not see.
HOST_PROBE=$("$PROBE_BIN")

host_val() {
	awk -v k="$1=" 'index($0, k) == 1 {print substr($0, length(k) + 1); exit}' <<<"$HOST_PROBE"
}

t_identity() {
	probe "$WS" uid hostname || return 1
	assert_probe uid_map "0 $HOST_ID_BASE 65536"
	assert_probe gid_map "0 $HOST_ID_BASE 65536"
	assert_probe uid 0
	assert_probe gid 0
	assert_probe hostname workspace
	# control: the host's map is the identity
	assert_eq "0 0 4294967295" "$(host_val uid_map)" "host uid_map"
	# the container's root really is host uid 300000: a file it makes in HOME says so
	run_cmd "$WS" 'touch /home/node/owner-probe' || return 1
	assert_eq exited "$(j .status)" "touch in HOME"
	assert_eq "$HOST_ID_BASE" "$(stat -c %u "$ROOT/workspaces/$WS/home/owner-probe")" \
		"host owner of a file container root made"
}

t_capabilities() {
	probe "$WS" caps || return 1
	assert_probe CapEff 00000000000005fb
	assert_probe CapPrm 00000000000005fb
	assert_probe CapBnd 00000000000005fb
	assert_probe CapInh 0000000000000000
	assert_probe CapAmb 0000000000000000
	assert_probe NoNewPrivs 1
	assert_probe Seccomp 2
	note "host CapEff=$(host_val CapEff) Seccomp=$(host_val Seccomp)"
}

t_mounts() {
	probe "$WS" mounts || return 1
	assert_probe mount./ overlay
	assert_probe mount./tmp tmpfs
	assert_probe mountopts./tmp rw
	assert_match "/workspaces/$WS/home\$" "$(pval mountroot./home/node)" "/home/node is the HOME bind"
	assert_probe mountopts./home/node rw
	assert_match "/workspaces/$WS/run\$" "$(pval mountroot./run/station)" "/run/station is the run-dir bind"
	assert_probe mountopts./run/station/agent/station-agent ro
	assert_probe mountopts./sys ro
	local p v n=0
	for p in /proc/bus /proc/fs /proc/irq /proc/sys /proc/sysrq-trigger; do
		v=$(pval "readonly.$p")
		[[ $v == absent ]] && continue
		assert_eq ro "$v" "read-only $p"
		n=$((n + 1))
	done
	note "read-only /proc paths present and checked: $n"
	assert_le 1 "$n" "read-only /proc paths checked"
	# control: the overlay is ours, the upper dir is the workspace's
	grep -F " $ROOT/workspaces/$WS/rootfs " /proc/self/mountinfo | grep -q ' - overlay ' ||
		_fail "no overlay mounted at $ROOT/workspaces/$WS/rootfs on the host"
}

t_masked_paths() {
	probe "$WS" masked || return 1
	local line p host inside n=0
	while IFS= read -r line; do
		p=${line%%=*}
		p=${p#masked.}
		host=${line#*=}
		inside=$(pval "masked.$p")
		# the control: on the host the path has content to hide
		[[ $host == readable:* ]] || continue
		n=$((n + 1))
		[[ $inside == empty || $inside == denied ]] ||
			_fail "masked path $p: host $host, container $inside (want empty or denied)"
	done < <(grep '^masked\.' <<<"$HOST_PROBE")
	note "masked paths with content on the host and checked: $n"
	assert_le 1 "$n" "masked paths checked"
}

t_open_fds() {
	probe "$WS" fds || return 1
	assert_probe fds 0,1,2
	assert_probe fd.0 /dev/null
	assert_match '^pipe:' "$(pval fd.1)" "fd 1"
	assert_match '^pipe:' "$(pval fd.2)" "fd 2"
	# control: an fd the command opens itself is seen
	run_cmd "$WS" 'exec 7</etc/passwd; posture-probe fds' || return 1
	PROBE_OUT=$(j .stdout)
	assert_probe fds 0,1,2,7
}

t_network() {
	probe "$WS" ifaces || return 1
	assert_probe ifaces lo
	note "host interfaces: $(host_val ifaces)"
	# control: loopback works with network none — a TCP round trip over 127.0.0.1. A client
	# that connects before the server listens is refused and tries again; a round whose
	# server got nothing (once seen on a loaded machine, cause unknown) is tried again, up to
	# 5, each one's errors kept for the failure message.
	run_cmd "$WS" 'round=0
		while [ $round -lt 5 ]; do
			round=$((round + 1)); : >/tmp/got
			nc -l -p 5555 >/tmp/got 2>>/tmp/err & srv=$!; i=0
			until echo hello | nc -w 2 127.0.0.1 5555 2>/tmp/cerr; do
				i=$((i + 1)); [ $i -ge 500 ] && break; usleep 10000
			done
			[ $i -ge 500 ] && kill $srv 2>/dev/null
			wait $srv; echo "round $round: server exit $?, client tries $i $(cat /tmp/cerr)" >>/tmp/err
			[ -s /tmp/got ] && break
		done
		cat /tmp/err >&2; cat /tmp/got' || return 1
	local got err
	got=$(j .stdout | tr -d '\n')
	err=$(j .stderr | tr '\n' ';')
	[[ $got == hello && $err != *"round 1:"*"round 2:"* ]] || note "loopback rounds: $err"
	assert_eq exited "$(j .status)" "loopback round trip: status"
	assert_eq hello "$got" "loopback round trip: what the server got ($err)"
}

t_agent_protected() {
	probe "$WS" proc1 || return 1
	assert_probe proc1_environ denied
	# control: a process's own environ is readable, so the denial is about PID 1
	run_cmd "$WS" 'head -c 5 /proc/self/environ >/dev/null && echo own=readable' || return 1
	assert_eq 'own=readable' "$(j .stdout | tr -d '\n')" "own environ"
}

t_userns_denied() {
	probe "$WS" unshare || return 1
	assert_probe unshare_user EPERM
	run_cmd "$WS" 'unshare -U true' || return 1
	assert_eq exited "$(j .status)" status
	assert_eq 1 "$(j .exitCode)" "exit code of unshare -U true"
	assert_contains "Operation not permitted" "$(j .stderr)" "stderr of unshare -U true"
}

# Positive control: a test-only workspace with an unconfined Docker-format profile
# (defaultAction SCMP_ACT_ALLOW, no rules): the user namespace the default profile refuses can be
# made — the denial above is the profile's, not the runtime's or the kernel's. The runtime still
# installs the (allow-everything) filter such a profile converts to, as runc and Docker do for
# it, so /proc says Seccomp 2; only a config without a seccomp section gives 0, and the API
# has no way to ask for one (a missing profile is a startup failure, DESIGN §6).
t_unconfined_control() {
	local ws prof=$PROFILES/unconfined.json
	echo '{"defaultAction":"SCMP_ACT_ALLOW"}' >"$prof"
	new_cws ws "$(jq -nc --arg p "$prof" '{seccompProfile: $p}')" || return 1
	probe "$ws" caps unshare || return 1
	assert_probe Seccomp 2
	assert_probe NoNewPrivs 1
	assert_probe CapEff 00000000000005fb
	assert_probe unshare_user ok
	run_cmd "$ws" 'unshare -U true' || return 1
	assert_eq exited "$(j .status)" "unshare -U true: status"
	assert_eq 0 "$(j .exitCode)" "unshare -U true: exit code ($(j .stderr))"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete the unconfined workspace"
}

# A second outside profile: Debian's containers-common, converted — a filter is on, and it
# allows unshare (so a Seccomp 2 filter is not by itself what denies it).
t_debian_profile() {
	local ws deb=/usr/share/containers/seccomp.json prof=$PROFILES/containers-common.json
	if [[ ! -r $deb ]]; then
		skip "Debian's containers-common profile" "$deb missing (golang-github-containers-common)"
		return 0
	fi
	cp "$deb" "$prof"
	new_cws ws "$(jq -nc --arg p "$prof" '{seccompProfile: $p}')" || return 1
	probe "$ws" caps unshare || return 1
	assert_probe Seccomp 2
	assert_probe unshare_user ok
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete the workspace"
}

run_test "uid and gid maps are not the identity (0 -> $HOST_ID_BASE)" t_identity
run_test "capabilities 0x5fb, no_new_privs, seccomp filter" t_capabilities
run_test "overlay rootfs, /tmp tmpfs, HOME and run-dir binds, read-only /proc paths" t_mounts
run_test "masked /proc and /sys paths are empty or unreadable" t_masked_paths
run_test "only stdin, stdout, stderr are open" t_open_fds
run_test "only the loopback interface" t_network
run_test "the agent (PID 1) environ is unreadable" t_agent_protected
run_test "user namespaces refused by the default profile (EPERM)" t_userns_denied
run_test "control: an allow-all profile allows unshare -U" t_unconfined_control
run_test "Debian's containers-common profile: filter on, unshare allowed" t_debian_profile
