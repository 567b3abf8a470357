#!/bin/bash
# A hostile image and a careless API client against the image store (issue 8, items 2 and 5):
# import paths outside the configured import directories (outside, "..", symlinks), a
# decompression bomb, a layer file owned 0:70000 with setuid and file capabilities, and a pull
# from a registry that stalls mid-blob while the API must keep answering. Each attack has its
# positive control beside it: the same layout where it is allowed, the same bomb under a larger
# limit, ids inside the range kept, the same API calls answered after the pull completes.
. "$(dirname "$0")/../integration/lib.sh"

MAKE_IMAGE=$SRC/test/helpers/make-busybox-image
FAKE_REGISTRY=$SRC/test/image/fake-registry
IMPORTS=$TMP/imports
mkdir -p "$IMPORTS" "$TMP/outside"

# layout DIR [LAYER-TAR...]: builds the busybox layout in DIR with extra layers; prints the
# manifest digest.
layout() {
	local dir=$1 args=() t
	shift
	for t in "$@"; do
		args+=(--extra-layer "$t")
	done
	python3 "$MAKE_IMAGE" "$dir" "${args[@]}" | awk '$1 == "manifest" {print $2}'
}

import() {
	api -q POST /v1/images "$(jq -nc --arg p "$1" '{path: $p, name: "busybox"}')"
}

# store_empty: no image, blob, layer or temporary in the store.
store_empty() {
	api -q GET /v1/images
	assert_eq '[]' "$(j .images)" "images in the store"
	assert_eq '' "$(find "$ROOT/images" -mindepth 1 ! -type d ! -name lock)" "files in the store"
	assert_eq '' "$(find "$ROOT/images/layers" -mindepth 1 -maxdepth 1)" "unpacked layers"
}

remove_all_images() {
	local d
	api -q GET /v1/images
	for d in $(j '.images[].digest'); do
		api -q DELETE "/v1/images/$d"
		assert_status 200 "remove $d"
	done
}

# refused STATUS NEEDLE...: the last answer is STATUS and its message contains each NEEDLE.
refused() {
	local status=$1 n
	shift
	assert_status "$status" "refusal"
	for n in "$@"; do
		assert_contains "$n" "$(j .error.message)" "error message"
	done
	note "refused: HTTP $STATUS $(j .error.message)"
}

# --- import paths ---

t_path_outside() {
	layout "$TMP/outside/image" >/dev/null || return 1
	import "$TMP/outside/image"
	refused 400 "is not beneath an import directory" "$IMPORTS"
	assert_eq path "$(j .error.field)" "error field"
	import "$IMPORTS/../outside/image"
	refused 400 "leaves import directory $IMPORTS"
	store_empty
	# control: the same layout beneath the import directory
	cp -a "$TMP/outside/image" "$IMPORTS/image"
	import "$IMPORTS/image"
	assert_status 201 "import from beneath the import directory"
	remove_all_images
}

t_symlink_escape() {
	ln -sfn "$TMP/outside/image" "$IMPORTS/link"
	import "$IMPORTS/link"
	refused 400 "goes through a symlink"
	ln -sfn "$TMP/outside" "$IMPORTS/dirlink"
	import "$IMPORTS/dirlink/image"
	refused 400 "goes through a symlink"
	# a symlink inside a layout (its index.json) is refused as well: layouts are read through
	# fds beneath the layout, and only regular files are read
	cp -a "$TMP/outside/image" "$IMPORTS/sneaky"
	rm "$IMPORTS/sneaky/index.json"
	ln -s "$TMP/outside/image/index.json" "$IMPORTS/sneaky/index.json"
	import "$IMPORTS/sneaky"
	refused 400 "index.json leads out of the layout"
	store_empty
	# control: the link's target copied in as a real directory imports (t_path_outside) and so
	# does the layout as a tar beneath the import directory
	tar -C "$TMP/outside/image" -cf "$IMPORTS/image.tar" .
	import "$IMPORTS/image.tar"
	assert_status 201 "import of a tar beneath the import directory"
	remove_all_images
}

# Two imports of the same layout at once: both answer with the image, the store holds it once.
t_concurrent_same_digest() {
	local i pids=()
	for i in 1 2; do
		curl -sS --max-time 90 --unix-socket "$SOCK" -o "$TMP/conc-$i" -w '%{http_code}' \
			-H 'Content-Type: application/json' -X POST http://station/v1/images \
			-d "$(jq -nc --arg p "$IMPORTS/image" '{path: $p}')" >"$TMP/conc-$i.status" &
		pids+=($!)
	done
	wait "${pids[@]}"
	assert_eq 201 "$(cat "$TMP/conc-1.status")" "first import"
	assert_eq 201 "$(cat "$TMP/conc-2.status")" "second import"
	assert_eq "$(jq -r .digest "$TMP/conc-1")" "$(jq -r .digest "$TMP/conc-2")" "same digest"
	api -q GET /v1/images
	assert_eq 1 "$(j '.images | length')" "images in the store"
	assert_eq '' "$(find "$ROOT/images" -name '*.tmp-*' -o -name '.tmp-*')" "temporaries left"
	remove_all_images
}

