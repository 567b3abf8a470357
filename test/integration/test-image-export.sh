#!/bin/bash
# Image export (docs/api.md, GET /v1/images/{digest}/export; docs/cli.md, image export) between
# two real controllers, each with its own root and worker name: the busybox image exported with
# the CLI and by curl is the same bytes, and imported into the second controller it has the same
# digest. A container workspace's snapshot, with a file written under /etc and one in HOME,
# exports as its image; imported into the second controller, a workspace created from that image
# there holds both files; a file of the base image's /home/node the workspace deleted before the
# snapshot is not in such a workspace's HOME there (the kept one is). A layer blob damaged in the store (an image of our own, exported whole
# just before as the control) cuts the transfer short: curl and the CLI exit non-zero, the CLI
# leaves no file, the controller's log names the blob. Another tenant's image is 404 on export
# while its own tenant's token exports it; an unknown digest is 404, and the CLI says so.
. "$(dirname "$0")/container-lib.sh"

PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
EXPORTS=$TMP/exports
mkdir -p "$EXPORTS"

container_prereqs
container_build_image || {
	not_ok "busybox image builds" "see the diagnostics above"
	exit 1
}
require_container_controller --listen "tcp:127.0.0.1:$PORT" --tenant-images 'busybox@*' \
	--tenant-networks none

