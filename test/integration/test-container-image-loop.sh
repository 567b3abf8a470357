#!/bin/bash
# The image store's slow work off the event loop (issue 16 item 1): removing an image, and a
# warm pool's claim resolving the create's image.
#
# Removing an image holds nothing but itself: DELETE /v1/images/{digest}
# frees the image's files off the event loop. While they are being freed on a filesystem that
# stops answering, other requests are answered, a create naming the image is refused (the files
# it would mount are going) and a second DELETE finds the image gone; once the filesystem
# answers, the DELETE completes with the image gone. A controller killed in the middle of a
# removal finds the store whole at its next start: the image gone, no part of a layer left
# under a layer's name, and the same image imports and runs again.
#
# A create a warm pool serves resolves its image (the store's record, config and layer dirs) on
# a worker thread: while that read hangs, other requests are answered; once released, the
# member is claimed.
#
# The filesystem that hangs is a FUSE mount (hangfs.py) the test places in the image store: in
# its trash, where a removal empties what it renamed there (emptying the trash opens it, and
# that open gets no answer while the test holds it); over one layer directory, whose stat by
# an image lookup gets no answer meanwhile. Every assertion is an ordering or an outcome, never
# a duration.
. "$(dirname "$0")/container-lib.sh"

container_prereqs
[[ -e /dev/fuse ]] || _container_skip_all "/dev/fuse missing (the hanging filesystem needs FUSE)"

FAKE=$TMP/fake
mkdir -p "$FAKE"
HANG=$FAKE/hang
HANGFS=
HANGFS_PID=

# hangfs_start [DIR OPS]: mounts the hanging filesystem (not hanging yet) on DIR, by default
# in the store's trash, holding OPS (hangfs.py).
hangfs_start() {
	HANGFS=${1:-$ROOT/images/trash/zz-hang}
	mkdir -p "$HANGFS"
	rm -f "$FAKE/hangfs-ready" "$HANG" "$HANG-held"
	python3 "$(dirname "$0")/hangfs.py" "$HANGFS" "$HANG" "$FAKE/hangfs-ready" \
		"${2:-lookup,opendir,open}" 2>>"$TMP/hangfs.log" &
	HANGFS_PID=$!
	wait_for -t 30 test -e "$FAKE/hangfs-ready" || {
		_fail "the FUSE filesystem did not mount: $(cat "$TMP/hangfs.log")"
		return 1
	}
}

hangfs_stop() {
	[[ -n $HANGFS_PID ]] || return 0
	rm -f "$HANG"
	umount "$HANGFS" 2>/dev/null || umount -l "$HANGFS" 2>/dev/null
	wait_for -t 30 _pid_gone "$HANGFS_PID" || kill "$HANGFS_PID" 2>/dev/null
	wait "$HANGFS_PID" 2>/dev/null
	HANGFS_PID=
	[[ $HANGFS == "$ROOT/images/trash/"* ]] && rmdir "$HANGFS" 2>/dev/null
	return 0
}

_remove_cleanup() {
	local rc=$?
	hangfs_stop
	(exit "$rc")
	_container_cleanup
}
trap _remove_cleanup EXIT

# checked N: the controller log has at least N lines of the image store's check at start.
checked() {
	local n
	n=$(grep -c "image store check" "$CONTROLLER_LOG" 2>/dev/null || true)
	((n >= $1))
}

start_remove_controller() {
	local before
	before=$(grep -c "image store check" "$CONTROLLER_LOG" 2>/dev/null || true)
	start_container_controller "$@" || return 1
	# the store's check at start has run (it empties the trash too): the hang is the DELETE's
	wait_for -t 60 checked $((before + 1)) || {
		_fail "the image store's check at start never ended"
		return 1
	}
}

# diff_ids DIGEST: the hex diff ids (layer dir names) of the image's index record.
diff_ids() {
	jq -r '.layers[].diffId | sub("^sha256:"; "")' "$ROOT/images/index/${1#sha256:}.json"
}

# layers_gone IDS...: none of these layer dirs is under images/layers.
layers_gone() {
	local id
	for id in "$@"; do
		[[ ! -e $ROOT/images/layers/$id ]] || return 1
	done
}

# trash_left: what the trash holds besides the hanging mount point.
trash_left() {
	find "$ROOT/images/trash" -mindepth 1 -maxdepth 1 ! -name zz-hang -printf '%f\n' 2>/dev/null
}

# bg_delete N: DELETE the image in the background; status and body in $TMP/del-N.*.
bg_delete() {
	local n=$1
	rm -f "$TMP/del-$n".*
	(
		code=$(curl -sS --max-time 300 --unix-socket "$SOCK" -X DELETE -o "$TMP/del-$n.body" \
			-w '%{http_code}' "http://station/v1/images/$IMAGE_DIGEST" 2>/dev/null) ||
			code=000
		echo "$code" >"$TMP/del-$n.tmp"
		mv "$TMP/del-$n.tmp" "$TMP/del-$n.status"
	) &
}