# --- bounds ---

# bomb_tar FILE MIB: a gzip layer tar of one file of MIB MiB of zeros (a few dozen KiB).
bomb_tar() {
	python3 - "$1" "$2" <<'EOF'
import io, sys, tarfile
path, mib = sys.argv[1], int(sys.argv[2])
class Zeros(io.RawIOBase):
    def __init__(self, n): self.n = n
    def readable(self): return True
    def readinto(self, b):
        k = min(len(b), self.n); b[:k] = bytes(k); self.n -= k; return k
with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tf:
    ti = tarfile.TarInfo("zeros"); ti.size = mib << 20; ti.mtime = 1700000000
    tf.addfile(ti, io.BufferedReader(Zeros(ti.size)))
EOF
}

t_decompression_bomb() {
	local size
	bomb_tar "$TMP/bomb.tar.gz" 64 || return 1
	size=$(stat -c %s "$TMP/bomb.tar.gz")
	note "the bomb: $size bytes of gzip, 64 MiB unpacked"
	layout "$IMPORTS/bomb" "$TMP/bomb.tar.gz" >/dev/null || return 1
	stop_controller
	start_controller --import-dir "$IMPORTS" --max-layer-bytes $((32 << 20)) || return 1
	import "$IMPORTS/bomb"
	refused 413 "layer sha256:" "decompresses to more than 33554432 bytes" "--max-layer-bytes"
	store_empty
	stop_controller
	start_controller --import-dir "$IMPORTS" --max-image-bytes $((48 << 20)) || return 1
	import "$IMPORTS/bomb"
	refused 413 "layer sha256:" "--max-image-bytes"
	store_empty
	stop_controller
	start_controller --import-dir "$IMPORTS" --max-image-entries 3 || return 1
	import "$IMPORTS/bomb"
	refused 413 "layer sha256:" "entries" "--max-image-entries"
	store_empty
	# control: the same layout under a limit it fits
	stop_controller
	start_controller --import-dir "$IMPORTS" --max-layer-bytes $((128 << 20)) || return 1
	import "$IMPORTS/bomb"
	assert_status 201 "the same layout under a 128 MiB layer limit"
	remove_all_images
}

# --- owners and capabilities of layer files ---

# crafted_tar FILE: "suid" 0:70000 mode 4755 with security.capability (cap_net_raw), "user"
# 1000:1000 mode 4755 with user.origin, "nobodyish" 70000:70000.
crafted_tar() {
	python3 - "$1" <<'EOF'
import base64, io, sys, tarfile
caps = bytes([1, 0, 0, 2, 0, 0x20, 0, 0]) + bytes(12)  # vfs_cap_data rev 2, cap_net_raw
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as tf:
    def add(name, uid, gid, mode, pax):
        ti = tarfile.TarInfo(name); ti.uid, ti.gid, ti.mode = uid, gid, mode
        ti.size = 3; ti.mtime = 1700000000; ti.pax_headers = pax
        tf.addfile(ti, io.BytesIO(b"x\n\n"))
    add("suid", 0, 70000, 0o4755,
        {"LIBARCHIVE.xattr.security.capability": base64.b64encode(caps).decode()})
    add("user", 1000, 1000, 0o4755, {"SCHILY.xattr.user.origin": "test"})
    add("nobodyish", 70000, 70000, 0o644, {})
EOF
}

# xattr PATH NAME: the xattr's value in hex, or "none".
xattr() {
	python3 -c 'import os, sys
try: print(os.getxattr(sys.argv[1], sys.argv[2], follow_symlinks=False).hex())
except OSError: print("none")' "$1" "$2"
}

t_layer_ids_and_caps() {
	local diff layer
	crafted_tar "$TMP/crafted.tar" || return 1
	# the tar does carry what the test says (the attack is real)
	assert_eq "0:70000 4755" "$(python3 -c 'import sys, tarfile
m = tarfile.open(sys.argv[1]).getmember("suid"); print(f"{m.uid}:{m.gid} {m.mode:o}")' \
		"$TMP/crafted.tar")" "the crafted tar's suid entry"
	layout "$IMPORTS/crafted" "$TMP/crafted.tar" >/dev/null || return 1
	import "$IMPORTS/crafted"
	assert_status 201 "import of the crafted layout" || return 1
	diff=$(sha256sum "$TMP/crafted.tar" | cut -d' ' -f1)
	layer=$ROOT/images/layers/$diff
	[[ -d $layer ]] || { _fail "layer $diff not in the store"; return 1; }
	assert_eq "0:65534 4755" "$(stat -c '%u:%g %a' "$layer/suid")" "suid file on the host"
	assert_eq "65534:65534 644" "$(stat -c '%u:%g %a' "$layer/nobodyish")" "70000:70000 file"
	assert_eq none "$(xattr "$layer/suid" security.capability)" "file capability on the host"
	# controls: ids inside the range and user.* xattrs are kept; the capability reader sees a
	# capability where there is one
	assert_eq "1000:1000 4755" "$(stat -c '%u:%g %a' "$layer/user")" "1000:1000 file"
	assert_eq "$(printf test | od -An -tx1 | tr -d ' \n')" "$(xattr "$layer/user" user.origin)" \
		"user.* xattr"
	cp "$TMP/crafted.tar" "$TMP/capfile"
	python3 -c 'import os, sys
os.setxattr(sys.argv[1], "security.capability", bytes([1, 0, 0, 2, 0, 0x20]) + bytes(14))' \
		"$TMP/capfile" || return 1
	assert_eq 0100000200200000000000000000000000000000 "$(xattr "$TMP/capfile" security.capability)" \
		"the reader sees a capability"
	remove_all_images
}

