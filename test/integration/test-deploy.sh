#!/bin/bash
# run-all: not under sanitizers: node tooling (npm ci, the manifest validator)
# run-all: slow: 50 to 110 s (two runtimes, container workspaces, node tooling)
# The packaging in deploy/ (docs/operations.md, "Running under systemd", "Running on
# Kubernetes"):
# - the systemd unit passes `systemd-analyze verify` with nothing to say (a misspelled
#   directive in a copy is reported: the check can fail), and its `systemd-analyze security`
#   exposure is the one docs/operations.md gives (a copy without the hardening scores worse);
# - the controller runs under what the unit imposes on it: no_new_privs and the capability
#   bounding set the unit names (read from the unit), creating container workspaces with runc
#   and crun and running commands in them;
# - why the unit has no mount-namespace option (ProtectSystem= and the like): in a namespace
#   of its own that is a slave of the host's, as systemd makes it, the controller's lxcfs mount
#   is not the host's, and the next controller, in a new namespace, cannot adopt the lxcfs
#   still serving (it starts a second one). The same restart in the host's namespace adopts it
#   (the positive control);
# - why no ProtectKernelTunables=: with /proc/sys read-only in the controller's namespace a
#   container start fails (the kernel refuses its /proc); without the cover it works;
# - the Kubernetes manifests validate against the Kubernetes API's schemas (kubernetes-models
#   from npm, pinned in scripts/kube-validate/package-lock.json), and copies with a wrong type
#   or a missing required field do not.
# Runs on the controller's own temporary root; no systemd as PID 1 is needed (none is started).
. "$(dirname "$0")/container-lib.sh"
. "$(dirname "$0")/etcd-lib.sh"

UNIT=$SRC/deploy/systemd/station-sandbox.service
MANIFESTS=$SRC/deploy/kubernetes
VALIDATOR=$SRC/scripts/kube-validate
REAL_DAEMON=$DAEMON

# The unit with ExecStart naming this build's controller (verify checks that it exists).
unit_copy() {
	mkdir -p "$TMP/unit"
	sed "s|/usr/local/bin/station-sandboxd|$REAL_DAEMON|" "$UNIT" >"$TMP/unit/$1"
	echo "$TMP/unit/$1"
}

# ---------------------------------------------------------------------------------------------
# systemd

t_unit_verify() {
	local f out
	f=$(unit_copy station-sandbox.service)
	out=$(systemd-analyze verify "$f" 2>&1)
	assert_eq 0 "$?" "systemd-analyze verify exit status" || diag "$out"
	assert_eq "" "$out" "what systemd-analyze verify says about the unit"
	# control: a misspelled directive is reported
	f=$(unit_copy station-sandbox-broken.service)
	sed -i 's/^KillMode=process/KilMode=process/' "$f"
	out=$(systemd-analyze verify "$f" 2>&1)
	assert_contains "Unknown key 'KilMode' in section [Service]" "$out" "verify of a copy with a misspelled directive"
}