image_listed() {
	api -q GET /v1/images
	[[ $(j "[.images[] | select(.digest == \"$IMAGE_DIGEST\")] | length") == 1 ]]
}

# --- a removal hung in its filesystem holds only itself ---

t_remove_hung() {
	start_remove_controller || return 1
	{ [[ -n $IMAGE_DIGEST ]] || container_build_image; } && container_import_image || return 1
	local host ids
	new_ws host '{"adapter": "host"}' || return 1
	mapfile -t ids < <(diff_ids "$IMAGE_DIGEST")
	[[ ${#ids[@]} -ge 1 ]] || _fail "no layers in the image's record"
	layers_gone "${ids[@]}" && _fail "the image's layers are not in the store before the removal"
	hangfs_start || return 1
	touch "$HANG"
	bg_delete 1
	# the positive control: the removal reached the filesystem that hangs
	wait_for -t 60 test -e "$HANG-held" || {
		_fail "the removal never reached the hanging filesystem"
		return 1
	}
	api -q GET /v1/ready
	assert_status 200 "GET /v1/ready while the removal hangs"
	run_cmd "$host" "echo alive" || return 1
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "exec on a host workspace while the removal hangs"
	api -q GET /v1/images
	assert_status 200 "GET /v1/images while the removal hangs"
	assert_eq 0 "$(j "[.images[] | select(.digest == \"$IMAGE_DIGEST\")] | length")" \
		"the image listed while its files are being freed (its record goes first)"
	# the attack: a create racing the removal does not get the image whose files are going
	api -q POST /v1/workspaces "$(cws_body)"
	assert_status 409 "a create naming the image being removed"
	assert_eq image "$(j .error.field)" "the field it names"
	assert_contains "being removed" "$(j .error.message)" "the error says why"
	note "create while removing: HTTP $STATUS $(j .error.message)"
	api -q GET /v1/workspaces
	assert_eq 0 "$(j '[.workspaces[] | select(.adapter == "container")] | length')" \
		"container workspaces after the refused create"
	# a second DELETE: the image is no longer in the store
	api -q DELETE "/v1/images/$IMAGE_DIGEST"
	assert_status 404 "a second DELETE while the first frees the files"
	note "second DELETE: HTTP $STATUS $(j .error.message)"
	# the ordering: all of the above answered while the removal still hangs
	[[ -e $TMP/del-1.status ]] && _fail "the DELETE answered while its filesystem still hung"
	[[ -e $HANG-held ]] || _fail "the filesystem was released before the others answered"
	rm -f "$HANG"
	wait_for -t 120 test -s "$TMP/del-1.status" || _fail "the DELETE never answered after the release"
	assert_eq 200 "$(cat "$TMP/del-1.status" 2>/dev/null)" "the DELETE after the release"
	assert_eq true "$(jq -r .removed "$TMP/del-1.body" 2>/dev/null)" "its answer"
	image_listed && _fail "the image is still listed after its removal"
	layers_gone "${ids[@]}" || _fail "layers left under images/layers: ${ids[*]}"
	assert_eq "" "$(trash_left)" "the trash after the removal"
	# the positive control of the refusal: the image is simply not in the store now
	api -q POST /v1/workspaces "$(cws_body)"
	assert_status 400 "a create naming the removed image"
	assert_contains "not in store" "$(j .error.message)" "the error says so"
	hangfs_stop
	api -q DELETE "/v1/workspaces/$host"
	stop_controller
}

# --- a controller killed in the middle of a removal: the store is whole at the next start ---

t_remove_killed() {
	start_remove_controller || return 1
	container_import_image || {
		_fail "the image does not import again after its removal"
		return 1
	}
	local ids
	mapfile -t ids < <(diff_ids "$IMAGE_DIGEST")
	hangfs_start || return 1
	touch "$HANG"
	bg_delete 2
	wait_for -t 60 test -e "$HANG-held" || {
		_fail "the removal never reached the hanging filesystem"
		return 1
	}
	# SIGKILL: the thread held in the filesystem waits for its answer (as on a dead network
	# share), the rest of the controller is gone at once (its main thread a zombie); released,
	# that thread ends with the process, in the middle of the removal
	local pid=$CONTROLLER_PID
	kill -KILL "$pid"
	wait_for -t 60 _pid_gone "$pid" || _fail "the controller did not take SIGKILL"
	rm -f "$HANG"
	wait "$pid" 2>/dev/null
	CONTROLLER_PID=
	wait_for -t 60 test -s "$TMP/del-2.status" || _fail "the DELETE's client never ended"
	note "the DELETE when its controller was killed: $(cat "$TMP/del-2.status" 2>/dev/null)"
	hangfs_stop
	start_remove_controller || return 1
	image_listed && _fail "the image is listed after the killed removal (its record went first)"
	layers_gone "${ids[@]}" || _fail "layers left under images/layers: ${ids[*]}"
	assert_eq "" "$(trash_left)" "the trash after the check at start"
	# the same image imports again, whole, and runs
	container_import_image || {
		_fail "the image does not import again after the killed removal"
		return 1
	}
	local ws
	new_cws ws || return 1
	run_cmd "$ws" "test -x /usr/local/bin/posture-probe && test -x /bin/busybox && echo whole" ||
		return 1
	assert_eq "whole" "$(j .stdout | tr -d '\n')" "a command in a workspace of the image imported again"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete of the workspace"
	api -q DELETE "/v1/images/$IMAGE_DIGEST"
	assert_status 200 "the removal with nothing hanging"
	image_listed && _fail "the image is still listed"
	stop_controller
}

# --- a pool's claim resolves the create's image off the loop ---

# create_keyed KEY BODY: POST /v1/workspaces with an Idempotency-Key; sets STATUS and BODY.
create_keyed() {
	STATUS=$(curl -sS --max-time 90 --unix-socket "$SOCK" -X POST -H "Idempotency-Key: $1" \
		-H 'Content-Type: application/json' --data-binary "$2" -o "$TMP/keyed.body" \
		-w '%{http_code}' http://station/v1/workspaces 2>/dev/null) || STATUS=000
	BODY=$(cat "$TMP/keyed.body" 2>/dev/null)
}

pool_ready() {
	api -q GET /v1/worker
	[[ $(j '.pools[0].ready') == "$1" ]]
}

t_claim_hung() {
	start_remove_controller || return 1
	container_import_image || return 1
	stop_controller
	start_remove_controller --pool "$IMAGE,size=1" || return 1
	local host ids
	new_ws host '{"adapter": "host"}' || return 1
	wait_for -t 120 pool_ready 1 || {
		_fail "the pool never had a ready member: $BODY"
		return 1
	}
	# the image's top layer dir answers a stat only when released (the member's rootfs is
	# mounted already and keeps its own)
	mapfile -t ids < <(diff_ids "$IMAGE_DIGEST")
	hangfs_start "$ROOT/images/layers/${ids[-1]}" getattr || return 1
	touch "$HANG"
	rm -f "$TMP"/claim.*
	(
		code=$(curl -sS --max-time 300 --unix-socket "$SOCK" -X POST \
			-H 'Content-Type: application/json' -H 'Idempotency-Key: claim-1' \
			--data-binary "$(cws_body)" -o "$TMP/claim.body" -w '%{http_code}' \
			http://station/v1/workspaces 2>/dev/null) || code=000
		echo "$code" >"$TMP/claim.tmp"
		mv "$TMP/claim.tmp" "$TMP/claim.status"
	) &
	# the positive control: the claim's resolve reached the layer dir that hangs
	wait_for -t 60 test -e "$HANG-held" || {
		_fail "the claim never read the image store"
		return 1
	}
	api -q GET /v1/ready
	assert_status 200 "GET /v1/ready while the claim's resolve hangs"
	run_cmd "$host" "echo alive" || return 1
	assert_eq "alive" "$(j .stdout | tr -d '\n')" "exec on a host workspace while the claim's resolve hangs"
	api -q GET /v1/worker
	assert_status 200 "GET /v1/worker while the claim's resolve hangs"
	assert_eq 0 "$(j '.pools[0].claimed')" "members claimed while the resolve hangs"
	# the same key again while the first is under way: not a second workspace
	create_keyed claim-1 "$(cws_body)"
	assert_status 409 "the same Idempotency-Key while the first create is under way"
	assert_eq in_progress "$(j .error.code)" "its code"
	# the ordering: all of the above answered while the resolve still hangs
	[[ -e $TMP/claim.status ]] && _fail "the create answered while its resolve still hung"
	[[ -e $HANG-held ]] || _fail "the resolve was released before the others answered"
	rm -f "$HANG"
	wait_for -t 120 test -s "$TMP/claim.status" || _fail "the create never answered after the release"
	hangfs_stop
	assert_eq 201 "$(cat "$TMP/claim.status" 2>/dev/null)" "the create after the release"
	local ws
	ws=$(jq -r .id "$TMP/claim.body" 2>/dev/null)
	WORKSPACES+=("$ws")
	api -q GET /v1/worker
	assert_eq 1 "$(j '.pools[0].claimed')" "served by the pool's member"
	# the key names the claimed workspace
	create_keyed claim-1 "$(cws_body)"
	assert_eq "$ws" "$(j .id)" "the Idempotency-Key's replay"
	run_cmd "$ws" "echo claimed" || return 1
	assert_eq "claimed" "$(j .stdout | tr -d '\n')" "a command in the claimed workspace"
	api -q DELETE "/v1/workspaces/$ws"
	assert_status 200 "delete of the claimed workspace"
	api -q DELETE "/v1/workspaces/$host"
	stop_controller
}

run_test "a removal hung in its filesystem: ready, exec and list answer; a racing create is refused" \
	t_remove_hung
run_test "a controller killed mid-removal: the image gone, no partial layer, imports and runs again" \
	t_remove_killed
run_test "a pool's claim hung resolving the image: ready, exec and worker answer; then claimed" \
	t_claim_hung
