#!/bin/bash
# run-all: exclusive: net-world: the outside worlds of net-world.sh (documentation networks, routes, nft tables) are few per machine
# run-all: slow: it builds the tools image first (scripts/build-tools-image: about 25 min on a machine that has none, seconds once built) unless another script has
# The outside world of the network tests (net-world.sh), without any controller: its hosts
# answer from the host itself, and from a namespace that plays a workspace (veth, masquerade, its
# own resolv.conf naming the world's DNS) the seed's workflow runs: git clone over smart HTTP,
# npm ci from the test registry, npm install --global, the binary prints its text. world_down
# leaves nothing behind.
#
# The tools image is built into TOOLS_IMAGE (default <source>/build/tools-image, shared with
# test-tools-image and test-network-seed) or found there up to date, under the build's lock:
# a script that comes second waits for the first one's build.
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net-world.sh"

if ! world_prereqs; then
	skip "$TEST_NAME" "$WORLD_WHY"
	exit 0
fi
for t in curl jq; do
	command -v $t >/dev/null || {
		skip "$TEST_NAME" "$t missing"
		exit 0
	}
done
# host_routes: how the host reaches each address it uses itself, one line each.
host_routes() {
	local a
	for a in $(_world_host_addresses | sort -u); do
		echo "$a: $(ip -4 route get "$a" 2>&1 | head -n 1)"
	done
}
HOST_ROUTES_BEFORE=$(host_routes)

# The tools image, before the world comes up (the build reaches the Debian archive the host's
# way). TOOLS_SKIP: why its case cannot run here; a build that fails otherwise fails the case.
TOOLS_IMAGE=${TOOLS_IMAGE:-$SRC/build/tools-image}
TOOLS_SKIP=
TOOLS_FAILED=
if ! command -v chroot >/dev/null; then
	TOOLS_SKIP="chroot missing"
else
	t0=$SECONDS
	tools_image_build
	case $? in
	0) note "tools image $TOOLS_DIGEST ready in $((SECONDS - t0)) s ($(tail -n 1 "$TMP/tools-image.log"))" ;;
	2) TOOLS_SKIP=$TOOLS_IMAGE_WHY ;;
	*) TOOLS_FAILED="the tools image does not build: $TOOLS_IMAGE_WHY" ;;
	esac
fi

if ! world_up; then
	not_ok "world comes up" "see the diagnostics above"
	exit 1
fi

# tcp_line ADDR PORT: the first line a TCP service sends (bash's /dev/tcp, 3 s at most).
tcp_line() {
	timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" && head -n 1 <&3' _ "$1" "$2" 2>/dev/null
}

