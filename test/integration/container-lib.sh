# shellcheck shell=bash
# Sourced by every test/integration/test-container-*.sh after lib.sh's vocabulary: a controller
# driving a real OCI runtime, a busybox image built here (never downloaded) and imported, and
# helpers to look at what a container workspace leaves on the host.
#
# Environment: STATION_TEST_RUNTIME (runc, crun or a path; default runc) picks the runtime every
# controller of the script uses. A script that needs a given runtime sets CONTAINER_RUNTIME
# before sourcing this file.
#
# The image: make-busybox-image plus one extra layer of ours holding the static posture probe
# (/usr/local/bin/posture-probe), the signal probe (/usr/local/bin/signal-probe), the network
# probe (/usr/local/bin/net-probe), the preview tests' app (/usr/local/bin/preview-app) and the
# busybox applets the tests need beyond the image's own.

. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNTIME=${CONTAINER_RUNTIME:-${STATION_TEST_RUNTIME:-runc}}
RUNTIME_BIN=$(command -v "$RUNTIME" 2>/dev/null || true)
PROBE_BIN=$BUILD/test/helpers/posture-probe
SIGNAL_PROBE_BIN=$BUILD/test/helpers/signal-probe
NET_PROBE_BIN=$BUILD/test/helpers/net-probe
PREVIEW_APP_BIN=$BUILD/test/helpers/preview-app
MAKE_IMAGE=$SRC/test/helpers/make-busybox-image
DEFAULT_PROFILE=$SRC/profiles/default.json
# The profile directory (--seccomp-dir) of this script's controllers: a workspace's profile
# other than the shipped ones must be written here.
PROFILES=$TMP/profiles
mkdir -p "$PROFILES"
HOST_ID_BASE=300000
# A worker name of this script's own: every workspace id starts with it, so what a workspace
# leaves on the host (cgroups, processes, mounts) is told apart from other controllers'.
WORKER=c$(printf '%s' "$TEST_NAME$$" | md5sum | cut -c1-10)
IMAGE=
IMAGE_DIGEST=
PROBE_OUT=
EXTRA_APPLETS=(setsid unshare dd tail timeout grep seq kill ps cut tr sed nproc mount yes nc usleep httpd)

# The container's root (host uid 300000) walks from / down to <root>/workspaces/<id>/rootfs
# when the runtime mounts it: the scratch directory (mktemp's 0700) must let it pass. ROOT
# itself is made by lib.sh (0755); see test-container-root-dir.sh for a root the controller
# makes itself.
chmod 0755 "$TMP"

_container_skip_all() {
	skip "$TEST_NAME" "$1"
	exit 0
}

# tools_image_import NAME: imports TOOLS_IMAGE into the test's controller as NAME (STATUS and
# BODY as api sets them). A layer of 400 MiB is unpacked to 1.4 GiB, which takes minutes when
# several tests import it at once on a loaded machine: the request gets 600 s, not api's 90.
tools_image_import() {
	API_MAX_TIME=600 api -q POST /v1/images \
		"$(jq -nc --arg p "$TOOLS_IMAGE" --arg n "$1" '{path: $p, name: $n}')"
}

# Builds the tools image into TOOLS_IMAGE, or finds it there up to date (scripts/build-tools-image,
# minutes the first time), and sets TOOLS_DIGEST. Returns 0 when it is ready; 2 when the Debian
# archive cannot be reached, which TOOLS_IMAGE_WHY names (the machine's network, not the image);
# 1 on any other failure, with the build's last lines in TOOLS_IMAGE_WHY.
tools_image_build() {
	local rc=0 digest waited=0 limit=${TOOLS_IMAGE_WAIT:-300}
	TOOLS_DIGEST='' TOOLS_IMAGE_WHY=''
	# Another process is building it (CI builds it beside the tests): wait for that, but not
	# into run-all's limit for a script (600 s): after TOOLS_IMAGE_WAIT seconds the tests that
	# need it skip, naming why.
	while [[ -e $TOOLS_IMAGE.lock ]] && ! flock -n "$TOOLS_IMAGE.lock" true 2>/dev/null; do
		if ((waited >= limit)); then
			TOOLS_IMAGE_WHY="the tools image is still being built by another process after $limit s"
			return 2
		fi
		sleep 5
		waited=$((waited + 5))
	done
	"$SRC/scripts/build-tools-image" "$TOOLS_IMAGE" >"$TMP/tools-image.out" 2>"$TMP/tools-image.log" || rc=$?
	digest=$(tail -n 1 "$TMP/tools-image.out")
	if [[ $rc -eq 0 && $digest =~ ^sha256:[0-9a-f]{64}$ ]]; then
		TOOLS_DIGEST=$digest
		return 0
	fi
	if [[ $rc -eq 75 ]]; then
		TOOLS_IMAGE_WHY="the tools image cannot be built here: $(tail -n 1 "$TMP/tools-image.log" | sed 's/^build-tools-image: //')"
		return 2
	fi
	TOOLS_IMAGE_WHY="exit $rc: $(tail -n 5 "$TMP/tools-image.log" | tr '\n' ' ')"
	return 1
}

