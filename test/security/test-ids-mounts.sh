#!/bin/bash
# Issue 8 item 2: mounts and ids. Every container workspace has a host uid/gid range of its own
# (nothing one workspace's ids own belongs to another's), the image's layers are shared
# read-only through idmapped mounts, and the rootfs and every bind mount are nosuid,nodev: a
# setuid file of the image raises no one's privileges, in the sandbox or on the host.
. "$(dirname "$0")/../integration/container-lib.sh"

require_container_controller
CWD='.cwd="/"'

# a node image (1000:1000) carrying a copy of the probe that is setuid root (mode 4755, 0:0)
build_image suid 1000:1000 "add('home', D, mode=0o755)
add('home/node', D, mode=0o755, uid=1000, gid=1000)
add('usr', D, mode=0o755)
add('usr/local', D, mode=0o755)
add('usr/local/bin', D, mode=0o755)
add('usr/local/bin/suid-probe', R, data=open('$PROBE_BIN', 'rb').read(), mode=0o4755)" || exit 1
SUID_IMG=$IMG

# ws_base WS: the host uid container root maps to (the second field of the agent's uid_map).
ws_base() {
	local pid
	pid=$(container_init_pid "$1")
	[[ -n $pid ]] && awk 'NR == 1 {print $2}' "/proc/$pid/uid_map"
}

in_range() { # ID BASE
	(($1 >= $2 && $1 < $2 + 65536))
}

t_disjoint_ranges() {
	local a b ba bb ua ub ia ib
	new_cws a "{\"image\":\"$SUID_IMG\"}" || return 1
	new_cws b "{\"image\":\"$SUID_IMG\"}" || return 1
	ba=$(ws_base "$a")
	bb=$(ws_base "$b")
	[[ -n $ba && -n $bb ]] || {
		_fail "no uid_map for the containers"
		return 1
	}
	assert_eq "0 $ba 65536" "$(head -1 "/proc/$(container_init_pid "$a")/gid_map" | xargs)" \
		"gid_map of the first" || return 1
	((ba - bb >= 65536 || bb - ba >= 65536)) || _fail "ranges overlap: $ba and $bb"
	for ws in "$a" "$b"; do
		run_cmd "$ws" 'id -u && touch ~/mine && stat -c %u /bin/busybox' "$CWD" || return 1
		assert_eq "1000 0" "$(j .stdout | xargs)" "uid, and the image's root-owned file as seen inside"
	done
	ua=$(stat -c %u "$ROOT/workspaces/$a/home/mine")
	ub=$(stat -c %u "$ROOT/workspaces/$b/home/mine")
	# positive control: each file is owned by its own workspace's range
	assert_eq "$((ba + 1000))" "$ua" "host owner of the first's file"
	assert_eq "$((bb + 1000))" "$ub" "host owner of the second's file"
	in_range "$ua" "$bb" && _fail "the first's file ($ua) is in the second's range ($bb)"
	in_range "$ub" "$ba" && _fail "the second's file ($ub) is in the first's range ($ba)"
	# the one shared layer, seen on the host through each workspace's rootfs
	ia=$(stat -c %u "$ROOT/workspaces/$a/rootfs/bin/busybox")
	ib=$(stat -c %u "$ROOT/workspaces/$b/rootfs/bin/busybox")
	assert_eq "$ba $bb" "$ia $ib" "host owner of /bin/busybox in each rootfs"
	local layer
	layer=$(find "$ROOT/images/layers" -path '*/bin/busybox' -type f | head -1)
	assert_eq 0:0 "$(stat -c %u:%g "$layer")" "the stored layer keeps the image's ids"
	# only the overlay is mounted: the idmapped layers were detached once it held them
	assert_eq 1 "$(ws_mounts "$a" | wc -l)" "mounts under the first workspace's directory"
	# the workspace directory: root, the container root's group, 0710
	assert_eq "0:$ba 710" "$(stat -c '%u:%g %a' "$ROOT/workspaces/$a")" "workspace directory"
	WS_A=$a
	BASE_A=$ba
}

# The range is the workspace's for good: a controller restart and a workspace restart keep it,
# and a deleted workspace's range goes to the next new one.
t_range_persists() {
	[[ -n $WS_A ]] || return 1
	restart_controller || return 1
	api -q POST "/v1/workspaces/$WS_A/restart"
	assert_status 200 restart || return 1
	assert_eq "$BASE_A" "$(ws_base "$WS_A")" "base after controller and workspace restarts"
	assert_eq "$((BASE_A + 1000))" "$(stat -c %u "$ROOT/workspaces/$WS_A/home/mine")" "HOME kept"
	api -q DELETE "/v1/workspaces/$WS_A"
	assert_status 200 delete || return 1
	wait_for -t 10 ws_clean "$WS_A" || assert_clean "$WS_A"
	local c
	new_cws c "{\"image\":\"$SUID_IMG\"}" || return 1
	assert_eq "$BASE_A" "$(ws_base "$c")" "the freed range is reused"
}

