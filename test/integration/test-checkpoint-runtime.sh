#!/bin/bash
# run-all: slow: fetches Debian 13's criu (about 8 MB of .debs) the first time
# What a memory snapshot is built from (docs/operations.md "Memory snapshots"), checked on this
# worker below the controller: Debian 13's criu (scripts/criu-trixie, cached in CRIU_TRIXIE)
# passes `criu check` here; a container made from a real workspace's bundle (its user
# namespace, seccomp profile, cgroup, lxcfs and cgroup binds, HOME, run and credential binds)
# with a counter for its process is checkpointed by the runtime and restored, and counts on from
# where it was, not from 0. Then the workspace itself: `runc checkpoint --leave-running` of it is
# tried and what stops it noted (the agent's log and sockets), the workspace answering after.
# shellcheck disable=SC2034 # read by container-lib.sh
CONTAINER_RUNTIME=runc
. "$(dirname "$0")/container-lib.sh"

CRIU_TRIXIE=${CRIU_TRIXIE:-$BUILD/criu-trixie}
CRIU=

require_container_controller

t_criu() {
	local rc=0
	CRIU=$("$SRC/scripts/criu-trixie" "$CRIU_TRIXIE" 2>"$TMP/criu-trixie.log" | tail -n 1) || rc=$?
	if [[ $rc -eq 75 ]]; then
		skip "$1" "the Debian archive cannot be reached: $(tail -n 1 "$TMP/criu-trixie.log")"
		return 2
	fi
	[[ $rc -eq 0 && -x $CRIU ]] || {
		_fail "scripts/criu-trixie: exit $rc: $(tail -n 3 "$TMP/criu-trixie.log" | tr '\n' ' ')"
		return 1
	}
	local version
	version=$("$CRIU" --version | sed -n 's/^Version: //p')
	note "criu $version ($CRIU) on kernel $(uname -r)"
	[[ $(printf '%s\n4.1\n' "$version" | sort -V | head -n 1) == 4.1 ]] ||
		_fail "criu $version is older than 4.1"
	"$CRIU" check >"$TMP/criu-check.out" 2>&1 ||
		_fail "criu check: $(grep -m1 Error "$TMP/criu-check.out")"
}

# a runtime root of its own: the controller's knows only its workspaces
XRT=$TMP/xruntime
XID=xckpt$$
XIMG=$TMP/ckpt-images
XWORK=$TMP/ckpt-work

# the counter of the container XID (empty when it does not answer)
xcount() { runc --root "$XRT" exec "$XID" cat /tmp/n 2>/dev/null | tr -d '\n'; }
_xcounted_past() {
	local n
	n=$(xcount)
	[[ -n $n && $n -gt $1 ]]
}

# runc with Debian 13's criu (runc's --criu; else it runs the criu of its PATH)
xrunc() { runc --criu "$CRIU" --root "$XRT" "$@"; }

t_bundle_checkpoint_restore() {
	[[ -n $CRIU ]] || { skip "$1" "no criu 4.1 (see the case above)"; return 2; }
	new_cws WS || return 1
	local src=$ROOT/workspaces/$WS/bundle bundle=$TMP/ckpt-bundle at after
	mkdir -p "$bundle"
	# the workspace's own config, its process replaced by a counter in its own cgroup
	python3 - "$src/config.json" "$bundle/config.json" "$src" <<'EOF' || return 1
import json, os, sys
spec = json.load(open(sys.argv[1]))
root = spec["root"]["path"]
spec["root"]["path"] = root if root.startswith("/") else os.path.join(sys.argv[3], root)
spec["process"]["args"] = ["/bin/sh", "-c",
    "i=0; while :; do i=$((i+1)); echo $i > /tmp/n; sleep 0.1; done"]
spec["process"]["terminal"] = False
spec["linux"]["cgroupsPath"] = spec["linux"].get("cgroupsPath", "") + "-ckpt"
json.dump(spec, open(sys.argv[2], "w"))
EOF
	# stdio /dev/null: a file of the host (like a log) stops the checkpoint
	(cd "$bundle" && runc --root "$XRT" run -d "$XID" </dev/null >/dev/null 2>&1) || {
		_fail "runc run $XID failed"
		return 1
	}
	# 3 s of counting first, so that a counter started anew reads below it for 3 s
	wait_for -t 30 _xcounted_past 30 || { _fail "the counter never reached 30: '$(xcount)'"; return 1; }
	at=$(xcount)
	xrunc checkpoint --image-path "$XIMG" --work-path "$XWORK" "$XID" 2>"$TMP/xckpt.err" || {
		_fail "runc checkpoint: $(cat "$TMP/xckpt.err"): $(grep -m3 Error "$XWORK/dump.log" | tr '\n' ' ')"
		return 1
	}
	! runc --root "$XRT" list -q | grep -qx "$XID" ||
		_fail "the container still runs after its checkpoint"
	# the restored init looks timens-0.img up in the images directory, by the directory's fd,
	# maybe before criu wrote its uid map (as the overflow uid, 65534): runc makes the
	# directory 0600, so it needs the search bit for all (the files stay criu's, 0600 but that
	# one, 0644); else "Unable to open timens-0.img: Permission denied", now and then
	chmod 0711 "$XIMG"
	xrunc restore -d --bundle "$bundle" --image-path "$XIMG" --work-path "$XWORK" "$XID" \
		</dev/null >/dev/null 2>"$TMP/xrestore.err" || {
		_fail "runc restore: $(cat "$TMP/xrestore.err"): $(grep -m3 Error "$XWORK/restore.log" | tr '\n' ' ')"
		return 1
	}
	# its first answer: from where it was (at, counted before the checkpoint, or a little more)
	wait_for -t 20 _xcounted_past 0 || { _fail "the restored container does not answer"; return 1; }
	after=$(xcount)
	note "last read before the checkpoint $at, first after the restore $after"
	[[ $after -ge $at && $after -lt $((at + 100)) ]] ||
		_fail "restored at $after, last read before the checkpoint $at"
	wait_for -t 20 _xcounted_past "$after" || _fail "the restored counter stopped at $after"
	cleanup_checkpoint
}

