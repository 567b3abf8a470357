#!/bin/bash
# Socket families (issue 8 item 3): the default profile lets a workspace open AF_UNIX, AF_INET,
# AF_INET6 and netlink NETLINK_ROUTE sockets only. Every other family (AF_VSOCK reaches the
# hypervisor on a VM host; AF_ALG, AF_PACKET, AF_KEY, AF_BLUETOOTH, AF_XDP, ...) fails with
# EAFNOSUPPORT, every other netlink protocol with EPROTONOSUPPORT, socketpair is AF_UNIX only,
# exactly as a kernel without those families would answer (profiles/README.md, "Sockets").
#
# The probe is the static posture probe's "sockets" group, run inside the workspace and on the
# host. Positive controls: the allowed families work inside, and each refused call that is
# asserted as the filter's refusal works on the host (a family the host kernel lacks answers
# EAFNOSUPPORT there too and proves nothing: it is reported, not counted).
#
# Runs under the script's runtime (STATION_TEST_RUNTIME, default runc), then under crun and
# runsc when installed.
. "$(dirname "$0")/../integration/container-lib.sh"

require_container_controller
new_cws WS || exit 1

HOST_PROBE=$("$PROBE_BIN" sockets)

host_val() {
	awk -v k="$1=" 'index($0, k) == 1 {print substr($0, length(k) + 1); exit}' <<<"$HOST_PROBE"
}

# What the filter refuses, with the errno the workspace must see.
REFUSED_FAMILIES=(vsock alg packet key bluetooth xdp unspec max vsock_hibits unix_hibits)
REFUSED_NETLINK=(netlink_sock_diag netlink_audit netlink_uevent netlink_netfilter)

# check_sockets WS ERRNO_FAMILY ERRNO_NETLINK: the probe's answers in WS, each refusal with its
# host control.
check_sockets() {
	local ws=$1 efam=$2 enl=$3 k host controls=0
	probe "$ws" sockets || return 1
	# allowed inside
	for k in unix inet inet6 netlink_route; do
		assert_probe "socket.$k" ok
	done
	assert_probe socketpair.unix ok
	# refused inside; the control is the host
	for k in "${REFUSED_FAMILIES[@]}" "${REFUSED_NETLINK[@]}"; do
		local want=$efam
		[[ $k == netlink_* ]] && want=$enl
		assert_probe "socket.$k" "$want"
		host=$(host_val "socket.$k")
		if [[ $host == ok ]]; then
			controls=$((controls + 1))
		else
			note "socket.$k: the host answers $host too (not a control here)"
		fi
	done
	for k in inet vsock; do
		assert_probe "socketpair.$k" "$efam"
	done
	note "refused families and protocols that work on the host: $controls"
	# the family the issue names, and one netlink protocol, must be real controls on this host
	assert_eq ok "$(host_val socket.vsock)" "host socket(AF_VSOCK)"
	assert_eq ok "$(host_val socket.netlink_audit)" "host socket(AF_NETLINK, NETLINK_AUDIT)"
	assert_eq ok "$(host_val socket.unix_hibits)" \
		"host socket(AF_UNIX with bits above the int set): the kernel reads the int"
}

# The i386 entry points of an x86-64 kernel (int 0x80). The default profile does not list the
# x86 ABI: libseccomp, as runc and crun use it, turns an argument-filtered socket rule on x86
# into socketcall(SYS_SOCKET) allowed whatever the family (the family is in memory there), so
# a 32-bit process would open any socket. The runtime's bad-arch action kills it instead (SIGSYS).
check_compat() {
	local ws=$1 host
	host=$(host_val compat32)
	if [[ $host != ok ]]; then
		skip "i386 socket and socketcall" "no IA-32 emulation in this kernel (int 0x80: $host)"
		return 0
	fi
	assert_eq ok "$(host_val socketcall.vsock)" "host socketcall(SYS_SOCKET, AF_VSOCK)"
	assert_probe compat32 signal:SYS
	assert_eq '<missing>' "$(pval socketcall.vsock)" "socketcall(SYS_SOCKET, AF_VSOCK) inside"
}

t_default_profile() {
	check_sockets "$WS" EAFNOSUPPORT EPROTONOSUPPORT || return 1
	check_compat "$WS"
}

# What glibc needs the netlink route socket for still works with network none: the interface
# list (if_nameindex, over NETLINK_ROUTE).
t_netlink_route_users() {
	probe "$WS" ifaces || return 1
	assert_probe ifaces lo
}

# other_runtime NAME ERRNO_FAMILY ERRNO_NETLINK: the same probe under another runtime, on a
# controller of its own on this root.
other_runtime() {
	local rt=$1 ws
	if ! command -v "$rt" >/dev/null; then
		skip "sockets under $rt" "$rt not installed"
		return 0
	fi
	stop_controller
	start_container_controller --runtime "$rt" || return 1
	new_cws ws || return 1
	api -q GET "/v1/workspaces/$ws"
	assert_eq "$rt" "$(j .runtime)" "runtime of the workspace"
	check_sockets "$ws" "$2" "$3"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete the $rt workspace"
}

# The first workspace belongs to the script's runtime: delete it before another one takes over.
t_delete_first() {
	api -q DELETE "/v1/workspaces/$WS"
	assert_status 200 "delete $WS"
}

t_crun() {
	[[ $RUNTIME == crun ]] && return 0
	other_runtime crun EAFNOSUPPORT EPROTONOSUPPORT
}

# runsc of Debian 12 (release 20221219) ignores errnoRet: every SCMP_ACT_ERRNO rule answers
# EPERM there (its OCI seccomp conversion has one errno action). Refused all the same.
t_runsc() {
	[[ $RUNTIME == runsc ]] && return 0
	other_runtime runsc EPERM EPERM
}

run_test "default profile: AF_UNIX/INET/INET6/NETLINK_ROUTE only, the rest EAFNOSUPPORT" t_default_profile
run_test "netlink route users work with network none (if_nameindex)" t_netlink_route_users
run_test "delete the first workspace" t_delete_first
run_test "the same under crun" t_crun
run_test "the same under runsc (EPERM: it ignores errnoRet)" t_runsc