test_dns_from_host() {
	local out
	out=$(python3 - "$WORLD_DNS" <<'EOF'
import socket, struct, sys
def ask(name, qtype=1):
    q = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    q += struct.pack("!HH", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    s.sendto(q, (sys.argv[1], 53))
    r = s.recv(512)
    rcode, an = r[3] & 15, struct.unpack("!H", r[6:8])[0]
    addr = socket.inet_ntoa(r[-4:]) if an else "-"
    return f"{rcode} {an} {addr}"
print(ask("git.example.test"), "|", ask("nope.example.test"), "|", ask("git.example.test", 28))
EOF
	)
	assert_eq "0 1 $WORLD_GIT | 3 0 - | 0 0 -" "$out" "A, NXDOMAIN, NODATA" || return 1
	world_dns_asked git.example.test || _fail "dns.log lacks git.example.test: $(cat "$WORLD_DIR/dns.log")"
	world_dns_asked nope.example.test || _fail "dns.log lacks nope.example.test"
	grep -q "^$WORLD_HOST nope.example.test A NXDOMAIN$" "$WORLD_DIR/dns.log" ||
		_fail "dns.log line: $(cat "$WORLD_DIR/dns.log")"
}

test_services_from_host() {
	assert_eq "peer $WORLD_HOST" "$(tcp_line "$WORLD_ECHO" "$WORLD_ECHO_PORT")" "echo" || return 1
	assert_eq "peer $WORLD_HOST" "$(tcp_line "$WORLD_ECHO" "$WORLD_ECHO_PORT2")" "echo 2"
	assert_eq "peer $WORLD_HOST" "$(tcp_line "$WORLD_PRIVATE" "$WORLD_ECHO_PORT")" "private echo"
	assert_eq "peer $WORLD_V6_HOST" "$(tcp_line "$WORLD_V6" "$WORLD_ECHO_PORT")" "IPv6 echo"
	assert_eq "peer $WORLD_HOST" "$(tcp_line "$WORLD_HOST" "$WORLD_HOST_PORT")" "host echo"
	assert_eq "other host=$WORLD_GIT_NAME" \
		"$(curl -sS --max-time 5 -H "Host: $WORLD_GIT_NAME" "http://$WORLD_OTHER/")" "other"
	local before
	before=$(world_udp_count)
	printf 'hello sink' >"/dev/udp/$WORLD_ECHO/$WORLD_UDP_PORT"
	wait_for -t 3 world_udp_more_than "$before" || _fail "the UDP sink saw nothing"
	grep -q "^$WORLD_HOST 10 hello sink$" "$WORLD_DIR/udp.log" || _fail "udp.log: $(cat "$WORLD_DIR/udp.log")"
	# The registry: a packument whose tarball URL and integrity match what it serves.
	local doc tgz
	doc=$(curl -sS --max-time 5 -H "Host: $WORLD_REGISTRY_NAME" "http://$WORLD_REGISTRY/$WORLD_PKG")
	assert_eq "$WORLD_REGISTRY_URL/$WORLD_PKG/-/$WORLD_PKG-$WORLD_PKG_VERSION.tgz" \
		"$(jq -r ".versions[\"$WORLD_PKG_VERSION\"].dist.tarball" <<<"$doc")" "dist.tarball" || return 1
	curl -sS --max-time 5 -o "$TMP/pkg.tgz" "http://$WORLD_REGISTRY/$WORLD_PKG/-/$WORLD_PKG-$WORLD_PKG_VERSION.tgz"
	tgz=$(python3 -c 'import base64, hashlib, sys
print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$TMP/pkg.tgz")
	assert_eq "$tgz" "$(jq -r ".versions[\"$WORLD_PKG_VERSION\"].dist.integrity" <<<"$doc")" "dist.integrity"
	assert_eq "$(sha1sum <"$TMP/pkg.tgz" | cut -d' ' -f1)" \
		"$(jq -r ".versions[\"$WORLD_PKG_VERSION\"].dist.shasum" <<<"$doc")" "dist.shasum"
	assert_eq 404 "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://$WORLD_REGISTRY/nothing-here")" "unknown package"
	# The metadata address is not routed from the host itself (only from world_route_from's).
	[[ $(ip -4 route get "$WORLD_META" 2>/dev/null) != *"$WORLD_IF"* ]] ||
		_fail "the host routes $WORLD_META into the world"
}

test_git_from_host() {
	rm -rf "$TMP/clone-host"
	local out
	out=$(git -c http.proxy= clone -q "http://$WORLD_GIT/repo.git" "$TMP/clone-host" 2>&1) ||
		_fail "git clone from the host: $out" || return 1
	[[ -f $TMP/clone-host/package-lock.json ]] || _fail "the clone has no package-lock.json"
	grep -q "^git $WORLD_GIT $WORLD_HOST GET /repo.git/info/refs?service=git-upload-pack" "$WORLD_DIR/http.log" ||
		_fail "http.log: $(tail -n 3 "$WORLD_DIR/http.log")"
}

# The seed's workflow in the play namespace: names through the world's DNS, masquerade to the
# world.
test_play_workflow() {
	world_play_up || return 1
	local home=$TMP/play-home out
	mkdir -p "$home"
	assert_eq "nameserver $WORLD_DNS" "$(world_play cat /etc/resolv.conf)" "resolv.conf" || return 1
	assert_eq "peer $WORLD_HOST" "$(world_play timeout 3 bash -c \
		'exec 3<>"/dev/tcp/$1/$2" && head -n 1 <&3' _ "$WORLD_ECHO" "$WORLD_ECHO_PORT")" \
		"the world sees the masquerade address" || return 1
	assert_eq "meta host=$WORLD_META" "$(world_play curl -sS --max-time 5 "http://$WORLD_META/")" \
		"metadata from the play namespace (policy route)" || return 1
	out=$(cd "$home" && world_play git clone -q "$WORLD_GIT_URL" clone-only 2>&1) || _fail "git clone by name: $out"
}

test_play_npm() {
	local home=$TMP/play-home out
	out=$(cd "$home" && world_play env -i PATH="$PATH" HOME="$home" \
		npm_config_cache="$home/.npm" NPM_CONFIG_UPDATE_NOTIFIER=false \
		NPM_CONFIG_REGISTRY="$WORLD_REGISTRY_URL/" bash -c '
		set -e
		git clone -q "$1" repo
		cd repo
		npm ci --no-audit --no-fund
		npm install --global --prefix "$2" .
		PATH=$2/bin:$PATH
		command -v "$3"
		"$3"' _ "$WORLD_GIT_URL" "$home/prefix" "$WORLD_BIN" 2>&1)
	local rc=$?
	assert_eq 0 "$rc" "git clone; npm ci; npm install --global . (output: $(_short "$out"))" || return 1
	assert_contains "$home/prefix/bin/$WORLD_BIN" "$out" "command -v"
	assert_eq "$WORLD_BIN_TEXT" "$(tail -n 1 <<<"$out")" "the binary's output"
	world_dns_asked "$WORLD_GIT_NAME" || _fail "git's name was not asked"
	world_dns_asked "$WORLD_REGISTRY_NAME" || _fail "the registry's name was not asked"
	grep -q "^registry $WORLD_REGISTRY $WORLD_HOST GET /$WORLD_PKG/-/$WORLD_PKG-$WORLD_PKG_VERSION.tgz $WORLD_REGISTRY_NAME 200" \
		"$WORLD_DIR/http.log" || _fail "the registry did not serve the tarball: $(grep ^registry "$WORLD_DIR/http.log")"
}

# The same workflow with the tools image's own git, node and npm (npm 9: its `install --global .`
# fetches the dependency again, from the configured registry), as user node in a chroot of its
# rootfs inside the play namespace.
test_tools_image_workflow() {
	local r=$TMP/tools-rootfs manifest layer out
	manifest=$(jq -r '.manifests[0].digest' "$TOOLS_IMAGE/index.json" | cut -d: -f2)
	layer=$(jq -r '.layers[0].digest' "$TOOLS_IMAGE/blobs/sha256/$manifest" | cut -d: -f2)
	mkdir -p "$r"
	tar -xzf "$TOOLS_IMAGE/blobs/sha256/$layer" -C "$r" || _fail "unpacking the tools image" || return 1
	printf 'nameserver %s\n' "$WORLD_DNS" >"$r/etc/resolv.conf"
	mount --bind /dev "$r/dev" || return 1
	mount -t proc proc "$r/proc" || return 1
	out=$(world_play chroot --userspec=1000:1000 "$r" /usr/bin/env -i HOME=/home/node \
		NPM_CONFIG_PREFIX=/home/node/.local NPM_CONFIG_UPDATE_NOTIFIER=false \
		NPM_CONFIG_REGISTRY="$WORLD_REGISTRY_URL/" LANG=C.UTF-8 \
		PATH=/home/node/.local/bin:/usr/local/bin:/usr/bin:/bin /bin/sh -c "set -e
cd /home/node/workspace
git clone $WORLD_GIT_URL
cd repo
npm ci
npm install --global .
command -v $WORLD_BIN
$WORLD_BIN" 2>&1)
	local rc=$?
	umount "$r/proc"
	umount "$r/dev"
	assert_eq 0 "$rc" "the workflow with the tools image (output: $(_short "$out"))" || return 1
	assert_eq "/home/node/.local/bin/$WORLD_BIN"$'\n'"$WORLD_BIN_TEXT" "$(tail -n 2 <<<"$out")" "command -v; the binary"
}

# The world never takes the host's own way out: a package mirror or resolver the host uses
# may sit in a documentation range, and routing it into the world would cut the host (and any
# download beside the test) off from it.
test_host_routes_kept() {
	assert_contains "dev $WORLD_IF" "$(ip -4 route get "$WORLD_DNS")" \
		"positive control: the world's own addresses go to the world" || return 1
	[[ -n $HOST_ROUTES_BEFORE ]] || _fail "no address of the host's own found (resolv.conf, gateway)"
	assert_eq "$HOST_ROUTES_BEFORE" "$(host_routes)" "the host's own addresses route as before the world"
	local net=${WORLD_NET} used
	if used=$(_world_host_uses "$net"); then
		_fail "the world took $net.0/24, which holds $used"
	fi
}

# A world whose test was killed (no world_down) is removed by the next world_up; one whose
# test still runs is left alone.
test_world_sweep() {
	local dead live pid
	sleep 600 &
	live=$!
	# a pid no process has: past the live one, checked
	for ((pid = live + 1000; pid < live + 100000; pid++)); do
		kill -0 "$pid" 2>/dev/null || break
	done
	dead=$pid
	local p
	for p in "$dead" "$live"; do
		ip link add "nwh$p" type veth peer name "nwy$p" || _fail "veth nwh$p"
		ip netns add "nw$p" || _fail "netns nw$p"
		nft add table ip "nw$p" || _fail "nft table nw$p"
		ip rule add from "10.251.$((p % 250)).0/30" to "$WORLD_META/32" lookup $((40000 + p % 20000)) ||
			_fail "rule of $p"
	done
	_world_sweep >/dev/null
	local left_dead left_live
	left_dead=$(ip -o link show "nwh$dead" 2>/dev/null; [[ -e /run/netns/nw$dead ]] && echo netns
		nft list table ip "nw$dead" >/dev/null 2>&1 && echo nft
		ip rule show | grep -w "lookup $((40000 + dead % 20000))")
	left_live=$(ip -o link show "nwh$live" 2>/dev/null | wc -l)$([[ -e /run/netns/nw$live ]] && echo +netns)
	# clean up the live one by hand
	ip link del "nwh$live" 2>/dev/null
	ip netns del "nw$live" 2>/dev/null
	nft delete table ip "nw$live" 2>/dev/null
	ip rule del lookup $((40000 + live % 20000)) 2>/dev/null
	kill "$live"
	wait "$live" 2>/dev/null
	assert_eq "1+netns" "$left_live" "positive control: a running test's world is left alone" || return 1
	assert_eq "" "$left_dead" "what is left of a gone test's world"
}

test_world_down_clean() {
	local before
	before=$(world_leftovers)
	assert_contains "netns $WORLD_NS" "$before" "positive control: the world is there" || return 1
	world_down
	local left
	left=$(world_leftovers)
	assert_eq "" "$left" "left behind by world_down"
}

run_test net-world-host-routes-kept test_host_routes_kept
run_test net-world-sweep test_world_sweep
run_test net-world-dns test_dns_from_host
run_test net-world-services test_services_from_host
run_test net-world-git test_git_from_host
run_test net-world-play test_play_workflow
if command -v npm >/dev/null; then
	run_test net-world-play-npm test_play_npm
else
	skip net-world-play-npm "npm missing on this host (scripts/install-deps installs it)"
fi
if [[ -n $TOOLS_SKIP ]]; then
	skip net-world-tools-image-workflow "$TOOLS_SKIP"
elif [[ -n $TOOLS_FAILED ]]; then
	not_ok net-world-tools-image-workflow "$TOOLS_FAILED"
else
	run_test net-world-tools-image-workflow test_tools_image_workflow
fi
run_test net-world-down-clean test_world_down_clean