_ws_counted_past() {
	local n
	run_cmd "$WS" 'cat $HOME/count' || return 1
	n=$(j .stdout | tr -d '\n')
	[[ -n $n && $n -gt $1 ]]
}

t_workspace_itself() {
	[[ -n $CRIU && -n ${WS:-} ]] || { skip "$1" "no criu 4.1 or no workspace"; return 2; }
	run_start "$WS" "$(json_cmd 'i=0; while :; do i=$((i+1)); echo $i > $HOME/count; sleep 0.1; done')" || return 1
	wait_for -t 20 _ws_counted_past 0 || { _fail "the counter never counted"; return 1; }
	# the controller's runtime root, read-only here: --leave-running changes nothing of it
	if runc --criu "$CRIU" --root "$ROOT/runtime" checkpoint --leave-running \
		--image-path "$XIMG.ws" --work-path "$XWORK.ws" "$WS" 2>"$TMP/wsckpt.err"; then
		note "runc checkpoint of the workspace itself succeeded"
	else
		note "runc checkpoint of the workspace: $(tail -n 1 "$TMP/wsckpt.err")"
		note "criu: $(grep -m1 -E 'Error \(criu/(files-reg|sk-unix)' "$XWORK.ws/dump.log")"
	fi
	# either way the workspace goes on: its agent answers and the counter counts
	local n
	run_cmd "$WS" 'cat $HOME/count' || return 1
	n=$(j .stdout | tr -d '\n')
	wait_for -t 20 _ws_counted_past "$n" || _fail "the workspace stopped counting at $n"
}

CHECK=
_checkpoint_probed() {
	api -q GET /v1/ready
	CHECK=$(j '.checks[] | select(.name == "checkpoint")')
	[[ -n $CHECK && $(jq -r .message <<<"$CHECK") != checking* ]]
}

# --criu: the probe asks that criu, so GET /v1/ready says this worker has the pieces, and a
# memory snapshot is taken.
t_controller_criu() {
	[[ -n $CRIU ]] || { skip "$1" "no criu 4.1 (see the first case)"; return 2; }
	local version
	version=$("$CRIU" --version | sed -n 's/^Version: //p')
	stop_controller TERM
	start_container_controller --criu "$CRIU" || return 1
	wait_for -t 60 _checkpoint_probed || {
		_fail "no probed checkpoint check within 60 s: $(_short "$BODY")"
		return 1
	}
	assert_eq true "$(jq -r .ok <<<"$CHECK")" "checkpoint ok: $CHECK"
	assert_contains "criu $version via runc " "$(jq -r .message <<<"$CHECK")" "message"
	new_cws WS2 || return 1
	# taken (test-checkpoint-memory.sh checks it through)
	api -q POST "/v1/workspaces/$WS2/snapshots" '{"name":"with-memory","memory":true}'
	assert_eq 201 "$STATUS" "memory snapshot: $(_short "$BODY")"
	assert_eq true "$(j .memory)" "memory"
	# a relative --criu is refused at start
	stop_controller TERM
	"$DAEMON" --root "$ROOT" --criu criu >/dev/null 2>"$TMP/relative.err" &&
		_fail "--criu criu was taken"
	assert_contains "--criu must be an absolute path" "$(cat "$TMP/relative.err")" "relative --criu"
	start_container_controller || return 1
}

cleanup_checkpoint() { runc --root "$XRT" delete -f "$XID" >/dev/null 2>&1 || true; }
_exit_all() {
	local rc=$?
	cleanup_checkpoint
	(exit "$rc")
	_cleanup
}
trap _exit_all EXIT

run_or_skip criu-4.1-from-debian-13-passes-check t_criu
run_or_skip workspace-bundle-checkpoints-and-restores-counting-on t_bundle_checkpoint_restore
run_or_skip workspace-itself-checkpoint-tried t_workspace_itself
run_or_skip controller-criu-option-probes-that-criu t_controller_criu