# Skips the whole script when the machine cannot run containers.
container_prereqs() {
	[[ -n $RUNTIME_BIN ]] || _container_skip_all "OCI runtime '$RUNTIME' not installed"
	[[ -x /bin/busybox ]] || _container_skip_all "/bin/busybox missing (apt-get install busybox-static)"
	command -v python3 >/dev/null || _container_skip_all "python3 missing"
	[[ -x $PROBE_BIN ]] || _container_skip_all "$PROBE_BIN not built"
}

# ---------------------------------------------------------------------------------------------
# The image

# container_build_image [DIR]: builds the layout (default $TMP/image) with our extra layer; sets
# IMAGE_DIGEST.
container_build_image() {
	local dir=${1:-$TMP/image} extra=$TMP/extra-layer a
	if [[ ! -f $TMP/extra.tar ]]; then
		mkdir -p "$extra/usr/local/bin" "$extra/bin"
		cp "$PROBE_BIN" "$extra/usr/local/bin/posture-probe"
		chmod 0755 "$extra/usr/local/bin/posture-probe"
		if [[ -x $SIGNAL_PROBE_BIN ]]; then
			cp "$SIGNAL_PROBE_BIN" "$extra/usr/local/bin/signal-probe"
		fi
		if [[ -x $NET_PROBE_BIN ]]; then
			cp "$NET_PROBE_BIN" "$extra/usr/local/bin/net-probe"
		fi
		if [[ -x $PREVIEW_APP_BIN ]]; then
			cp "$PREVIEW_APP_BIN" "$extra/usr/local/bin/preview-app"
		fi
		for a in "${EXTRA_APPLETS[@]}"; do
			ln -sf busybox "$extra/bin/$a"
		done
		tar --sort=name --mtime=@1700000000 --owner=0 --group=0 --numeric-owner \
			-C "$extra" -cf "$TMP/extra.tar" bin usr || return 1
	fi
	local out
	out=$(python3 "$MAKE_IMAGE" "$dir" --extra-layer "$TMP/extra.tar") || {
		diag "make-busybox-image failed"
		return 1
	}
	IMAGE_DIGEST=$(awk '$1 == "manifest" {print $2}' <<<"$out")
	[[ $IMAGE_DIGEST =~ ^sha256:[0-9a-f]{64}$ ]]
}

# container_import_image: imports $TMP/image as "busybox"; sets IMAGE (name@digest).
container_import_image() {
	api -q POST /v1/images "$(jq -nc --arg p "$TMP/image" '{path: $p, name: "busybox"}')"
	if [[ $STATUS != 201 ]]; then
		diag "image import: HTTP $STATUS $(_short "$BODY")"
		return 1
	fi
	IMAGE=busybox@$(j .digest)
	[[ $(j .digest) == "$IMAGE_DIGEST" ]] || {
		diag "imported digest $(j .digest), built $IMAGE_DIGEST"
		return 1
	}
}

# build_image NAME USER [PY]: a busybox image (config User USER) with one more layer made by the
# Python lines PY (a tarfile `tf` and add(name, kind, data=, mode=, target=, uid=, gid=) are in
# scope; kinds D, R, S, F); imported as NAME. Sets IMG to NAME@digest.
IMG=
build_image() {
	local name=$1 user=$2 py=${3:-} dir=$TMP/img-$1 tar=$TMP/layer-$1.tar out
	python3 - "$tar" <<EOF || return 1
import io, sys, tarfile
tf = tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT)
def add(name, kind, data=b"", mode=0o644, target="", uid=0, gid=0):
    ti = tarfile.TarInfo(name)
    ti.mtime, ti.uid, ti.gid, ti.mode, ti.type = 1700000000, uid, gid, mode, kind
    ti.linkname = target
    ti.size = len(data) if kind == tarfile.REGTYPE else 0
    tf.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
D, R, S, F = tarfile.DIRTYPE, tarfile.REGTYPE, tarfile.SYMTYPE, tarfile.FIFOTYPE
$py
tf.close()
EOF
	out=$(python3 "$MAKE_IMAGE" "$dir" --extra-layer "$TMP/extra.tar" --extra-layer "$tar" \
		--user "$user") || return 1
	api -q POST /v1/images "$(jq -nc --arg p "$dir" --arg n "$name" '{path: $p, name: $n}')"
	[[ $STATUS == 201 ]] || {
		diag "import $name: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	IMG=$name@$(j .digest)
}