# The admin token as a credential (deploy/systemd/admin-token.conf): the unit with the drop-in
# verifies (a misspelled key in the drop-in is reported: verify reads it); the drop-in's command
# line, %d replaced by a credentials directory made as systemd makes it (0500, the file 0400,
# root's), starts a controller whose TCP listener takes that token. Control: the recipe through
# the environment file, which systemd passes on unexpanded, stops the start naming the path.
t_unit_credential() {
	local f out port root=$TMP/cred-root creds=$TMP/creds token args pid
	f=$(unit_copy station-sandbox.service)
	mkdir -p "$f.d"
	sed "s|/usr/local/bin/station-sandboxd|$REAL_DAEMON|" "$SRC/deploy/systemd/admin-token.conf" \
		>"$f.d/admin-token.conf"
	out=$(systemd-analyze verify "$f" 2>&1)
	assert_eq 0 "$?" "verify of the unit with the drop-in" || diag "$out"
	assert_eq "" "$out" "what systemd-analyze verify says"
	sed -i 's/^LoadCredential=/LoadCredentia=/' "$f.d/admin-token.conf"
	out=$(systemd-analyze verify "$f" 2>&1)
	assert_contains "Unknown key 'LoadCredentia' in section [Service]" "$out" \
		"a misspelled key in the drop-in is reported (control)"
	rm -rf "$f.d"
	# The drop-in's ExecStart, %d the credentials directory, $STATION_SANDBOXD_ARGS empty.
	mkdir -p "$creds" "$root"
	token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf '%s\n' "$token" >"$creds/admin-token"
	chmod 0400 "$creds/admin-token"
	chmod 0500 "$creds"
	mapfile -t args < <(sed -n '/^ExecStart=./,/[^\\]$/p' "$SRC/deploy/systemd/admin-token.conf" |
		sed 's/\\$//; s/^ExecStart=//' | tr -s ' \t' '\n\n' | grep -v '^$')
	assert_eq "/usr/local/bin/station-sandboxd" "${args[0]}" "the drop-in's command" || return 1
	assert_eq '%d/admin-token' "$(printf '%s\n' "${args[@]}" | grep -A1 -x -- --admin-token-file | tail -n 1)" \
		"the flag names the credential through %d" || return 1
	args=("${args[@]:1}")
	args=("${args[@]//%d/$creds}")
	args=("${args[@]//\/var\/lib\/station-sandbox/$root}")
	mapfile -t args < <(printf '%s\n' "${args[@]}" | grep -vx '\$STATION_SANDBOXD_ARGS')
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$REAL_DAEMON" "${args[@]}" --worker cred --network-range none --adapters host \
		--listen "tcp:127.0.0.1:$port" >"$TMP/cred.log" 2>&1 </dev/null &
	pid=$!
	cred_up() {
		kill -0 "$pid" 2>/dev/null || return 2
		[[ $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" \
			"http://127.0.0.1:$port/v1/workspaces") == 200 ]]
	}
	wait_for -t 20 cred_up || _fail "no controller taking the credential's token: $(tail -n 5 "$TMP/cred.log")"
	assert_eq 401 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer x$token" \
		"http://127.0.0.1:$port/v1/workspaces")" "another token is refused"
	kill -TERM "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	# Control: the recipe through the environment file reaches the controller unexpanded.
	out=$("$REAL_DAEMON" --root "$root" --worker cred --network-range none --adapters host \
		--admin-token-file '${CREDENTIALS_DIRECTORY}/admin-token' 2>&1 </dev/null)
	assert_ne 0 "$?" "the literal \${CREDENTIALS_DIRECTORY} stops the start"
	assert_contains '--admin-token-file "${CREDENTIALS_DIRECTORY}/admin-token"' "$out" "the message names it"
	chmod 0700 "$creds"
}

# exposure FILE: the overall exposure score systemd-analyze security gives the unit file.
exposure() {
	systemd-analyze security --offline=true "$1" 2>&1 |
		sed -n 's/^→ Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p'
}

t_unit_security() {
	local f score bare documented
	f=$(unit_copy station-sandbox.service)
	score=$(exposure "$f")
	assert_match '^[0-9]+\.[0-9]$' "$score" "the exposure score" || return 1
	note "systemd-analyze security --offline=true: exposure $score"
	documented=$(sed -n 's/.*`systemd-analyze security` exposure of \([0-9.]*\).*/\1/p' \
		"$SRC/docs/operations.md" | head -n 1)
	assert_eq "$score" "$documented" "the score docs/operations.md gives"
	# the hardening counts: a copy without NoNewPrivileges= and the bounding set scores worse
	f=$(unit_copy station-sandbox-bare.service)
	sed -i '/^NoNewPrivileges=/d; /^CapabilityBoundingSet=/d' "$f"
	bare=$(exposure "$f")
	note "without NoNewPrivileges= and CapabilityBoundingSet=: exposure $bare"
	assert_match '^[0-9]+\.[0-9]$' "$bare" "the bare copy's score" || return 1
	if ! awk -v a="$score" -v b="$bare" 'BEGIN {exit !(a < b)}'; then
		_fail "the unit's exposure $score is not below the bare copy's $bare"
	fi
}

if ! command -v systemd-analyze >/dev/null; then
	skip "unit verifies" "systemd-analyze missing (apt-get install systemd)"
	skip "unit security exposure" "systemd-analyze missing (apt-get install systemd)"
elif ! systemd-analyze security --help 2>/dev/null | grep -q -- --offline; then
	run_test "unit verifies" t_unit_verify
	skip "unit security exposure" "this systemd-analyze has no --offline (systemd 250 or later)"
else
	run_test "unit verifies" t_unit_verify
	run_test "unit security exposure" t_unit_security
fi
if command -v systemd-analyze >/dev/null; then
	run_test "the admin token as a systemd credential (drop-in)" t_unit_credential
else
	skip "the admin token as a systemd credential (drop-in)" "systemd-analyze missing (apt-get install systemd)"
fi

# ---------------------------------------------------------------------------------------------
# Kubernetes

# validator_install: npm ci of the pinned validator (npm's own retries, kept short: an
# unreachable registry costs seconds, not minutes). 0 installed; 2 the registry could not be
# reached (as the other scripts that take tools from npm, the checks then skip with the
# reason); 1 anything else.
validator_install() {
	npm_ci "$VALIDATOR" --fetch-retries=2 --fetch-retry-mintimeout=2000 \
		--fetch-retry-maxtimeout=10000 --fetch-timeout=60000 >"$TMP/npm.log" 2>&1 && return 0
	grep -Eq 'EHOSTUNREACH|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENOTFOUND|EAI_AGAIN|ENETUNREACH' "$TMP/npm.log" &&
		return 2
	return 1
}

# validate FILE...: runs the validator; its output in VOUT, its exit status returned.
VOUT=
validate() {
	VOUT=$(node "$VALIDATOR/validate.mjs" "$@" 2>&1)
}

t_manifests_valid() {
	validate "$MANIFESTS"/*.yaml
	assert_eq 0 "$?" "validator exit status" || diag "$VOUT"
	assert_eq "ConfigMap/station-sandbox-flags
DaemonSet/station-sandbox
Service/station-sandbox-etcd
StatefulSet/station-sandbox-etcd
Namespace/station-sandbox
NetworkPolicy/station-sandbox-api
NetworkPolicy/station-sandbox-etcd
Secret/station-sandbox-admin-token
Service/station-sandbox" "$(awk '$1 == "ok" {print $3}' <<<"$VOUT")" "documents validated"
	assert_eq "" "$(grep -v '^ok ' <<<"$VOUT")" "errors"
}

t_manifests_broken() {
	local f=$TMP/broken.yaml
	# a wrong type: the port as a string
	sed 's/containerPort: 8080/containerPort: "8080"/' "$MANIFESTS/daemonset.yaml" >"$f"
	assert_contains 'containerPort: "8080"' "$(cat "$f")" "the broken copy" || return 1
	validate "$f"
	assert_eq 1 "$?" "validator exit status (wrong type)"
	assert_contains "/spec/template/spec/containers/0/ports/0/containerPort must be integer" \
		"$VOUT" "the error names the field"
	# a required field misspelled
	sed 's/^      containers:/      contaners:/' "$MANIFESTS/daemonset.yaml" >"$f"
	validate "$f"
	assert_eq 1 "$?" "validator exit status (missing field)"
	assert_contains "/spec/template/spec must have required property containers" "$VOUT" "the error names it"
	# a kind the API does not have
	sed 's/^kind: NetworkPolicy/kind: NetworkPolicies/' "$MANIFESTS/networkpolicy.yaml" >"$f"
	validate "$f"
	assert_eq 1 "$?" "validator exit status (unknown kind)"
	assert_contains "no schema for NetworkPolicies in networking.k8s.io/v1" "$VOUT" "the error"
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "manifests validate" "node and npm are needed (apt-get install nodejs npm)"
	skip "broken manifests fail" "node and npm are needed (apt-get install nodejs npm)"
else
	validator_install
	case $? in
	0)
		run_test "manifests validate" t_manifests_valid
		run_test "broken manifests fail" t_manifests_broken
		;;
	2)
		why="the npm registry could not be reached: $(grep -m1 -Eo 'E[A-Z]+[^ ]* [^,]*' "$TMP/npm.log" | head -c 200)"
		skip "manifests validate" "$why"
		skip "broken manifests fail" "$why"
		;;
	*)
		not_ok "manifests validate" "npm ci in scripts/kube-validate failed: $(tail -n 3 "$TMP/npm.log")"
		not_ok "broken manifests fail" "the validator is not installed"
		;;
	esac
fi

# ---------------------------------------------------------------------------------------------
# The controller under the unit's no_new_privs and capability bounding set

# The unit's CapabilityBoundingSet=~ lines as setpriv's --bounding-set argument.
unit_dropped_caps() {
	sed -n 's/^CapabilityBoundingSet=~//p' "$UNIT" | tr ' ' '\n' | sed '/^$/d' |
		tr 'A-Z' 'a-z' | sed 's/^cap_/-/' | paste -sd, -
}

# cap_bit NAME: the capability's number (capsh's list would need libcap2-bin).
cap_bit() {
	python3 -c 'import sys; n = ["chown","dac_override","dac_read_search","fowner","fsetid","kill","setgid","setuid","setpcap","linux_immutable","net_bind_service","net_broadcast","net_admin","net_raw","ipc_lock","ipc_owner","sys_module","sys_rawio","sys_chroot","sys_ptrace","sys_pacct","sys_admin","sys_boot","sys_nice","sys_resource","sys_time","sys_tty_config","mknod","lease","audit_write","audit_control","setfcap","mac_override","mac_admin","syslog","wake_alarm","block_suspend","audit_read","perfmon","bpf","checkpoint_restore"]; print(n.index(sys.argv[1]))' "$1"
}

t_no_new_privs() {
	local drop wrapper cap bnd ws rt
	drop=$(unit_dropped_caps)
	assert_contains "-sys_module" "$drop" "the unit's dropped capabilities" || return 1
	assert_eq 1 "$(grep -c '^NoNewPrivileges=yes$' "$UNIT")" "the unit sets NoNewPrivileges" || return 1
	wrapper=$TMP/daemon-nnp
	printf '#!/bin/sh\nexec setpriv --no-new-privs --bounding-set %s %s "$@"\n' "$drop" \
		"$REAL_DAEMON" >"$wrapper"
	chmod 0755 "$wrapper"
	for rt in runc crun; do
		if ! command -v "$rt" >/dev/null; then
			skip "no_new_privs: $rt" "$rt not installed"
			continue
		fi
		DAEMON=$wrapper
		RUNTIME=$rt
		start_container_controller || {
			DAEMON=$REAL_DAEMON
			_fail "the controller did not start under setpriv ($rt)"
			return 1
		}
		DAEMON=$REAL_DAEMON
		assert_eq 1 "$(awk '/^NoNewPrivs:/ {print $2}' "/proc/$CONTROLLER_PID/status")" \
			"the controller's NoNewPrivs ($rt)"
		bnd=$((16#$(awk '/^CapBnd:/ {print $2}' "/proc/$CONTROLLER_PID/status")))
		for cap in ${drop//,/ }; do
			if (((bnd >> $(cap_bit "${cap#-}")) & 1)); then
				_fail "the controller still has ${cap#-} in its bounding set ($rt)"
			fi
		done
		if [[ -z $IMAGE_DIGEST ]] && ! { container_build_image && container_import_image; }; then
			_fail "the image did not import under setpriv"
			return 1
		fi
		new_cws ws || return 1
		run_cmd "$ws" 'echo in-container; grep ^NoNewPrivs /proc/self/status' || return 1
		assert_eq exited "$(j .status)" "the command's status ($rt)"
		assert_eq "in-container
NoNewPrivs:	1" "$(j .stdout)" "the command's output ($rt)"
		api -q DELETE "/v1/workspaces/$ws"
		assert_status 200 "delete ($rt)"
		stop_controller TERM
		assert_eq 0 "$CONTROLLER_EXIT" "the controller's exit status ($rt)"
	done
	RUNTIME=runc
}

if ! command -v setpriv >/dev/null; then
	skip "controller under no_new_privs" "setpriv missing (apt-get install util-linux)"
elif [[ ! -x /bin/busybox ]]; then
	skip "controller under no_new_privs" "/bin/busybox missing (apt-get install busybox-static)"
elif [[ ! -x $PROBE_BIN ]]; then
	skip "controller under no_new_privs" "$PROBE_BIN not built"
else
	run_test "controller under no_new_privs" t_no_new_privs
fi

# ---------------------------------------------------------------------------------------------
# Why no mount namespace: lxcfs adoption across a restart

lxcfs_serving() {
	api -q GET /v1/ready
	[[ $(j '.checks[] | select(.name == "lxcfs") | .ok') == true ]]
}

# The pids of the lxcfs processes serving this root (their command line names ROOT/lxcfs).
our_lxcfs() {
	pgrep -x lxcfs | while read -r p; do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- " $ROOT/lxcfs" && echo "$p"
	done
}

# start_in MODE: a controller in the host's namespace (host) or, as systemd's namespacing
# options would run it, in a mount namespace of its own that is a slave of the host's (slave).
start_in() {
	if [[ $1 == slave ]]; then
		printf '#!/bin/sh\nexec unshare --mount --propagation slave %s "$@"\n' "$REAL_DAEMON" \
			>"$TMP/daemon-ns"
		chmod 0755 "$TMP/daemon-ns"
		DAEMON=$TMP/daemon-ns
	fi
	start_container_controller
	local r=$?
	DAEMON=$REAL_DAEMON
	[[ $r -eq 0 ]] || return 1
	wait_for -t 20 lxcfs_serving || {
		_fail "lxcfs never served: $(j '.checks[] | select(.name == "lxcfs")')"
		return 1
	}
}

adopted_lines() {
	grep -c 'lxcfs adopted' "$CONTROLLER_LOG"
}

t_restart_adopts_lxcfs() {
	local first
	start_in host || return 1
	first=$(our_lxcfs)
	assert_match '^[0-9]+$' "$first" "one lxcfs" || return 1
	assert_contains " $ROOT/lxcfs " "$(cat /proc/self/mountinfo)" "its mount in the host's namespace"
	stop_controller KILL
	start_in host || return 1
	assert_eq 1 "$(adopted_lines)" "'lxcfs adopted' lines in the log"
	assert_eq "$first" "$(our_lxcfs)" "the lxcfs serving after the restart"
	stop_controller TERM
	wait_for -t 20 bash -c "! pgrep -x lxcfs | grep -qx '$first'" ||
		_fail "the controller did not stop its lxcfs when it exited with no workspace"
}

t_restart_in_namespace() {
	local first after
	start_in slave || return 1
	first=$(our_lxcfs)
	assert_match '^[0-9]+$' "$first" "one lxcfs" || return 1
	assert_contains " $ROOT/lxcfs " "$(cat "/proc/$CONTROLLER_PID/mountinfo")" \
		"its mount in the controller's namespace"
	if grep -q " $ROOT/lxcfs " /proc/self/mountinfo; then
		_fail "the lxcfs mount reached the host's namespace"
	fi
	stop_controller KILL
	start_in slave || return 1
	assert_eq 1 "$(adopted_lines)" "'lxcfs adopted' lines in the log (only the host's restart)"
	after=$(our_lxcfs | sort -n | paste -sd' ' -)
	assert_eq 2 "$(wc -w <<<"$after")" "lxcfs processes serving ROOT/lxcfs: $after"
	assert_contains "$first" "$after" "the first one still runs"
	stop_controller KILL
	# ours to stop: the first lxcfs outlived the controller that started it, and the second was
	# left by the SIGKILL (each mount goes with its namespace)
	local p
	for p in $after; do
		kill "$p" 2>/dev/null
	done
	wait_for -t 20 bash -c "[ -z \"\$(pgrep -x lxcfs | grep -x -e ${after// / -e })\" ]" ||
		_fail "lxcfs $after did not stop"
}

if ! command -v lxcfs >/dev/null; then
	skip "restart adopts lxcfs (host namespace)" "lxcfs not installed (apt-get install lxcfs)"
	skip "restart in a new mount namespace cannot" "lxcfs not installed (apt-get install lxcfs)"
elif [[ ! -c /dev/fuse ]]; then
	skip "restart adopts lxcfs (host namespace)" "/dev/fuse missing"
	skip "restart in a new mount namespace cannot" "/dev/fuse missing"
else
	run_test "restart adopts lxcfs (host namespace)" t_restart_adopts_lxcfs
	run_test "restart in a new mount namespace cannot" t_restart_in_namespace
fi

# ---------------------------------------------------------------------------------------------
# Why no ProtectKernelTunables= (nor ProtectKernelLogs=, ProtectProc=): /proc/sys covered
# read-only, as systemd does it, in the controller's mount namespace makes the kernel refuse
# the /proc each container's user namespace mounts. The control: the same namespace without
# the cover creates a container workspace.

# ns_wrapper COVER: a controller in a slave mount namespace, with /proc/sys made read-only
# there when COVER is 1.
ns_wrapper() {
	local pre=
	[[ $1 == 1 ]] && pre='mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys && '
	printf '#!/bin/sh\nexec unshare --mount --propagation slave sh -c %s sh "$@"\n' \
		"'${pre}exec $REAL_DAEMON \"\$@\"'" >"$TMP/daemon-cover"
	chmod 0755 "$TMP/daemon-cover"
}

t_proc_covered() {
	local cover ws
	for cover in 0 1; do
		ns_wrapper "$cover"
		DAEMON=$TMP/daemon-cover
		RUNTIME=runc
		start_container_controller || {
			DAEMON=$REAL_DAEMON
			_fail "the controller did not start in the namespace (cover $cover)"
			return 1
		}
		DAEMON=$REAL_DAEMON
		if [[ -z $IMAGE_DIGEST ]] && ! { container_build_image && container_import_image; }; then
			_fail "the image did not import"
			return 1
		fi
		if ((cover)); then
			assert_match ' /proc/sys ro,' "$(grep ' /proc/sys ' "/proc/$CONTROLLER_PID/mountinfo")" \
				"/proc/sys read-only in the controller's namespace"
			api -q POST /v1/workspaces "$(cws_body)"
			assert_eq 503 "$STATUS" "create with /proc/sys covered"
			assert_contains 'error mounting \"proc\" to rootfs at \"/proc\"' "$BODY" "the error"
			assert_contains 'operation not permitted' "$BODY" "its cause"
		else
			new_cws ws || return 1
			run_cmd "$ws" 'echo in-container' || return 1
			assert_eq in-container "$(j .stdout)" "a command in the uncovered namespace"
			api -q DELETE "/v1/workspaces/$ws"
			assert_status 200 "delete"
		fi
		stop_controller TERM
	done
}

if [[ -z $(command -v runc) || ! -x /bin/busybox || ! -x $PROBE_BIN ]]; then
	skip "covered /proc refuses containers" "runc, /bin/busybox and $PROBE_BIN are needed"
else
	run_test "covered /proc refuses containers" t_proc_covered
fi

# ---------------------------------------------------------------------------------------------
# The flags the deployments give are this controller's: the unit's ExecStart with the example
# environment file, and the DaemonSet's command with the ConfigMap (run by sh, as the pod runs
# it, with station-sandboxd replaced by a stub that records its arguments) start a controller
# whose worker name is the expected one; the admin token file is the token of its TCP listener.
# What names this machine cannot have is replaced: --root (the test's), the listen address
# (loopback, a free port) and the token file (one made here).

# systemd_args: ExecStart's arguments with STATION_SANDBOXD_ARGS from the example file, split
# on whitespace as systemd splits an unbraced $VAR; NUL-separated into $TMP/args.
systemd_args() {
	python3 - "$UNIT" "$SRC/deploy/systemd/station-sandbox.env" >"$TMP/args" <<'PY'
import sys
unit = open(sys.argv[1]).read().replace("\\\n", " ")
env = {}
for line in open(sys.argv[2]):
    line = line.strip()
    if line and not line.startswith("#") and "=" in line:
        k, v = line.split("=", 1)
        env[k] = v
exec_start = [l for l in unit.splitlines() if l.startswith("ExecStart=")]
assert len(exec_start) == 1, exec_start
words = exec_start[0][len("ExecStart="):].split()[1:]
out = []
for w in words:
    out += env.get(w[1:], "").split() if w.startswith("$") else [w]
sys.stdout.write("".join(a + "\0" for a in out))
PY
}

# kubernetes_args NODE_NAME: the DaemonSet's command run by sh with the ConfigMap's
# environment; NUL-separated into $TMP/args.
kubernetes_args() {
	local stub=$TMP/stub-daemon
	printf '#!/bin/sh\nprintf "%%s\\0" "$@" >"%s"\n' "$TMP/args" >"$stub"
	chmod 0755 "$stub"
	python3 - "$MANIFESTS/daemonset.yaml" "$MANIFESTS/configmap.yaml" "$stub" "$1" \
		>"$TMP/k8s-cmd" <<'PY' || return 1
import os, sys, yaml
ds = yaml.safe_load(open(sys.argv[1]))
cm = yaml.safe_load(open(sys.argv[2]))
c = ds["spec"]["template"]["spec"]["containers"][0]
assert c["command"] == ["/bin/sh", "-c"], c["command"]
assert c["envFrom"][0]["configMapRef"]["name"] == cm["metadata"]["name"]
script = c["args"][0].replace("/usr/local/bin/station-sandboxd", sys.argv[3])
env = dict(cm["data"], NODE_NAME=sys.argv[4], POD_IP="127.0.0.1", PATH=os.environ["PATH"])
sys.stdout.write("\0".join(["env", "-i"] + [k + "=" + v for k, v in env.items()] +
                           ["/bin/sh", "-c", script]) + "\0")
PY
	rm -f "$TMP/args"
	mapfile -d '' -t cmd <"$TMP/k8s-cmd"
	"${cmd[@]}" || return 1
	[[ -s $TMP/args ]]
}

# The value of FLAG in $TMP/args.
arg_of() {
	local a prev=
	while IFS= read -r -d '' a; do
		[[ $prev == "$1" ]] && printf '%s\n' "$a"
		prev=$a
	done <"$TMP/args"
}

# start_configured WORKER: starts a controller on a root of its own with $TMP/args (the
# machine's names replaced), checks its worker name and its token; stops it.
start_configured() {
	local want=$1 a port args=() token saved_root=$ROOT
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	printf '%s' "$token" >"$TMP/admin.token"
	chmod 0600 "$TMP/admin.token"
	local prev=
	while IFS= read -r -d '' a; do
		case $prev in
		--root)
			# drop "--root DIR": the controller gets this script's root
			args=("${args[@]:0:${#args[@]}-1}")
			prev=
			continue
			;;
		--listen) a=tcp:127.0.0.1:$port ;;
		--admin-token-file) a=$TMP/admin.token ;;
		--advertise-url) a=http://127.0.0.1:$port ;;
		--fleet) a=$ETCD_URL ;;
		esac
		args+=("$a")
		prev=$a
	done <"$TMP/args"
	if ! $HAS_TOKEN_FILE; then
		local i filtered=()
		for ((i = 0; i < ${#args[@]}; i++)); do
			if [[ ${args[i]} == --admin-token-file ]]; then
				i=$((i + 1))
				continue
			fi
			filtered+=("${args[i]}")
		done
		args=("${filtered[@]}")
	fi
	ROOT=$TMP/root-$want
	SOCK=$ROOT/station.sock
	mkdir -p "$ROOT"
	start_controller_any "${args[@]}" || {
		_fail "no controller with the configured flags: ${args[*]}"
		dump_controller_log 20
		ROOT=$saved_root SOCK=$saved_root/station.sock
		return 1
	}
	api -q GET /v1/worker
	assert_status 200 "GET /v1/worker"
	assert_eq "$want" "$(j .name)" "the worker's name"
	if [[ -n $FLEET_CHECK ]]; then
		assert_eq "http://127.0.0.1:$port" "$(etcdctl_ get --print-value-only \
			"/station/workers/$FLEET_CHECK" | jq -r .url)" "its registration in the fleet's etcd"
	fi
	if $HAS_TOKEN_FILE; then
		assert_eq 200 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" \
			"http://127.0.0.1:$port/v1/worker")" "TCP with the token file's token"
		assert_eq 401 "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer x$token" \
			"http://127.0.0.1:$port/v1/worker")" "TCP with another token (control)"
	fi
	stop_controller TERM
	assert_eq 0 "$CONTROLLER_EXIT" "its exit status"
	ROOT=$saved_root
	SOCK=$ROOT/station.sock
}

t_systemd_flags() {
	systemd_args || return 1
	assert_eq w1 "$(arg_of --worker)" "--worker in the example" || return 1
	assert_eq /var/lib/station-sandbox "$(arg_of --root)" "--root"
	start_configured w1
}

t_kubernetes_flags() {
	kubernetes_args Ip-10-0-0-5.EC2.Internal.example-with-a-long-name || {
		_fail "the DaemonSet's command did not run: $(cat "$TMP/args" 2>/dev/null | tr '\0' ' ')"
		return 1
	}
	assert_eq ip-10-0-0-5-ec2-internal-example "$(arg_of --worker)" "--worker from the node name"
	assert_eq tcp:127.0.0.1:8080 "$(arg_of --listen)" "--listen from the pod's address"
	assert_eq /etc/station-sandbox/admin.token "$(arg_of --admin-token-file)" "--admin-token-file"
	assert_eq none "$(arg_of --network-range)" "--network-range from the ConfigMap"
	assert_eq http://127.0.0.1:8080 "$(arg_of --advertise-url)" "--advertise-url from the pod's address"
	local members
	members=$(python3 -c 'import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "StatefulSet"]
s = docs[0]; svc = s["spec"]["serviceName"]
print(",".join("%s-%d.%s:2379" % (s["metadata"]["name"], i, svc) for i in range(s["spec"]["replicas"])))' \
		"$MANIFESTS/etcd.yaml")
	assert_eq "etcd://$members" "$(arg_of --fleet)" "--fleet names every member of etcd.yaml's StatefulSet"
	# the controller started with them (etcd here, on loopback) registers in the fleet
	etcd_start || return 1
	# docs/operations.md's STATION_WORKERS snippet names the worker the same way
	local filter
	filter=$(sed -n "/get endpointslices/,/join/p" "$SRC/docs/operations.md" |
		sed -n "/jq -r '/,/join/p" | sed "s/.*jq -r '//; s/')\$//")
	assert_eq "ip-10-0-0-5-ec2-internal-example=http://10.1.0.5:8080" "$(jq -nc '{items: [{endpoints:
		[{addresses: ["10.1.0.5"], nodeName: "Ip-10-0-0-5.EC2.Internal.example-with-a-long-name"}]}]}' |
		jq -r "$filter")" "the docs' STATION_WORKERS from an EndpointSlice"
	FLEET_CHECK=ip-10-0-0-5-ec2-internal-example
	start_configured ip-10-0-0-5-ec2-internal-example || return 1
	FLEET_CHECK=
	etcd_stop
	# control: a flag the controller does not know stops it at once, so a typo in the
	# ConfigMap or the environment file cannot start a controller
	local out rc
	out=$("$REAL_DAEMON" --root "$TMP/root-bad" --home-size-mbb 1 2>&1 </dev/null)
	rc=$?
	assert_eq 64 "$rc" "exit status with a misspelled flag"
	assert_contains "home-size-mbb" "$out" "the message names it"
}

HAS_TOKEN_FILE=false
FLEET_CHECK=
# The whole text first: grep -q stops reading at the match, and under pipefail the controller's
# SIGPIPE on its next write would read as "not there".
DAEMON_HELP=$("$REAL_DAEMON" --help 2>&1)
if grep -q -- --admin-token-file <<<"$DAEMON_HELP"; then
	HAS_TOKEN_FILE=true
fi
run_test "the unit's flags start a controller" t_systemd_flags
run_test "the DaemonSet's flags start a controller" t_kubernetes_flags
if ! $HAS_TOKEN_FILE; then
	skip "the deployments' admin token file" "this controller has no --admin-token-file yet"
fi