# setuid root in the image: nosuid inside (the mount flag, and the probe's euid), and on the host
# (the host uid of the sandbox's node, in the container root's group, runs it from the rootfs).
t_nosuid() {
	local ws base probe out mnt=$TMP/suid-mnt
	new_cws ws "{\"image\":\"$SUID_IMG\"}" || return 1
	base=$(ws_base "$ws")
	run_cmd "$ws" 'ls -ln /usr/local/bin/suid-probe | cut -c1-10; suid-probe euid' "$CWD" || return 1
	assert_eq "-rwsr-xr-x euid=1000 egid=1000" "$(j .stdout | xargs)" "inside: setuid bit there, no effect"
	run_cmd "$ws" "awk '\$5 == \"/\" || \$5 == \"/home/node\" || \$5 == \"/run/station\" || \$5 == \"/run/station/agent/station-agent\" {print \$5, \$6}' /proc/self/mountinfo" "$CWD" ||
		return 1
	local line
	while read -r line; do
		[[ -z $line ]] && continue
		assert_match 'nosuid' "$line" "mount flags: $line"
		assert_match 'nodev' "$line" "mount flags: $line"
	done <<<"$(j .stdout)"
	assert_eq 4 "$(j .stdout | grep -c .)" "mounts checked"
	assert_match 'nosuid' "$(ws_mounts "$ws" | awk '{print $6}')" "the overlay on the host"
	probe=$ROOT/workspaces/$ws/rootfs/usr/local/bin/suid-probe
	assert_eq "$base 4755" "$(stat -c '%u %a' "$probe")" "on the host: owned by the range's root, setuid"
	out=$(setpriv --reuid=$((base + 1000)) --regid=$((base + 1000)) --groups="$base" "$probe" euid | xargs)
	assert_eq "euid=$((base + 1000)) egid=$((base + 1000))" "$out" "on the host: no effect"
	# positive control: the same file on a mount of the test's own without nosuid
	mkdir -p "$mnt"
	mount -t tmpfs -o size=16m,mode=0755 tmpfs "$mnt" || return 1
	cp -a "$probe" "$mnt/suid-probe"
	out=$(setpriv --reuid=$((base + 1000)) --regid=$((base + 1000)) --groups="$base" "$mnt/suid-probe" euid | xargs)
	umount "$mnt"
	assert_eq "euid=$base egid=$((base + 1000))" "$out" "control: setuid works on a mount without nosuid"
}

# A layer store from before (layers chowned on disk to the single range, a ".ids-<base>" marker
# beside each) is shifted back once and shown through the idmap like any other.
t_legacy_layers() {
	local layer marker ws
	build_image legacy 0:0 "add('legacy', R, data=b'x')" || return 1
	layer=$(dirname "$(find "$ROOT/images/layers" -maxdepth 2 -name legacy -type f)")
	[[ -d $layer ]] || {
		_fail "no layer holding /legacy"
		return 1
	}
	# what the previous controller did: every id + 300000, a marker beside the layer
	python3 - "$layer" <<'EOF' || return 1
import os, sys
for d, dirs, files in os.walk(sys.argv[1]):
    for n in [d] + [os.path.join(d, f) for f in dirs + files]:
        st = os.lstat(n)
        os.lchown(n, st.st_uid + 300000, st.st_gid + 300000)
EOF
	marker=$layer.ids-300000
	: >"$marker"
	assert_eq 300000 "$(stat -c %u "$layer/legacy")" "control: the layer is shifted on disk" || return 1
	new_cws ws "{\"image\":\"$IMG\"}" || return 1
	run_cmd "$ws" 'stat -c %u:%g /legacy' "$CWD" || return 1
	assert_eq 0:0 "$(j .stdout | xargs)" "inside, the file is root's"
	assert_eq 0 "$(stat -c %u "$layer/legacy")" "the layer is back to the image's ids"
	[[ ! -e $marker ]] || _fail "the marker is still there"
}

run_test "two workspaces get disjoint host id ranges; layers idmapped, stored unshifted" t_disjoint_ranges
run_test "a workspace keeps its range across restarts; a deleted one's is reused" t_range_persists
run_test "setuid root in the image: no effect inside or on the host (nosuid), control without" t_nosuid
run_test "a legacy shifted layer is shifted back once" t_legacy_layers