# ---------------------------------------------------------------------------------------------
# The controller

# start_container_controller [FLAGS...]: a controller on this script's worker with the runtime,
# PROFILES as a profile directory, importing image layouts from beneath $TMP.
start_container_controller() {
	start_controller --worker "$WORKER" --runtime "$RUNTIME" --seccomp-dir "$PROFILES" --import-dir "$TMP" "$@"
}

# require_container_controller [FLAGS...]: checks the prerequisites, builds and imports the
# image, or ends the script with one failure.
require_container_controller() {
	container_prereqs
	if ! start_container_controller "$@"; then
		not_ok "controller starts" "see the diagnostics above"
		exit 1
	fi
	if ! { [[ -n $IMAGE_DIGEST ]] || container_build_image; } || ! container_import_image; then
		not_ok "busybox image builds and imports" "see the diagnostics above"
		exit 1
	fi
}

# start_controller_any [FLAGS...]: like start_controller, but waits only until GET /v1/ready
# answers at all (a controller that is deliberately not ready answers 503).
start_controller_any() {
	mapfile -d '' -t CONTROLLER_FLAGS < <(adapter_flags --worker "$WORKER" "$@")
	echo "=== start $(date +%T.%N) ${CONTROLLER_FLAGS[*]}" >>"$CONTROLLER_LOG"
	"$DAEMON" --root "$ROOT" --worker test --log-format text "${CONTROLLER_FLAGS[@]}" \
		>>"$CONTROLLER_LOG" 2>&1 </dev/null &
	CONTROLLER_PID=$!
	wait_for -t 10 _controller_answers
}

_controller_answers() {
	kill -0 "$CONTROLLER_PID" 2>/dev/null || return 2
	api -q GET /v1/ready
	[[ $STATUS != 000 ]]
}

# ---------------------------------------------------------------------------------------------
# Container workspaces and probes

# cws_body [JSON]: the body creating a container workspace on IMAGE, with the fields of the
# JSON object given (e.g. '{"cpus":0.5}') added.
cws_body() {
	jq -nc --arg img "$IMAGE" --argjson x "${1:-"{}"}" '{adapter: "container", image: $img} + $x'
}

# new_cws VAR [JSON]: creates a container workspace on IMAGE.
new_cws() {
	new_ws "$1" "$(cws_body "${2:-"{}"}")"
}

# probe WS [GROUPS...]: runs the posture probe in WS; its stdout lands in PROBE_OUT.
probe() {
	local ws=$1
	shift
	PROBE_OUT=
	run_cmd "$ws" "posture-probe $*" || return 1
	if [[ $(j .status) != exited || $(j .exitCode) != 0 ]]; then
		_fail "posture-probe: $(j '{status, exitCode, reason, stderr}')"
		return 1
	fi
	PROBE_OUT=$(j .stdout)
}

# pval KEY: the value of KEY in PROBE_OUT ("<missing>" when absent).
pval() {
	awk -v k="$1=" 'index($0, k) == 1 {print substr($0, length(k) + 1); f = 1; exit}
		END {if (!f) print "<missing>"}' <<<"$PROBE_OUT"
}

# assert_probe KEY EXPECTED
assert_probe() {
	assert_eq "$2" "$(pval "$1")" "probe $1"
}

# ---------------------------------------------------------------------------------------------
# What a workspace leaves on the host

runtime_cli() {
	"$RUNTIME_BIN" --root "$ROOT/runtime" "$@"
}

# runtime_knows ID: the runtime's state root lists the container.
# 0 when it does, 1 when a list that worked does not name it, 2 when `list` kept failing for
# 15 s (it fails now and then on a busy machine, runsc's notably): a failed list is neither.
runtime_knows() {
	local out end=$((SECONDS + 15))
	while :; do
		if out=$(runtime_cli list "${RUNTIME_LIST_QUIET:--q}" 2>&1); then
			grep -qxF -- "$1" <<<"$out"
			return
		fi
		((SECONDS < end)) || break
		sleep 0.2
	done
	diag "the runtime's list kept failing: $(_short "$out")"
	return 2
}

# ws_mounts ID: mountinfo lines of this mount namespace that name the workspace's directory.
ws_mounts() {
	grep -F -- "/workspaces/$1/" /proc/self/mountinfo || true
}

# ws_processes ID: host processes whose command line names the workspace (the runtime's shim,
# runs of ours) or that live in one of its cgroups.
ws_processes() {
	local d
	{
		pgrep -f -- "$1" || true
		ws_cgroup_procs "$1"
	} | sort -u | while read -r d; do
		[[ -n $d && $d != "$$" && -e /proc/$d ]] && echo "$d $(tr '\0' ' ' <"/proc/$d/cmdline" 2>/dev/null | cut -c1-120)"
	done
}