# --- a stalled pull does not freeze the API ---

registry_port() {
	[[ -s $TMP/registry.port ]]
}

t_stalled_pull() {
	local manifest layer_digest ref port reg_pid pull_pid ws
	manifest=$(layout "$TMP/registry-image") || return 1
	layer_digest=$(jq -r '.layers[0].digest' \
		"$TMP/registry-image/blobs/sha256/${manifest#sha256:}")
	python3 "$FAKE_REGISTRY" "$TMP/registry-image" "$TMP/registry.port" \
		--stall "$layer_digest" "$TMP/stalled" "$TMP/gate" &
	reg_pid=$!
	wait_for -t 10 registry_port || { _fail "the fake registry did not start"; return 1; }
	port=$(cat "$TMP/registry.port")
	ref=127.0.0.1:$port/busybox@$manifest
	new_ws ws '{"adapter":"host"}' || return 1
	curl -sS --max-time 120 --unix-socket "$SOCK" -o "$TMP/pull" -w '%{http_code}' \
		-H 'Content-Type: application/json' -X POST http://station/v1/images \
		-d "$(jq -nc --arg r "$ref" '{reference: $r, plainHttp: true}')" \
		>"$TMP/pull.status" &
	pull_pid=$!
	wait_for -t 30 test -e "$TMP/stalled" || { _fail "the pull never reached the layer"; return 1; }
	# the pull is stalled mid-blob: the API answers, a host workspace runs a command
	api -q GET /v1/worker
	assert_status 200 "GET /v1/worker during the stalled pull"
	run_cmd "$ws" 'echo alive' || return 1
	assert_eq exited "$(j .status)" "run status during the stalled pull"
	assert_eq alive "$(j .stdout | tr -d '\n')" "run output during the stalled pull"
	api -q GET /v1/images
	assert_status 200 "GET /v1/images during the stalled pull"
	# the pull runs in a program of its own, not a fork of the threaded controller (whose
	# copy could hang on a lock another thread held at the fork): one thread, its own command
	local job
	job=$(pgrep -P "$CONTROLLER_PID" -f -- '--image-job' | head -1)
	assert_ne '' "$job" "the pull's process, a child of the controller running --image-job"
	if [[ -n $job ]]; then
		assert_eq "station-sandboxd --image-job" \
			"$(tr '\0' ' ' <"/proc/$job/cmdline" | cut -d' ' -f1-2)" "its command"
		assert_eq 1 "$(awk '/^Threads:/ {print $2}' "/proc/$job/status")" "its threads"
	fi
	[[ -e $TMP/pull.status && -s $TMP/pull.status ]] && _fail "the pull answered before the gate"
	# let the blob finish: the pull completes with the image
	touch "$TMP/gate"
	wait "$pull_pid"
	assert_eq 201 "$(cat "$TMP/pull.status")" "the pull after the stall"
	assert_eq "$manifest" "$(jq -r .digest "$TMP/pull")" "pulled digest"
	kill "$reg_pid" 2>/dev/null
	wait "$reg_pid" 2>/dev/null
	api -q DELETE "/v1/workspaces/$ws"
	remove_all_images
}

# --- path imports need a configured directory ---

t_not_enabled() {
	stop_controller
	start_controller || return 1
	import "$IMPORTS/image"
	refused 400 "not enabled" "--import-dir"
	store_empty
	# control: the same request on a controller with the directory configured
	stop_controller
	start_controller --import-dir "$IMPORTS" || return 1
	import "$IMPORTS/image"
	assert_status 201 "the same import with --import-dir"
	remove_all_images
}

require_controller --import-dir "$IMPORTS"
run_test "import path outside the import directory (or through ..) refused, control imports" t_path_outside
run_test "import path through a symlink refused, control imports" t_symlink_escape
run_test "two imports of the same layout at once: one image, both answered" t_concurrent_same_digest
run_test "layer owners past 65535 become 65534, file capabilities dropped; 1000:1000 kept" t_layer_ids_and_caps
run_test "API and host exec answer while a pull stalls mid-blob; the pull then completes" t_stalled_pull
run_test "decompression bomb refused naming layer and limit, nothing left; control imports" t_decompression_bomb
run_test "path imports refused without --import-dir, naming the option; control imports" t_not_enabled
