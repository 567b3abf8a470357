#!/bin/bash
# run-all: slow: a dozen container workspaces created, snapshotted and forked
# Snapshots and fork (docs/api.md "Snapshots and fork") against a real controller and container
# workspaces of the busybox image: files written in HOME and under /etc before a snapshot are in
# every fork of `fork 3`, a write in one fork is in no other and not in the source; a create
# from the snapshot has them (a host create from it is 400 naming the adapter); a HOME holding
# a symlink to a host directory, a symlink to a host file and a FIFO is snapshotted and forked
# without the host changing (contents, listing and mtimes the same; the fork's links are links,
# the FIFO is left out, no hang) beside a plain file that is carried (the control); another
# tenant's snapshot id is 404 on GET, DELETE and create from it while its own tenant's token
# gets it; --max-snapshot-bytes refuses a snapshot past it with 413 naming the file (the
# others, under it, are the control) and leaves the workspace running; the snapshot's image is
# listed and DELETE of it is 409 naming the snapshot; DELETE of a snapshot a workspace runs on
# is 409, then 204, then GET is 404. A snapshot reads durable once its image is on disk; one
# found not durable at a start (as after a power loss before its fsync) is kept and made
# durable when its image holds, and removed with its image when a blob's content no longer
# matches its digest. Host workspaces' snapshots: test-snapshot-host.sh.
. "$(dirname "$0")/container-lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
MAX_SNAPSHOT_BYTES=$((4 << 20))

container_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}
require_container_controller --listen "tcp:127.0.0.1:$PORT" --max-snapshot-bytes "$MAX_SNAPSHOT_BYTES" \
	--tenant-images 'busybox@*' --tenant-networks none