# ws_leftovers ID: everything the workspace left behind, one thing a line; empty when clean.
ws_leftovers() {
	local id=$1 d
	ws_mounts "$id" | awk '{print "mount " $5}'
	for d in $(cgroup_dirs "$id"); do
		echo "cgroup $d"
	done
	runtime_knows "$id"
	case $? in
	0) echo "runtime state $id" ;;
	2) echo "runtime state $id unknown: the runtime's list failed" ;;
	esac
	[[ -e $ROOT/workspaces/$id ]] && echo "directory $ROOT/workspaces/$id"
	ws_processes "$id" | sed 's/^/process /'
	return 0
}

# ws_clean ID: a wait_for predicate.
ws_clean() {
	[[ -z $(ws_leftovers "$1") ]]
}

# ws_cgroup_procs ID: pids of every process in the workspace's cgroups and their children (the
# container's group W/c, the runs' groups below it).
ws_cgroup_procs() {
	local d
	for d in $(cgroup_dirs "$1"); do
		find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
	done | sort -u
}

# assert_present ID: the positive control for ws_leftovers — each kind of thing is there to find.
assert_present() {
	local id=$1
	ws_mounts "$id" | grep -q ' - overlay ' || _fail "no overlay mount for $id"
	local n
	n=$(cgroup_dirs "$id" | wc -l)
	assert_le 2 "$n" "cgroup directories of $id"
	runtime_knows "$id" || _fail "the runtime does not list $id"
	[[ -d $ROOT/workspaces/$id ]] || _fail "no directory for $id"
	[[ -n $(ws_cgroup_procs "$id") ]] || _fail "no process in the cgroups of $id"
}

# assert_clean ID: the workspace left nothing on the host (ws_leftovers is empty).
assert_clean() {
	local left l
	left=$(ws_leftovers "$1")
	[[ -z $left ]] && return 0
	_fail "left behind by $1:"
	while IFS= read -r l; do diag "  $l"; done <<<"$left"
	grep -q '^cgroup ' <<<"$left" &&
		diag "BUG: the runtime made <hierarchy>/station-sandbox/<id> as the parent of the" \
			"container's cgroupsPath in hierarchies the controller does not manage; the runtime's" \
			"delete removes only <id>/c (src/adapter/container.c container_remove)"
	return 1
}

# container_init_pid ID: the pid of the container's init (the agent) as the runtime reports it.
container_init_pid() {
	runtime_cli state "$1" 2>/dev/null | jq -r '.pid // empty'
}

# ---------------------------------------------------------------------------------------------
# Cleanup: delete every workspace through the API while a controller runs (lib.sh's _cleanup
# does that too), then remove what a broken controller may have left — runtime containers and
# overlay mounts under TMP — before lib.sh removes TMP.

_container_cleanup() {
	local rc=$?
	trap - EXIT
	local ids=() id m
	if [[ -z $CONTROLLER_PID ]] || ! kill -0 "$CONTROLLER_PID" 2>/dev/null; then
		CONTROLLER_PID=
		if [[ -e $ROOT/station.db && -x $DAEMON ]]; then
			start_controller "${CONTROLLER_FLAGS[@]}" >/dev/null 2>&1 || CONTROLLER_PID=
		fi
	fi
	if [[ -n $CONTROLLER_PID ]]; then
		api -q GET /v1/workspaces
		[[ $STATUS == 200 ]] && mapfile -t ids < <(jq -r '.workspaces[].id' <<<"$BODY" 2>/dev/null)
		for id in "${ids[@]}"; do
			api -q DELETE "/v1/workspaces/$id"
			[[ $STATUS == 200 ]] || echo "cleanup: DELETE $id: $STATUS $BODY" >&2
		done
	fi
	if [[ -n $RUNTIME_BIN && -d $ROOT/runtime ]]; then
		for id in $(runtime_cli list -q 2>/dev/null); do
			echo "cleanup: runtime container $id left behind" >&2
			runtime_cli delete --force "$id" >/dev/null 2>&1
		done
	fi
	# cgroups of this worker's workspaces that the controller did not remove (ids of failed
	# creates are not in WORKSPACES, so lib.sh would not find them)
	for m in $(cgroup_dirs "$WORKER-" | sort -r); do
		find "$m" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	# (the controller's lxcfs at ROOT/lxcfs, and the cover of its cgroup tree, are its own: it
	# stops it when it exits)
	for m in $(awk -v t="$TMP/" -v l="$ROOT/lxcfs" \
		'index($5, t) == 1 && $5 != l && $5 != l "/cgroup" {print $5}' \
		/proc/self/mountinfo | sort -r); do
		echo "cleanup: mount $m left behind" >&2
		umount -l "$m" 2>/dev/null
	done
	(exit "$rc")
	_cleanup
}
trap _container_cleanup EXIT
