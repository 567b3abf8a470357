#!/bin/bash
# Snapshots and fork of host workspaces (docs/api.md "Snapshots and fork"), on a worker whose
# host workspaces run as --host-user nobody: a host workspace's snapshot holds its HOME alone
# (adapter "host", no base image); files written in HOME and its working directory before it
# are in every fork of `fork 3` and in a create from it, owned by the host user, and a write in
# one fork is in no other and not in the source; a HOME holding a symlink to a host directory,
# a symlink to a host file and a FIFO is snapshotted and forked without the host changing
# (contents, owners, modes and mtimes the same; the fork's links are links, the FIFO is left
# out) beside a plain file that is carried (the control); a host snapshot given to a container
# create, or with an image, is 400 naming the mismatch while a host create from it works (the
# control); a paused host workspace is snapshotted and stays paused.
. "$(dirname "$0")/lib.sh"

HOST_USER=nobody
# the host user walks from / down to its HOME under ROOT
chmod 0755 "$TMP"

require_controller --host-user "$HOST_USER"

# out_of WS COMMAND: the command's stdout in OUT, or the test fails.
OUT=
out_of() {
	run_cmd "$1" "$2" || return 1
	OUT=$(j .stdout)
	[[ $(j .exitCode) == 0 ]] || {
		_fail "'$2' in $1: exit $(j .exitCode), stderr $(_short "$(j .stderr)")"
		return 1
	}
}