# tapi TOKEN METHOD PATH [BODY]: one request over TCP with TOKEN; sets STATUS and BODY.
tapi() {
	local token=$1 method=$2 path=$3 args
	args=(-sS --max-time 90 -X "$method" -o "$TMP/tbody" -w '%{http_code}'
		-H "Authorization: Bearer $token")
	if [[ $# -ge 4 ]]; then
		printf '%s' "$4" >"$TMP/treq"
		args+=(-H 'Content-Type: application/json' --data-binary "@$TMP/treq")
	fi
	: >"$TMP/tbody"
	STATUS=$(curl "${args[@]}" "$URL$path" 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/tbody")
}

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

WS=
S1=
t_setup() {
	new_cws WS || return 1
	out_of "$WS" 'echo home-1 >~/home.txt && mkdir -p ~/deep/er && echo deep >~/deep/er/f && echo etc-1 >/etc/snap-etc && echo ok' || return 1
	snapshot "$WS" '{"name":"first"}' || return 1
	S1=$SNAP
	assert_match "^s-$WORKER-[a-z2-7]{26}\$" "$S1" "the id: s-, the worker, the random part" || return 1
	assert_eq "$WS first false" "$(j '"\(.workspaceId) \(.name) \(.memory)"')" "its fields" || return 1
	assert_match '^sha256:[0-9a-f]{64}$' "$(j .image)" "an image digest" || return 1
	assert_eq "$IMAGE_DIGEST" "$(j .baseImage)" "made on the workspace's image" || return 1
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
	assert_match '^s-' "$(j .snapshot)" "the fork's snapshot" || return 1
	assert_match '^[0-9]+$' "$(j .pausedMs)" "the source's pause" || return 1
	for f in "${FORKS[@]}"; do
		out_of "$f" 'cat ~/home.txt ~/deep/er/f /etc/snap-etc | tr "\n" " "' || return 1
		assert_eq "home-1 deep etc-1 " "$OUT" "fork $f has HOME's and /etc's files" || return 1
	done
	out_of "${FORKS[0]}" 'echo only-0 >~/home.txt && echo only-0 >/etc/snap-etc && echo mine >~/new.txt && echo ok' || return 1
	for f in "${FORKS[1]}" "${FORKS[2]}" "$WS"; do
		out_of "$f" 'cat ~/home.txt /etc/snap-etc | tr "\n" " "; if test -e ~/new.txt; then echo new; fi' || return 1
		assert_eq "home-1 etc-1 " "$OUT" "fork 0's writes are not in $f" || return 1
	done
}

t_create_from_snapshot() {
	local ws owner
	out_of "$WS" 'stat -c %U:%G ~/home.txt ~ && echo later >~/home.txt' || return 1
	owner=$OUT
	new_ws ws "{\"snapshot\":\"$S1\"}" || return 1
	out_of "$ws" 'cat ~/home.txt /etc/snap-etc | tr "\n" " "' || return 1
	assert_eq "home-1 etc-1 " "$OUT" "HOME and /etc as at the snapshot" || return 1
	out_of "$ws" 'stat -c %U:%G ~/home.txt ~' || return 1
	assert_eq "$owner" "$OUT" "owned as in the source, in the new workspace's range" || return 1
	api -q POST /v1/workspaces "$(cws_body "{\"snapshot\":\"$S1\"}")"
	assert_eq 400 "$STATUS" "another image beside the snapshot: $(_short "$BODY")" || return 1
	assert_eq image "$(j .error.field)" "names the image" || return 1
	api -q POST /v1/workspaces "{\"adapter\":\"host\",\"snapshot\":\"$S1\"}"
	assert_eq 400 "$STATUS" "a host create from a container snapshot: $(_short "$BODY")" || return 1
	assert_eq adapter "$(j .error.field)" "names the adapter" || return 1
	assert_contains "is of a container workspace" "$(j .error.message)" "says which" || return 1
	api -q POST /v1/workspaces "{\"snapshot\":\"s-$WORKER-aaaaaaaaaaaaaaaaaaaaaaaaaa\"}"
	assert_eq 404 "$STATUS" "a missing snapshot: $(_short "$BODY")" || return 1
	api -q POST /v1/workspaces '{"snapshot":"s-nonesuch"}'
	assert_eq 400 "$STATUS" "no snapshot id: $(_short "$BODY")" || return 1
	assert_eq snapshot "$(j .error.field)" "names the field" || return 1
	assert_contains 'invalid snapshot id "s-nonesuch"' "$(j .error.message)" "and the id"
}

# The host side the hostile HOME points at: a directory with a file, and a file.
HOSTDIR=$TMP/hostdir
HOSTFILE=$TMP/hostfile
host_state() {
	(cd "$HOSTDIR" && find . -printf '%p %s %T@ %m\n' | sort && md5sum ./*)
	stat -c '%s %Y %m' "$HOSTFILE"
	md5sum <"$HOSTFILE"
}

t_hostile_home() {
	local ws before after f
	mkdir -p "$HOSTDIR" && echo host-secret >"$HOSTDIR/secret.txt" && echo host-file >"$HOSTFILE"
	chmod 0755 "$HOSTDIR"
	touch -d '2001-01-01' "$HOSTDIR/secret.txt" "$HOSTFILE"
	before=$(host_state)
	new_cws ws || return 1
	out_of "$ws" "ln -s $HOSTDIR ~/to-dir && ln -s $HOSTFILE ~/to-file && ln -s /etc ~/to-etc && mkfifo ~/fifo && echo plain >~/plain.txt && echo ok" || return 1
	snapshot "$ws" || return 1
	fork "$ws" 1 || return 1
	f=${FORKS[0]}
	after=$(host_state)
	assert_eq "$before" "$after" "the host's directory and file are unchanged" || return 1
	out_of "$f" 'cat ~/plain.txt; for l in to-dir to-file to-etc; do test -L ~/$l && readlink ~/$l; done; test -e ~/fifo || echo no-fifo' || return 1
	assert_eq "plain
$HOSTDIR
$HOSTFILE
/etc
no-fifo" "$OUT" "the plain file is carried (control), the links are links, the FIFO is left out" || return 1
	out_of "$ws" 'test -p ~/fifo && echo fifo' || return 1
	assert_eq fifo "$OUT" "the source's FIFO is still there"
}

TA= TB=
new_token() {
	api -q POST /v1/tokens "$2"
	[[ $STATUS == 201 ]] || {
		diag "token create: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	printf -v "$1" '%s' "$(j .token)"
}

t_tenants() {
	local wa sa wb
	new_token TA '{"name":"a","scope":"tenant","tenant":"tenant-a"}' || return 1
	new_token TB '{"name":"b","scope":"tenant","tenant":"tenant-b"}' || return 1
	tapi "$TA" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i}')"
	assert_eq 201 "$STATUS" "tenant A creates a workspace: $(_short "$BODY")" || return 1
	wa=$(j .id)
	WORKSPACES+=("$wa")
	tapi "$TA" POST "/v1/workspaces/$wa/snapshots" '{}'
	assert_eq 201 "$STATUS" "tenant A snapshots it: $(_short "$BODY")" || return 1
	sa=$(j .id)
	assert_eq tenant-a "$(j .tenant)" "the snapshot is A's" || return 1
	tapi "$TA" GET "/v1/snapshots/$sa"
	assert_eq 200 "$STATUS" "control: A gets its snapshot" || return 1
	tapi "$TA" GET /v1/snapshots
	assert_eq "$sa" "$(j '[.snapshots[].id] | join(" ")')" "A lists its own only" || return 1
	tapi "$TB" GET "/v1/snapshots/$sa"
	assert_eq 404 "$STATUS" "B's GET of A's snapshot" || return 1
	tapi "$TB" GET "/v1/snapshots/s-$WORKER-aaaaaaaaaaaaaaaaaaaaaaaaaa"
	assert_eq 404 "$STATUS" "as a missing one" || return 1
	tapi "$TB" DELETE "/v1/snapshots/$sa"
	assert_eq 404 "$STATUS" "B's DELETE of A's snapshot" || return 1
	tapi "$TB" POST /v1/workspaces "{\"snapshot\":\"$sa\"}"
	assert_eq 404 "$STATUS" "B's create from A's snapshot: $(_short "$BODY")" || return 1
	tapi "$TB" GET /v1/snapshots
	assert_eq "0" "$(j '.snapshots | length')" "B lists none" || return 1
	tapi "$TA" POST /v1/workspaces "{\"snapshot\":\"$sa\"}"
	assert_eq 201 "$STATUS" "control: A creates from its own: $(_short "$BODY")" || return 1
	wb=$(j .id)
	WORKSPACES+=("$wb")
	tapi "$TA" GET "/v1/snapshots/$sa"
	assert_eq 200 "$STATUS" "A's snapshot is still there after B's DELETE"
}

t_max_bytes() {
	local ws
	new_cws ws || return 1
	out_of "$ws" "dd if=/dev/zero of=\$HOME/big.bin bs=1048576 count=5 && echo ok" || return 1
	api -q POST "/v1/workspaces/$ws/snapshots" '{}'
	assert_eq 413 "$STATUS" "a snapshot past --max-snapshot-bytes: $(_short "$BODY")" || return 1
	assert_contains big.bin "$(j .error.message)" "names the file" || return 1
	out_of "$ws" 'echo runs' || return 1
	assert_eq runs "$OUT" "the workspace runs after the refusal" || return 1
	out_of "$ws" "rm \$HOME/big.bin && dd if=/dev/zero of=\$HOME/small.bin bs=1048576 count=3 && echo ok" || return 1
	snapshot "$ws" || return 1
	assert_eq $((3 << 20)) "$(j .sizeBytes)" "control: 3 MiB under the 4 MiB limit"
}

t_image_of_snapshot() {
	local image
	api -q GET "/v1/snapshots/$S1"
	image=$(j .image)
	api -q GET /v1/images
	assert_eq "snapshot/$S1" "$(j ".images[] | select(.digest == \"$image\") | .name")" \
		"the snapshot's image is listed" || return 1
	api -q DELETE "/v1/images/$image"
	assert_eq 409 "$STATUS" "DELETE of the snapshot's image: $(_short "$BODY")" || return 1
	assert_contains "$S1" "$(j .error.message)" "names the snapshot"
}

t_delete() {
	local image ws
	api -q GET "/v1/snapshots/$S1"
	image=$(j .image)
	api -q DELETE "/v1/snapshots/$S1"
	assert_eq 409 "$STATUS" "DELETE while a workspace runs on it: $(_short "$BODY")" || return 1
	for ws in "${WORKSPACES[@]}"; do
		api -q GET "/v1/workspaces/$ws"
		[[ $(j .snapshot) == "$S1" || $(j .image) == *"$image" ]] || continue
		api -q DELETE "/v1/workspaces/$ws"
	done
	api -q DELETE "/v1/snapshots/$S1"
	assert_eq 204 "$STATUS" "then DELETE: $(_short "$BODY")" || return 1
	api -q GET "/v1/snapshots/$S1"
	assert_eq 404 "$STATUS" "GET after DELETE" || return 1
	api -q GET /v1/images
	assert_eq "" "$(j ".images[] | select(.digest == \"$image\") | .digest")" "its image is gone"
}

# durable_is ID: GET /v1/snapshots/ID reads durable true.
durable_is() {
	api -q GET "/v1/snapshots/$1"
	[[ $STATUS == 200 && $(j .durable) == true ]]
}

gone() {
	api -q GET "/v1/snapshots/$1"
	[[ $STATUS == 404 ]]
}

# The blob of the top layer of image DIGEST, from its index record.
top_layer_blob() {
	local hex
	hex=$(jq -r '.layers[-1].digest' "$ROOT/images/index/${1#sha256:}.json" | cut -d: -f2) || return 1
	echo "$ROOT/images/blobs/sha256/$hex"
}

t_durable_recover() {
	local ok bad ok_image bad_image blob ws
	out_of "$WS" 'echo kept >~/durable.txt && echo ok' || return 1
	snapshot "$WS" || return 1
	ok=$SNAP
	assert_match '^(true|false)$' "$(j .durable)" "the answer says whether it is on disk" || return 1
	wait_for -t 60 durable_is "$ok" || _fail "$ok not durable in 60 s: $(_short "$BODY")" || return 1
	ok_image=$(j .image)
	out_of "$WS" 'echo lost >~/durable.txt && echo ok' || return 1
	snapshot "$WS" || return 1
	bad=$SNAP
	wait_for -t 60 durable_is "$bad" || _fail "$bad not durable in 60 s: $(_short "$BODY")" || return 1
	bad_image=$(j .image)
	[[ $ok_image != "$bad_image" ]] || _fail "two trees, one image: $ok_image" || return 1
	blob=$(top_layer_blob "$bad_image") && [[ -f $blob ]] || _fail "no layer blob for $bad_image" || return 1

	# as after a power loss between the answer and the fsync: both rows not durable, the
	# second's layer blob not what its digest says
	stop_controller KILL
	sqlite3 "$ROOT/station.db" "UPDATE snapshots SET durable = 0 WHERE id IN ('$ok', '$bad')" ||
		_fail "sqlite3 UPDATE" || return 1
	printf 'XXXXXXXX' | dd of="$blob" bs=1 seek=1024 conv=notrunc status=none ||
		_fail "cannot change $blob" || return 1
	restart_controller || return 1
	wait_for -t 60 gone "$bad" || _fail "the snapshot whose blob changed is still there: $(_short "$BODY")" || return 1
	wait_for -t 60 durable_is "$ok" || _fail "the intact one not durable again: $(_short "$BODY")" || return 1
	api -q GET /v1/images
	assert_eq "" "$(j ".images[] | select(.digest == \"$bad_image\") | .digest")" "the lost one's image removed" || return 1
	assert_eq "$ok_image" "$(j ".images[] | select(.digest == \"$ok_image\") | .digest")" "the intact one's image kept" || return 1
	new_ws ws "{\"snapshot\":\"$ok\"}" || return 1
	out_of "$ws" 'cat ~/durable.txt' || return 1
	assert_eq kept "$OUT" "a workspace from the intact one has its file"
}

run_test "setup: a snapshot of HOME and /etc, the source runs after" t_setup || exit 1
run_test "fork 3: every fork has the files, a write in one is in no other" t_fork_three
run_test "create from a snapshot: its HOME and /etc; another image or a missing one refused" t_create_from_snapshot
run_test "a HOME with links to the host and a FIFO: the host untouched" t_hostile_home
run_test "another tenant's snapshot is 404 on GET, DELETE and create" t_tenants
run_test "--max-snapshot-bytes: 413 naming the file, the workspace runs" t_max_bytes
run_test "the snapshot's image is listed, its DELETE is 409" t_image_of_snapshot
run_test "DELETE: 409 while in use, 204, then 404" t_delete
run_test "durable once on disk; at a start one not durable is checked: kept or removed" t_durable_recover