# The second controller: a root of its own beneath TMP, importing from EXPORTS only. Its worker
# name contains container-lib's WORKER followed by '-', so the cleanup finds its cgroups too.
C2_ROOT=$TMP/c2
C2_SOCK=$C2_ROOT/station.sock
C2_LOG=$C2_ROOT/controller.log
C2_PID=
c2_ready() {
	kill -0 "$C2_PID" 2>/dev/null || return 2
	[[ $(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$C2_SOCK" http://x/v1/ready) == 200 ]]
}
start_c2() {
	mkdir -p "$C2_ROOT"
	"$DAEMON" --root "$C2_ROOT" --worker "x$WORKER" --log-format text --network-range none \
		--adapters host,container --default-adapter host --runtime "$RUNTIME" \
		--seccomp-dir "$PROFILES" --import-dir "$EXPORTS" >>"$C2_LOG" 2>&1 </dev/null &
	C2_PID=$!
	wait_for -t 20 c2_ready || {
		diag "the second controller did not become ready within 20 s"
		tail -n 30 "$C2_LOG" | sed 's/^/#   /'
		return 1
	}
}
# on_c2 CMD...: CMD (api, new_ws, run_cmd, …) against the second controller.
on_c2() {
	local SOCK=$C2_SOCK
	"$@"
}
cleanup_c2() {
	local rc=$? id ids=()
	if [[ -n $C2_PID ]] && kill -0 "$C2_PID" 2>/dev/null; then
		on_c2 api -q GET /v1/workspaces
		[[ $STATUS == 200 ]] && mapfile -t ids < <(j '.workspaces[].id')
		for id in "${ids[@]}"; do
			on_c2 api -q DELETE "/v1/workspaces/$id"
			[[ $STATUS == 200 ]] || echo "cleanup: DELETE $id on the second controller: $STATUS $BODY" >&2
		done
		kill -TERM "$C2_PID" 2>/dev/null
		wait_for -t 20 _pid_gone "$C2_PID" || kill -KILL "$C2_PID" 2>/dev/null
		wait "$C2_PID" 2>/dev/null
	fi
	if [[ -n $RUNTIME_BIN && -d $C2_ROOT/runtime ]]; then
		for id in $("$RUNTIME_BIN" --root "$C2_ROOT/runtime" list -q 2>/dev/null); do
			echo "cleanup: runtime container $id of the second controller left behind" >&2
			"$RUNTIME_BIN" --root "$C2_ROOT/runtime" delete --force "$id" >/dev/null 2>&1
		done
	fi
	(exit "$rc")
	_container_cleanup
}
trap cleanup_c2 EXIT
start_c2 || {
	not_ok "the second controller starts" "see the diagnostics above"
	exit 1
}

# tapi TOKEN METHOD PATH [BODY] [-o FILE]: one request over TCP with TOKEN; sets STATUS and BODY.
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
	BODY=$(head -c 4096 "$TMP/tbody" | tr -d '\0')
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

# export_curl DIGEST FILE: GET …/export over the unix socket into FILE; sets STATUS, and
# CURL_RC to curl's exit status.
CURL_RC=
export_curl() {
	CURL_RC=0
	STATUS=$(curl -sS --max-time 90 --unix-socket "$SOCK" -o "$2" -w '%{http_code}' \
		"http://station/v1/images/$1/export" 2>"$TMP/curl-err") || CURL_RC=$?
}

# import_c2 FILE: imports FILE (beneath EXPORTS) into the second controller; the image in BODY.
import_c2() {
	on_c2 api -q POST /v1/images "$(jq -nc --arg p "$1" '{path: $p}')"
	[[ $STATUS == 201 ]] || {
		_fail "import of $1 into the second controller: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
}

t_busybox_round_trip() {
	local tar=$EXPORTS/busybox.tar err
	err=$(cli image export "$IMAGE" -o "$tar" 2>&1) || {
		_fail "image export $IMAGE: exit $?: $err"
		return 1
	}
	[[ -s $tar ]] || _fail "no tar written at $tar"
	tar -tf "$tar" >"$TMP/list" || _fail "the export is not a tar"
	assert_contains "oci-layout" "$(cat "$TMP/list")" "the tar's entries" || return 1
	assert_contains "blobs/sha256/${IMAGE_DIGEST#sha256:}" "$(cat "$TMP/list")" "its manifest" || return 1
	export_curl "$IMAGE_DIGEST" "$TMP/busybox-curl.tar"
	assert_eq "200 0" "$STATUS $CURL_RC" "curl's export: $(cat "$TMP/curl-err")" || return 1
	assert_files_eq "$tar" "$TMP/busybox-curl.tar" "the CLI's and curl's exports" || return 1
	import_c2 "$tar" || return 1
	assert_eq "$IMAGE_DIGEST" "$(j .digest)" "the digest on the second controller" || return 1
	assert_eq "$(api -q GET "/v1/images/$IMAGE_DIGEST" && j '[.size, .layers]')" \
		"$(j '[.size, .layers]')" "size and layers as on the first"
}

t_snapshot_round_trip() {
	local ws snap_image tar=$EXPORTS/snapshot.tar ws2
	new_cws ws || return 1
	out_of "$ws" 'echo etc-export >/etc/export-etc && mkdir -p ~/deep && echo home-export >~/deep/home.txt && echo ok' || return 1
	api -q POST "/v1/workspaces/$ws/snapshots" '{"name":"to-export"}'
	assert_eq 201 "$STATUS" "the snapshot: $(_short "$BODY")" || return 1
	snap_image=$(j .image)
	assert_match '^sha256:[0-9a-f]{64}$' "$snap_image" "the snapshot's image" || return 1
	cli image export "$snap_image" -o "$tar" 2>"$TMP/cli-err" || {
		_fail "image export of the snapshot's image: $(cat "$TMP/cli-err")"
		return 1
	}
	import_c2 "$tar" || return 1
	assert_eq "$snap_image" "$(j .digest)" "the digest on the second controller" || return 1
	on_c2 new_ws ws2 "$(jq -nc --arg i "$snap_image" '{adapter: "container", image: $i}')" || return 1
	assert_match "^x$WORKER-" "$ws2" "made on the second controller" || return 1
	on_c2 out_of "$ws2" 'cat /etc/export-etc ~/deep/home.txt | tr "\n" " "' || return 1
	assert_eq "etc-export home-export " "$OUT" "the /etc file and the HOME file" || return 1
	# the control: the busybox image alone has neither
	on_c2 new_ws ws2 "$(jq -nc --arg i "$IMAGE_DIGEST" '{adapter: "container", image: $i}')" || return 1
	on_c2 out_of "$ws2" 'ls /etc/export-etc ~/deep 2>&1; echo done' || return 1
	assert_contains "No such file" "$OUT" "the busybox image has no such files"
}

# A base image with two files in /home/node; the workspace deletes one before its snapshot.
# Imported into the second controller, a workspace made from the snapshot's image there has
# the kept one (the control) and not the deleted one: the snapshot's HOME hides the base's.
t_snapshot_home_deletion() {
	local ws snap_image tar=$EXPORTS/snapshot-home.tar ws2
	build_image homed 0:0 '
add("home", D, mode=0o755)
add("home/node", D, mode=0o755)
add("home/node/base-gone.txt", R, b"base-gone\n")
add("home/node/base-kept.txt", R, b"base-kept\n")' || return 1
	new_ws ws "$(jq -nc --arg i "$IMG" '{adapter: "container", image: $i}')" || return 1
	out_of "$ws" 'cat ~/base-gone.txt ~/base-kept.txt | tr "\n" " "' || return 1
	assert_eq "base-gone base-kept " "$OUT" "the new HOME has the base image's files" || return 1
	out_of "$ws" 'rm ~/base-gone.txt && echo ws-new >~/ws-new.txt && echo ok' || return 1
	api -q POST "/v1/workspaces/$ws/snapshots" '{}'
	assert_eq 201 "$STATUS" "the snapshot: $(_short "$BODY")" || return 1
	snap_image=$(j .image)
	cli image export "$snap_image" -o "$tar" 2>"$TMP/cli-err" || {
		_fail "image export of the snapshot's image: $(cat "$TMP/cli-err")"
		return 1
	}
	import_c2 "$tar" || return 1
	on_c2 new_ws ws2 "$(jq -nc --arg i "$snap_image" '{adapter: "container", image: $i}')" || return 1
	on_c2 out_of "$ws2" 'ls -a ~ | grep -v "^\.*$" | tr "\n" " "' || return 1
	assert_eq "base-kept.txt workspace ws-new.txt " "$OUT" "HOME on the second controller" || return 1
	on_c2 out_of "$ws2" 'cat ~/base-kept.txt ~/ws-new.txt | tr "\n" " "' || return 1
	assert_eq "base-kept ws-new " "$OUT" "the kept and the new file's contents" || return 1
}

t_damaged_layer() {
	local digest layer hex blob tar=$EXPORTS/damaged.tar err rc
	build_image damaged 0:0 'add("damaged.txt", R, b"x" * 100000)' || return 1
	digest=${IMG#*@}
	layer=$(jq -r '.layers[-1].digest' "$ROOT/images/blobs/sha256/${digest#sha256:}") || return 1
	blob=$ROOT/images/blobs/sha256/${layer#sha256:}
	[[ -f $blob ]] || {
		_fail "no blob $blob"
		return 1
	}
	# the control: whole, the same image exports
	cli image export "$IMG" -o "$tar" 2>"$TMP/cli-err" || {
		_fail "control: image export of the undamaged image: $(cat "$TMP/cli-err")"
		return 1
	}
	tar -tf "$tar" >/dev/null || _fail "control: the export is a whole tar"
	rm -f "$tar"
	# one byte flipped in the middle of a copy, renamed over the blob
	python3 - "$blob" <<'EOF' || return 1
import os, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0xff
with open(p + ".tmp", "wb") as f:
    f.write(b)
os.chmod(p + ".tmp", os.stat(p).st_mode & 0o7777)
os.rename(p + ".tmp", p)
EOF
	export_curl "$digest" "$TMP/damaged-curl.tar"
	assert_eq 200 "$STATUS" "the answer starts before the layer" || return 1
	assert_ne 0 "$CURL_RC" "curl's exit status for the cut transfer" || return 1
	err=$(cli image export "$IMG" -o "$tar" 2>&1)
	rc=$?
	assert_ne 0 "$rc" "the CLI's exit status" || return 1
	assert_contains "cut short" "$err" "the CLI's message" || return 1
	assert_eq "" "$(find "$EXPORTS" -name 'damaged*')" "no file left by the CLI" || return 1
	# (the store's messages name a blob by its digest's first 12 hex digits)
	hex=${layer#sha256:}
	wait_for -t 10 grep -q "image export failed.*layer blob sha256:${hex:0:12} .*does not match its digest" \
		"$CONTROLLER_LOG" ||
		_fail "the controller's log names the blob: $(grep 'image export' "$CONTROLLER_LOG" | tail -n 3)"
}

TA='' TB=''
new_token() {
	api -q POST /v1/tokens "$2"
	[[ $STATUS == 201 ]] || {
		diag "token create: HTTP $STATUS $(_short "$BODY")"
		return 1
	}
	printf -v "$1" '%s' "$(j .token)"
}

t_tenants() {
	local wa image
	new_token TA '{"name":"a","scope":"tenant","tenant":"tenant-a"}' || return 1
	new_token TB '{"name":"b","scope":"tenant","tenant":"tenant-b"}' || return 1
	tapi "$TA" POST /v1/workspaces "$(jq -nc --arg i "$IMAGE" '{image: $i}')"
	assert_eq 201 "$STATUS" "tenant A creates a workspace: $(_short "$BODY")" || return 1
	wa=$(j .id)
	WORKSPACES+=("$wa")
	tapi "$TA" POST "/v1/workspaces/$wa/snapshots" '{}'
	assert_eq 201 "$STATUS" "tenant A snapshots it: $(_short "$BODY")" || return 1
	image=$(j .image)
	tapi "$TB" GET "/v1/images/$image/export"
	assert_eq 404 "$STATUS" "B's export of A's image: $(_short "$BODY")" || return 1
	assert_eq not_found "$(j .error.code)" "the code" || return 1
	tapi "$TA" GET "/v1/images/$image/export"
	assert_eq 200 "$STATUS" "control: A exports its own: $(_short "$BODY")" || return 1
	tar -tf "$TMP/tbody" | grep -qx "blobs/sha256/${image#sha256:}" ||
		_fail "A's export holds its manifest"
	tapi "$TB" GET "/v1/images/$IMAGE_DIGEST/export"
	assert_eq 200 "$STATUS" "control: B exports the operator's image"
}

t_unknown() {
	local none err rc
	none=sha256:$(printf '0%.0s' {1..64})
	api -q GET "/v1/images/$none/export"
	assert_eq 404 "$STATUS" "GET …/export of an unknown digest" || return 1
	assert_contains "${none#sha256:}" "$(j .error.message)" "names the digest" || return 1
	err=$(cli image export "$none" -o "$EXPORTS/none.tar" 2>&1)
	rc=$?
	assert_ne 0 "$rc" "the CLI's exit status" || return 1
	assert_contains "not in" "$err" "the CLI's message" || return 1
	[[ ! -e $EXPORTS/none.tar ]] || _fail "the CLI wrote $EXPORTS/none.tar"
	assert_eq "" "$(find "$EXPORTS" -name 'none.tar*')" "no file left"
}

run_test "the busybox image exported (CLI and curl, the same bytes) imports elsewhere with its digest" t_busybox_round_trip
run_test "a snapshot's image exported and imported elsewhere gives a workspace its /etc and HOME files" t_snapshot_round_trip
run_test "a file of the base image deleted from HOME before the snapshot stays deleted elsewhere" t_snapshot_home_deletion
run_test "another tenant's image is 404 on export, its own tenant's token exports it" t_tenants
run_test "an unknown digest's export is 404, the CLI says so and writes nothing" t_unknown
run_test "a damaged layer blob cuts the export short, no file left, the log names the blob" t_damaged_layer