# snapshot WS [BODY]: POST …/snapshots; SNAP the new id (201 expected).
SNAP=
snapshot() {
	api -q POST "/v1/workspaces/$1/snapshots" "${2-{\}}"
	SNAP=
	[[ $STATUS == 201 ]] || {
		_fail "snapshot of $1: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	SNAP=$(j .id)
}

# fork WS N: POST …/fork; FORKS the new ids.
FORKS=()
fork() {
	FORKS=()
	api -q POST "/v1/workspaces/$1/fork" "{\"count\":$2}"
	[[ $STATUS == 201 ]] || {
		_fail "fork of $1: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	mapfile -t FORKS < <(j '.workspaces[].id')
	WORKSPACES+=("${FORKS[@]}")
}

FILES='cat ~/home.txt ~/deep/er/f ~/workspace/work.txt | tr "\n" " "'

WS=
S1=
t_setup() {
	new_ws WS '{"adapter":"host"}' || return 1
	out_of "$WS" 'echo home-1 >~/home.txt && mkdir -p ~/deep/er && echo deep >~/deep/er/f && echo work-1 >work.txt && pwd' || return 1
	assert_eq "$(api -q GET "/v1/workspaces/$WS" && j .workdir)" "$OUT" "work.txt is in the working directory" || return 1
	snapshot "$WS" '{"name":"host-first"}' || return 1
	S1=$SNAP
	assert_match '^s-test-[a-z2-7]{26}$' "$S1" "the id: s-, the worker, the random part" || return 1
	assert_eq "$WS host-first host null false" \
		"$(j '"\(.workspaceId) \(.name) \(.adapter) \(.baseImage) \(.memory)"')" "its fields" || return 1
	assert_match '^sha256:[0-9a-f]{64}$' "$(j .image)" "an image digest" || return 1
	assert_match '^[0-9]+$' "$(j .pausedMs)" "pausedMs" || return 1
	api -q GET "/v1/workspaces/$WS"
	assert_eq ready "$(j .state)" "the source is ready again" || return 1
	out_of "$WS" 'echo still-runs' || return 1
	assert_eq still-runs "$OUT" "and runs commands"
}

t_fork_three() {
	local f
	fork "$WS" 3 || return 1
	assert_eq 3 "${#FORKS[@]}" "three workspaces: $(_short "$BODY")" || return 1
	assert_eq "host host host" "$(j '[.workspaces[].adapter] | join(" ")')" "host workspaces" || return 1
	for f in "${FORKS[@]}"; do
		out_of "$f" "$FILES" || return 1
		assert_eq "home-1 deep work-1 " "$OUT" "fork $f has HOME's and the working directory's files" || return 1
		out_of "$f" 'stat -c %U ~ ~/home.txt ~/deep/er/f ~/workspace ~/workspace/work.txt | sort -u' || return 1
		assert_eq "$HOST_USER" "$OUT" "fork $f's HOME is the host user's" || return 1
	done
	out_of "${FORKS[0]}" 'echo only-0 >~/home.txt && echo only-0 >work.txt && echo mine >~/new.txt && echo ok' || return 1
	for f in "${FORKS[1]}" "${FORKS[2]}" "$WS"; do
		out_of "$f" "$FILES; if test -e ~/new.txt; then echo new; fi" || return 1
		assert_eq "home-1 deep work-1 " "$OUT" "fork 0's writes are not in $f" || return 1
	done
	out_of "${FORKS[0]}" "$FILES" || return 1
	assert_eq "only-0 deep only-0 " "$OUT" "control: fork 0 has its own writes"
}

t_create_from_snapshot() {
	local ws
	api -q POST /v1/workspaces "{\"adapter\":\"container\",\"snapshot\":\"$S1\"}"
	assert_eq 400 "$STATUS" "a container create from a host snapshot: $(_short "$BODY")" || return 1
	assert_eq adapter "$(j .error.field)" "names the adapter" || return 1
	assert_contains "is of a host workspace" "$(j .error.message)" "says the snapshot is a host one" || return 1
	api -q POST /v1/workspaces "{\"snapshot\":\"$S1\",\"image\":\"busybox@sha256:$(printf '%064d' 0)\"}"
	assert_eq 400 "$STATUS" "an image beside a host snapshot: $(_short "$BODY")" || return 1
	assert_eq image "$(j .error.field)" "names the image" || return 1
	new_ws ws "{\"adapter\":\"host\",\"snapshot\":\"$S1\"}" || return 1
	assert_eq "host $S1" "$(j '"\(.adapter) \(.snapshot)"')" "control: a host create from it" || return 1
	out_of "$ws" "$FILES" || return 1
	assert_eq "home-1 deep work-1 " "$OUT" "HOME as at the snapshot" || return 1
	out_of "$ws" 'echo mine >>~/home.txt && echo ok' || return 1
	new_ws ws "{\"snapshot\":\"$S1\"}" || return 1
	assert_eq host "$(j .adapter)" "no adapter named: the snapshot's" || return 1
	out_of "$ws" "$FILES" || return 1
	assert_eq "home-1 deep work-1 " "$OUT" "HOME as at the snapshot, not as another create changed it"
}

# The host side the hostile HOME points at: a directory with a file, and a file.
HOSTDIR=$TMP/hostdir
HOSTFILE=$TMP/hostfile
host_state() {
	(cd "$HOSTDIR" && find . -printf '%p %s %T@ %m %U:%G\n' | sort && md5sum ./*)
	stat -c '%s %Y %m %U:%G' "$HOSTFILE"
	md5sum <"$HOSTFILE"
}

t_hostile_home() {
	local ws before after f
	mkdir -p "$HOSTDIR" && echo host-secret >"$HOSTDIR/secret.txt" && echo host-file >"$HOSTFILE"
	chmod 0755 "$HOSTDIR"
	chmod 0644 "$HOSTFILE" "$HOSTDIR/secret.txt"
	touch -d '2001-01-01' "$HOSTDIR/secret.txt" "$HOSTFILE"
	before=$(host_state)
	new_ws ws '{"adapter":"host"}' || return 1
	out_of "$ws" "ln -s $HOSTDIR ~/to-dir && ln -s $HOSTFILE ~/workspace/to-file && mkfifo ~/fifo && echo plain >~/plain.txt && echo ok" || return 1
	snapshot "$ws" || return 1
	fork "$ws" 1 || return 1
	f=${FORKS[0]}
	after=$(host_state)
	assert_eq "$before" "$after" "the host's directory and file are unchanged" || return 1
	out_of "$f" 'cat ~/plain.txt; for l in to-dir workspace/to-file; do test -L ~/$l && readlink ~/$l; done; test -e ~/fifo || echo no-fifo' || return 1
	assert_eq "plain
$HOSTDIR
$HOSTFILE
no-fifo" "$OUT" "the plain file is carried (control), the links are links, the FIFO is left out" || return 1
	out_of "$ws" 'test -p ~/fifo && echo fifo' || return 1
	assert_eq fifo "$OUT" "the source's FIFO is still there"
}

t_paused() {
	local ws
	new_ws ws '{"adapter":"host"}' || return 1
	out_of "$ws" 'echo before-pause >~/p.txt && echo ok' || return 1
	api -q POST "/v1/workspaces/$ws/pause"
	assert_eq "200 paused" "$STATUS $(j .state)" "pause: $(_short "$BODY")" || return 1
	snapshot "$ws" || return 1
	assert_eq 0 "$(j .pausedMs)" "not frozen again: paused already" || return 1
	api -q GET "/v1/workspaces/$ws"
	assert_eq paused "$(j .state)" "left paused" || return 1
	new_ws ws "{\"snapshot\":\"$SNAP\"}" || return 1
	out_of "$ws" 'cat ~/p.txt' || return 1
	assert_eq before-pause "$OUT" "a create from it has the file"
}

run_test "setup: a host workspace's snapshot of its HOME, the source runs after" t_setup
[[ -n $S1 ]] || exit 1
run_test "fork 3: every fork has the files as the host user's, a write in one is in no other" t_fork_three
run_test "create from a host snapshot: host only, no image beside it" t_create_from_snapshot
run_test "a HOME with links to the host and a FIFO: the host untouched" t_hostile_home
run_test "a paused host workspace's snapshot leaves it paused" t_paused
