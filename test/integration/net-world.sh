# shellcheck shell=bash
# Sourced by the network tests after lib.sh (or container-lib.sh): the outside world, played by a
# network namespace of the test's own joined to the host by a veth pair. Its hosts (services of
# test/helpers/net-world.py, one process inside the namespace):
#
#   WORLD_DNS       .2  DNS on 53/udp: A records of WORLD_DIR/zone, NXDOMAIN otherwise, every
#                       query logged to WORLD_DIR/dns.log ("PEER NAME TYPE RCODE"), and what
#                       else it held to WORLD_DIR/dns-wire.log ("PEER NAME qd=N an=N ns=N ar=N
#                       flags=0xHHHH edns=SIZE|none do=0|1 opts=…"); names under
#                       slow.example.test are answered 2 s late
#   WORLD_ECHO      .2  TCP WORLD_ECHO_PORT and WORLD_ECHO_PORT2: "peer <address it sees>"
#                       UDP WORLD_UDP_PORT: a sink recording each datagram in WORLD_DIR/udp.log
#   WORLD_OTHER     .3  HTTP: "other host=<Host header>" (no allowed name resolves to it)
#   WORLD_GIT       .4  HTTP: git smart HTTP (git http-backend), /repo.git, and /private.git (the
#                       same repository) only with HTTP basic auth x-access-token:WORLD_GIT_TOKEN
#   WORLD_REGISTRY  .5  HTTP: an npm registry, /<name> (packument) and /<name>/-/<name>-<v>.tgz
#   WORLD_PRIVATE       an address of a private range, routed from the host to the namespace:
#                       the echo service again
#   WORLD_META          169.254.169.254 (HTTP "meta"), reached only from the ranges given to
#                       world_route_from (policy routing): the host's own link-local is untouched
#   WORLD_V6            an IPv6 documentation address: the echo service
# and on the host (the worker's own address, WORLD_HOST) an echo service on WORLD_HOST_PORT.
# The world is routed, not connected: the host holds WORLD_HOST/32 on its end of the veth and
# reaches WORLD_NET.0/24, WORLD_PRIVATE_NET and WORLD_META through WORLD_ROUTER (.254, an
# address of the namespace, on-link), so the world's hosts are neither the worker's connected
# network nor its gateways (both blocked by the controller); WORLD_ROUTER is its gateway.
# HTTP requests are logged to WORLD_DIR/http.log ("ROLE LOCAL PEER METHOD PATH HOST STATUS").
#
# Names (world_up puts them in the zone): git.example.test, registry.example.test,
# other.example.test, echo.example.test. The repository (WORLD_GIT_URL) holds a package.json
# with a bin entry ("WORLD_BIN", printing WORLD_BIN_TEXT) that depends on WORLD_PKG from the
# registry, and a package-lock.json whose "resolved" is the registry's URL; its .npmrc points
# npm at the registry.
#
# Two tests can hold a world at once when their WORLD_NET (a /24 of a documentation or
# benchmarking range: the first three octets) differ; every other name includes the pid.
# world_up does not take a range that the host already routes or that holds an address the host
# itself uses (its resolvers, gateway, package mirrors), and first removes worlds whose test
# is gone. world_down (on EXIT) removes everything.
#
# world_play_up makes a namespace that plays a workspace without any controller: veth to the
# host, an address of WORLD_PLAY_NET, masquerade (an nft table of ours), forwarding on our two
# veths only, and /etc/netns/<name>/resolv.conf naming WORLD_DNS; world_play CMD runs in it.

# The controller's network flags (one place, should their names change).
NET_FLAG_RANGE=--network-range
NET_FLAG_BRIDGE=--network-bridge
NET_FLAG_DNS=--dns-upstream
NET_FLAG_ALLOW=--network-allow
# The controller flags every test's controller passes so that the world's hosts count as the
# outside world (their ranges are reserved ones). Add them to every controller a world test starts.
NET_WORLD_FLAGS=("$NET_FLAG_ALLOW" documentation,benchmarking)

NET_WORLD_PY=$SRC/test/helpers/net-world.py
WORLD_ID=$$
# WORLD_NET: the first three octets of a /24 of a documentation range; unset, world_up takes the
# first of WORLD_NETS that the host does not route yet.
WORLD_NETS=${WORLD_NETS:-203.0.113 198.51.100 198.18.113 198.19.51}
WORLD_NET_EXPLICIT=$([[ -n ${WORLD_NET:-} ]] && echo 1 || echo 0)
WORLD_NET=${WORLD_NET:-${WORLD_NETS%% *}}
WORLD_NET6=${WORLD_NET6:-2001:db8:$(printf '%x' $((WORLD_ID % 65536)))}
WORLD_PRIVATE_NET=${WORLD_PRIVATE_NET:-10.$((240 + WORLD_ID % 8)).$(((WORLD_ID / 8) % 250)).0/24}
WORLD_PLAY_NET=${WORLD_PLAY_NET:-10.$((248 + WORLD_ID % 4)).$(((WORLD_ID / 4) % 250)).0/30}
WORLD_NS=nw$WORLD_ID
WORLD_IF=nwh$WORLD_ID
WORLD_PLAY_NS=nwp$WORLD_ID
WORLD_PLAY_IF=nwq$WORLD_ID
WORLD_NFT=nw$WORLD_ID
WORLD_TABLE=$((40000 + WORLD_ID % 20000))
WORLD_DIR=$TMP/world

_world_addresses() {
	WORLD_HOST=$WORLD_NET.1
	WORLD_DNS=$WORLD_NET.2
	WORLD_ECHO=$WORLD_NET.2
	WORLD_OTHER=$WORLD_NET.3
	WORLD_GIT=$WORLD_NET.4
	WORLD_REGISTRY=$WORLD_NET.5
	WORLD_ROUTER=$WORLD_NET.254
}
_world_addresses
WORLD_PRIVATE=${WORLD_PRIVATE_NET%.*}.2
WORLD_META=169.254.169.254
WORLD_V6_HOST=$WORLD_NET6::1
WORLD_V6=$WORLD_NET6::2
WORLD_ECHO_PORT=7000
WORLD_UDP_PORT=7001
WORLD_ECHO_PORT2=7002
WORLD_HOST_PORT=7003

WORLD_GIT_NAME=git.example.test
WORLD_REGISTRY_NAME=registry.example.test
WORLD_OTHER_NAME=other.example.test
WORLD_ECHO_NAME=echo.example.test
WORLD_GIT_URL=http://$WORLD_GIT_NAME/repo.git
WORLD_GIT_PRIVATE_URL=http://$WORLD_GIT_NAME/private.git
WORLD_GIT_TOKEN= # made by world_up, in WORLD_DIR/git-token (0600)
WORLD_REGISTRY_URL=http://$WORLD_REGISTRY_NAME
WORLD_PKG=station-greeting
WORLD_PKG_VERSION=1.0.0
WORLD_BIN=station-hello
WORLD_BIN_TEXT="hello from the test registry"

WORLD_WHY=
_WORLD_UP=0
_WORLD_PIDS=()
_WORLD_RULES=()
_WORLD_PLAY=0

# world_prereqs: 0 when this machine can hold a world; else 1 with WORLD_WHY (a skip reason).
world_prereqs() {
	local t
	WORLD_WHY=
	[[ $(id -u) -eq 0 ]] || WORLD_WHY="needs root (network namespaces)"
	for t in ip python3 git; do
		[[ -n $WORLD_WHY ]] || command -v $t >/dev/null || WORLD_WHY="$t missing"
	done
	if [[ -z $WORLD_WHY && ! -x $(git --exec-path 2>/dev/null)/git-http-backend ]]; then
		WORLD_WHY="git http-backend missing"
	fi
	if [[ -z $WORLD_WHY ]] && ! ip netns add "$WORLD_NS-probe" 2>/dev/null; then
		WORLD_WHY="cannot make network namespaces here"
	fi
	ip netns del "$WORLD_NS-probe" 2>/dev/null
	[[ -z $WORLD_WHY ]]
}

# _world_host_addresses: the IPv4 addresses this host itself talks to outside: its resolvers,
# its default gateways, and what the hosts of its package sources (apt, npm, a proxy) resolve
# to. Documentation ranges are not promised to be unused: a build farm may well put its
# package mirror at one. A world routing such a range to its namespace would cut the host off
# from it (and every download beside the test would fail with "no route to host").
_world_host_addresses() {
	local h hosts=(registry.npmjs.org)
	awk '$1 == "nameserver" {print $2}' /etc/resolv.conf 2>/dev/null
	ip -4 route show table all 2>/dev/null | awk '$1 == "default" && $2 == "via" {print $3}'
	for h in $(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources \
		2>/dev/null | grep -oE '(https?|ftp)://[^/[:space:]]+' | sed -E 's|^[a-z]+://||; s|:[0-9]+$||' |
		sort -u) "${hosts[@]}"; do
		getent ahostsv4 "$h" 2>/dev/null | awk '{print $1}'
	done
	env | sed -nE 's#^(https?|HTTPS?|all|ALL)_(proxy|PROXY)=[a-z]+://([^:/@]*@)?([^:/]+).*#\4#p' |
		while read -r h; do getent ahostsv4 "$h" 2>/dev/null | awk '{print $1}'; done
}

# _world_host_uses NET: an address of _world_host_addresses lies in NET.0/24 (which is then
# printed).
_world_host_uses() {
	_world_host_addresses | sort -u | grep -m 1 -F "$1."
}

# _world_sweep: removes what worlds of test shells that no longer run left behind (a script
# killed by its timeout cannot run world_down): their links, namespaces, nft table, rules and
# route table. Each name carries the pid of the shell that made it.
_world_sweep() {
	local ifname pid
	for ifname in $(ip -o link show 2>/dev/null | sed -nE 's/^[0-9]+: (nwh[0-9]+)[@:].*/\1/p'); do
		pid=${ifname#nwh}
		[[ $pid != "$WORLD_ID" ]] && ! kill -0 "$pid" 2>/dev/null || continue
		diag "world: removing the world a gone test (pid $pid) left behind"
		(
			WORLD_ID=$pid WORLD_NS=nw$pid WORLD_IF=nwh$pid WORLD_PLAY_NS=nwp$pid
			WORLD_PLAY_IF=nwq$pid WORLD_NFT=nw$pid WORLD_TABLE=$((40000 + pid % 20000))
			_WORLD_PIDS=()
			mapfile -t _WORLD_RULES < <(ip rule show | sed -nE "s/^[0-9]+:\s+from (\S+) to \S+ lookup $WORLD_TABLE\s*$/\1/p")
			world_down
		)
	done
}

# _world_routed CIDR: the host already routes an address of CIDR (any table), or CIDR lies
# within a route other than a default one.
_world_routed() {
	local net=${1%/*}
	[[ -n $(ip -4 route show table all root "$1" 2>/dev/null) ]] && return 0
	ip -4 route show table all match "$net" 2>/dev/null | grep -v -e '^default' -e '^unreachable default' \
		-e '^local ' -e '^broadcast ' | grep -q .
}

_world_run() { # CMD...: runs it; on failure tells what and returns 1
	local out
	if ! out=$("$@" 2>&1); then
		diag "world: '$*' failed: $out"
		return 1
	fi
}

# world_up: the namespace, its link and addresses, the content, the services. 1 on failure
# (diagnostics printed).
# _world_claim NET: holds a lock named after NET for the life of this shell (two worlds started
# at once cannot both take it) and checks that the host does not route it yet.
_WORLD_LOCK_FD=
_world_claim() {
	local fd
	exec {fd}>"/run/lock/station-net-world.$1.lock" || return 1
	if ! flock -n "$fd" || _world_routed "$1.0/24"; then
		exec {fd}>&-
		return 1
	fi
	local used
	if used=$(_world_host_uses "$1"); then
		diag "world: $1.0/24 holds $used, which this host itself uses (a resolver, gateway or package source): not taking it"
		exec {fd}>&-
		return 1
	fi
	_WORLD_LOCK_FD=$fd
}

world_up() {
	local r _explicit=${WORLD_NET_EXPLICIT:-0}
	_world_sweep
	if ((_explicit)); then
		_world_claim "$WORLD_NET" || {
			diag "world: $WORLD_NET.0/24 is taken (routed on this host, or another world holds it)"
			return 1
		}
	else
		# Another test's world may hold them all for a while: wait (WORLD_WAIT seconds at most).
		local end=$((SECONDS + ${WORLD_WAIT:-300})) got=
		while [[ -z $got ]]; do
			for r in $WORLD_NETS; do
				_world_claim "$r" && got=$r && break
			done
			[[ -n $got ]] && break
			if ((SECONDS >= end)); then
				diag "world: every one of $WORLD_NETS stayed taken (routed here, or another world holds it)"
				return 1
			fi
			sleep 1
		done
		WORLD_NET=$got
		_world_addresses
	fi
	for r in "$WORLD_NET.0/24" "$WORLD_PRIVATE_NET" "$WORLD_PLAY_NET"; do
		if _world_routed "$r"; then
			diag "world: $r is already routed on this host: $(ip -4 route show table all match "${r%/*}" | head -n 2 | tr '\n' ';')"
			return 1
		fi
	done
	mkdir -p "$WORLD_DIR"
	_WORLD_UP=1
	_world_run ip netns add "$WORLD_NS" || return 1
	_world_run ip link add "$WORLD_IF" type veth peer name eth0 netns "$WORLD_NS" || return 1
	_world_run ip addr add "$WORLD_HOST/32" dev "$WORLD_IF" || return 1
	_world_run ip -6 addr add "$WORLD_V6_HOST/64" dev "$WORLD_IF" nodad || return 1
	_world_run ip link set "$WORLD_IF" up || return 1
	local in=(ip -n "$WORLD_NS")
	_world_run "${in[@]}" link set lo up || return 1
	for r in "$WORLD_DNS" "$WORLD_OTHER" "$WORLD_GIT" "$WORLD_REGISTRY" "$WORLD_ROUTER"; do
		_world_run "${in[@]}" addr add "$r/24" dev eth0 || return 1
	done
	_world_run "${in[@]}" addr add "$WORLD_PRIVATE/${WORLD_PRIVATE_NET#*/}" dev eth0 || return 1
	_world_run "${in[@]}" addr add "$WORLD_META/32" dev eth0 || return 1
	_world_run "${in[@]}" -6 addr add "$WORLD_V6/64" dev eth0 nodad || return 1
	_world_run "${in[@]}" link set eth0 up || return 1
	# Replies to the private and metadata addresses leave from them toward WORLD_HOST (the
	# masquerade address, on the namespace's /24); nothing in the namespace needs a default route.
	_world_run ip route add "$WORLD_NET.0/24" via "$WORLD_ROUTER" dev "$WORLD_IF" onlink || return 1
	_world_run ip route add "$WORLD_PRIVATE_NET" via "$WORLD_ROUTER" dev "$WORLD_IF" onlink || return 1
	_world_run ip route add "$WORLD_META/32" via "$WORLD_ROUTER" dev "$WORLD_IF" onlink table "$WORLD_TABLE" || return 1

	world_make_content || return 1
	: >"$WORLD_DIR/dns.log"
	: >"$WORLD_DIR/http.log"
	: >"$WORLD_DIR/udp.log"
	ip netns exec "$WORLD_NS" python3 "$NET_WORLD_PY" serve \
		--dns "$WORLD_DNS:53" --zone "$WORLD_DIR/zone" --dns-log "$WORLD_DIR/dns.log" \
		--http "$WORLD_OTHER:80:other" --http "$WORLD_GIT:80:git" \
		--http "$WORLD_REGISTRY:80:registry" --http "$WORLD_META:80:meta" \
		--git-root "$WORLD_DIR/git" --git-token-file "$WORLD_DIR/git-token" --registry-root "$WORLD_DIR/registry" \
		--http-log "$WORLD_DIR/http.log" \
		--echo "$WORLD_ECHO:$WORLD_ECHO_PORT" --echo "$WORLD_ECHO:$WORLD_ECHO_PORT2" \
		--echo "$WORLD_PRIVATE:$WORLD_ECHO_PORT" --echo "[$WORLD_V6]:$WORLD_ECHO_PORT" \
		--udp-sink "$WORLD_ECHO:$WORLD_UDP_PORT" --udp-log "$WORLD_DIR/udp.log" \
		--ready "$WORLD_DIR/ready" >"$WORLD_DIR/serve.log" 2>&1 </dev/null &
	_WORLD_PIDS+=($!)
	# The worker's own address: an echo service on the host side of the link.
	python3 "$NET_WORLD_PY" serve --echo "$WORLD_HOST:$WORLD_HOST_PORT" \
		--ready "$WORLD_DIR/ready-host" >"$WORLD_DIR/serve-host.log" 2>&1 </dev/null &
	_WORLD_PIDS+=($!)
	# generous: two Python servers starting on a loaded machine
	if ! wait_for -t 90 test -s "$WORLD_DIR/ready" || ! wait_for -t 90 test -s "$WORLD_DIR/ready-host"; then
		diag "world: the services did not start: $(cat "$WORLD_DIR"/serve*.log 2>/dev/null | tail -n 5)"
		return 1
	fi
	return 0
}

# world_dns_add NAME ADDRESS [A|AAAA]: one more record (the server reads the zone per query).
world_dns_add() {
	printf '%s %s %s\n' "$1" "${3:-A}" "$2" >>"$WORLD_DIR/zone"
}

# world_dns_ttl SECONDS: the TTL of every record that names none (60 without this; the last
# call wins, from the next query on).
world_dns_ttl() {
	printf '$TTL %s\n' "$1" >>"$WORLD_DIR/zone"
}

# world_make_content: the zone, the registry's package, the repository.
world_make_content() {
	local d=$WORLD_DIR
	: >"$d/zone"
	world_dns_add "$WORLD_GIT_NAME" "$WORLD_GIT"
	world_dns_add "$WORLD_REGISTRY_NAME" "$WORLD_REGISTRY"
	world_dns_add "$WORLD_OTHER_NAME" "$WORLD_OTHER"
	world_dns_add "$WORLD_ECHO_NAME" "$WORLD_ECHO"

	local lock
	lock=$(python3 "$NET_WORLD_PY" registry "$d/registry" "$WORLD_PKG" "$WORLD_PKG_VERSION" \
		"$WORLD_REGISTRY_URL" "$WORLD_BIN_TEXT") || {
		diag "world: making the registry's package failed"
		return 1
	}
	local w=$d/repo-src
	rm -rf "$w" "$d/git"
	mkdir -p "$w/bin" "$d/git"
	jq -n --arg pkg "$WORLD_PKG" --arg v "$WORLD_PKG_VERSION" --arg bin "$WORLD_BIN" '{
		name: "station-hello-cli", version: "1.0.0", description: "the seed workflow'"'"'s repository",
		license: "MIT", bin: {($bin): "bin/hello.js"}, dependencies: {($pkg): $v}}' >"$w/package.json"
	jq -n --arg pkg "$WORLD_PKG" --arg v "$WORLD_PKG_VERSION" --arg bin "$WORLD_BIN" \
		--argjson lock "$lock" '{
		name: "station-hello-cli", version: "1.0.0", lockfileVersion: 3, requires: true,
		packages: {
			"": {name: "station-hello-cli", version: "1.0.0", license: "MIT",
				dependencies: {($pkg): $v}, bin: {($bin): "bin/hello.js"}},
			("node_modules/" + $pkg): {version: $v, resolved: $lock.resolved,
				integrity: $lock.integrity, license: "MIT"}}}' >"$w/package-lock.json"
	cat >"$w/bin/hello.js" <<EOF
#!/usr/bin/env node
'use strict';
console.log(require('$WORLD_PKG').message());
EOF
	chmod 0755 "$w/bin/hello.js"
	printf 'registry=%s/\naudit=false\nfund=false\nupdate-notifier=false\n' "$WORLD_REGISTRY_URL" >"$w/.npmrc"
	printf 'node_modules/\n' >"$w/.gitignore"
	local g=(git -C "$w" -c user.name=test -c user.email=test@example.test -c init.defaultBranch=main)
	_world_run "${g[@]}" init -q || return 1
	_world_run "${g[@]}" add -A || return 1
	GIT_AUTHOR_DATE=@1700000000 GIT_COMMITTER_DATE=@1700000000 \
		_world_run "${g[@]}" commit -q -m "station-hello-cli 1.0.0" || return 1
	_world_run git clone -q --bare "$w" "$d/git/repo.git" || return 1
	_world_run git clone -q --bare "$w" "$d/git/private.git" || return 1
	WORLD_GIT_TOKEN=ghs_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
	(umask 077 && printf '%s\n' "$WORLD_GIT_TOKEN" >"$d/git-token")
}

# world_route_from CIDR: traffic from CIDR to WORLD_META goes to the world (a policy rule and a
# table of ours), never toward whatever link-local the host has.
world_route_from() {
	_world_run ip rule add from "$1" to "$WORLD_META/32" lookup "$WORLD_TABLE" || return 1
	_WORLD_RULES+=("$1")
}

# world_play_up: a namespace playing a workspace (see the header).
world_play_up() {
	local net=${WORLD_PLAY_NET%/*}
	local base=${net%.*}.$((${net##*.} + 1)) addr=${net%.*}.$((${net##*.} + 2))
	_WORLD_PLAY=1
	WORLD_PLAY_ADDR=$addr
	_world_run ip netns add "$WORLD_PLAY_NS" || return 1
	_world_run ip link add "$WORLD_PLAY_IF" type veth peer name eth0 netns "$WORLD_PLAY_NS" || return 1
	_world_run ip addr add "$base/30" dev "$WORLD_PLAY_IF" || return 1
	_world_run ip link set "$WORLD_PLAY_IF" up || return 1
	_world_run ip -n "$WORLD_PLAY_NS" link set lo up || return 1
	_world_run ip -n "$WORLD_PLAY_NS" addr add "$addr/30" dev eth0 || return 1
	_world_run ip -n "$WORLD_PLAY_NS" link set eth0 up || return 1
	_world_run ip -n "$WORLD_PLAY_NS" route add default via "$base" || return 1
	# IPv4 forwarding is decided by the interface a packet comes in on: ours only.
	echo 1 >"/proc/sys/net/ipv4/conf/$WORLD_PLAY_IF/forwarding" || return 1
	echo 1 >"/proc/sys/net/ipv4/conf/$WORLD_IF/forwarding" || return 1
	command -v nft >/dev/null || {
		diag "world: nft missing (the play namespace's masquerade)"
		return 1
	}
	_world_run nft -f - <<EOF || return 1
table ip $WORLD_NFT {
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr $WORLD_PLAY_NET oifname "$WORLD_IF" masquerade
	}
}
EOF
	mkdir -p "/etc/netns/$WORLD_PLAY_NS"
	printf 'nameserver %s\n' "$WORLD_DNS" >"/etc/netns/$WORLD_PLAY_NS/resolv.conf"
	world_route_from "$WORLD_PLAY_NET"
}

# world_play CMD...: runs CMD in the play namespace (its own /etc/resolv.conf).
world_play() {
	ip netns exec "$WORLD_PLAY_NS" "$@"
}

# world_down: removes everything world_up and world_play_up made; idempotent.
world_down() {
	local pid r
	for pid in "${_WORLD_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${_WORLD_PIDS[@]}"; do
		wait_for -t 5 _pid_gone "$pid" || kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	_WORLD_PIDS=()
	for ns in "$WORLD_NS" "$WORLD_PLAY_NS"; do
		[[ -e /run/netns/$ns ]] || continue
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null
		done
	done
	for r in "${_WORLD_RULES[@]}"; do
		ip rule del from "$r" to "$WORLD_META/32" lookup "$WORLD_TABLE" 2>/dev/null
	done
	_WORLD_RULES=()
	ip route flush table "$WORLD_TABLE" 2>/dev/null
	ip link del "$WORLD_IF" 2>/dev/null
	ip link del "$WORLD_PLAY_IF" 2>/dev/null
	ip netns del "$WORLD_NS" 2>/dev/null
	ip netns del "$WORLD_PLAY_NS" 2>/dev/null
	if nft list table ip "$WORLD_NFT" >/dev/null 2>&1; then
		nft delete table ip "$WORLD_NFT"
	fi
	rm -rf "/etc/netns/$WORLD_PLAY_NS"
	rmdir /etc/netns 2>/dev/null
	_WORLD_UP=0
	_WORLD_PLAY=0
	return 0
}

# world_leftovers: what of the world is still there, one thing a line; empty when clean.
world_leftovers() {
	local ns
	for ns in "$WORLD_NS" "$WORLD_PLAY_NS"; do
		[[ -e /run/netns/$ns ]] && echo "netns $ns"
	done
	ip link show "$WORLD_IF" >/dev/null 2>&1 && echo "link $WORLD_IF"
	ip link show "$WORLD_PLAY_IF" >/dev/null 2>&1 && echo "link $WORLD_PLAY_IF"
	ip rule show | grep -w "lookup $WORLD_TABLE" | sed 's/^/rule /'
	ip route show table "$WORLD_TABLE" 2>/dev/null | sed 's/^/route /'
	nft list table ip "$WORLD_NFT" >/dev/null 2>&1 && echo "nft table ip $WORLD_NFT"
	[[ -e /etc/netns/$WORLD_PLAY_NS ]] && echo "file /etc/netns/$WORLD_PLAY_NS"
	pgrep -f -- "$NET_WORLD_PY serve.*$WORLD_DIR/" | sed 's/^/process /'
	return 0
}

# dns_log_has NAME: the world's DNS server was asked for NAME.
world_dns_asked() {
	awk -v n="$1" '$2 == n {f = 1} END {exit !f}' "$WORLD_DIR/dns.log"
}

# world_udp_count: datagrams the sink has seen.
world_udp_count() {
	wc -l <"$WORLD_DIR/udp.log"
}

# world_udp_more_than N: the sink has seen more than N datagrams (a wait_for predicate).
world_udp_more_than() {
	(($(world_udp_count) > $1))
}

# ---------------------------------------------------------------------------------------------
# What a controller started with "$NET_FLAG_BRIDGE NET_BRIDGE" makes: the bridge, its ports, nft
# tables named after it, netns files under ROOT/netns.

NET_BRIDGE=

# net_leftovers [LIVE_IDS...]: what of the controller's network is on the host, one thing a line,
# beyond the bridge and the table themselves and the workspaces named (their netns files and
# chains; ports are matched by the controller's naming, sv<8 hex of the address>, by the caller).
net_ports() {
	[[ -n $NET_BRIDGE ]] || return 0
	ip -j link show master "$NET_BRIDGE" 2>/dev/null | jq -r '.[].ifname' 2>/dev/null
}
# net_nft_objects: per-workspace objects in the controller's tables (inet and bridge, both named
# after the bridge), one a line: chains, sets, maps and counters named ws_*, and every element
# of a set or map but "blocked" and "fenced" (the worker's own lists of blocked ranges).
net_nft_objects() {
	[[ -n $NET_BRIDGE ]] || return 0
	local fam
	for fam in inet bridge; do
		nft -j list table $fam "$NET_BRIDGE" 2>/dev/null | jq -r --arg fam $fam '.nftables[] | to_entries[]
			| select(.key == "chain" or .key == "set" or .key == "map" or .key == "counter")
			| .key as $k | .value
			| (select(.name | startswith("ws_")) | "\($fam) \($k) \(.name)"),
			  (select(($k == "set" or $k == "map") and .name != "blocked" and .name != "fenced" and .elem != null)
			   | "\($fam) \($k) \(.name) element \(.elem | tostring | .[0:100])")'
	done
}

# net_scrub: removes whatever the controller left (after it is stopped): netns mounts, ports, the
# bridge, its tables.
net_scrub() {
	[[ -n $NET_BRIDGE ]] || return 0
	local p fam
	for p in $(net_ports); do
		ip link del "$p" 2>/dev/null
	done
	ip link del "$NET_BRIDGE" 2>/dev/null
	for fam in inet ip ip6 bridge netdev; do
		nft list table $fam "$NET_BRIDGE" >/dev/null 2>&1 && nft delete table $fam "$NET_BRIDGE"
	done
	rm -f "/run/station-sandbox-net-$NET_BRIDGE.lock"
	return 0
}

# Runs the cleanup that was installed when this file was sourced (in a subshell: it ends with
# exit), then world_down and net_scrub.
_WORLD_PREV_EXIT=$(trap -p EXIT)
_WORLD_PREV_EXIT=${_WORLD_PREV_EXIT#trap -- \'}
_WORLD_PREV_EXIT=${_WORLD_PREV_EXIT%\' EXIT}
_world_exit() {
	local rc=$? mnt
	trap - EXIT
	if [[ -n $_WORLD_PREV_EXIT ]]; then
		(
			(exit "$rc")
			eval "$_WORLD_PREV_EXIT"
		)
		rc=$?
	fi
	world_down
	net_scrub
	if [[ -d $TMP ]]; then
		for mnt in $(awk -v t="$TMP/" 'index($5, t) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
			umount -l "$mnt" 2>/dev/null
		done
		rm -rf "$TMP"
	fi
	exit "$rc"
}
trap _world_exit EXIT

# ---------------------------------------------------------------------------------------------
# For the scripts that play workspaces against the world (they source container-lib.sh first).

# net_prereqs CIDR...: skips the whole script unless this machine can hold a world, net-probe is
# built and nftables works, and none of CIDR (the workspaces' range, whatever else the script
# routes) is routed here yet.
net_prereqs() {
	local r
	container_prereqs
	world_prereqs || _container_skip_all "$WORLD_WHY"
	[[ -x $NET_PROBE_BIN ]] || _container_skip_all "$NET_PROBE_BIN not built"
	command -v nft >/dev/null || _container_skip_all "nft missing (apt-get install nftables)"
	nft list tables >/dev/null 2>&1 || _container_skip_all "nftables unusable here: $(nft list tables 2>&1 | head -n 1)"
	for r in "$@"; do
		_world_routed "$r" && _container_skip_all "$r is already routed on this host"
	done
	return 0
}

# net_ws VAR MODE [EGRESS_JSON]: a container workspace on the busybox image in MODE.
net_ws() {
	local x
	x=$(jq -nc --arg m "$2" --argjson e "${3:-null}" '{network: $m} + (if $e then {egress: $e} else {} end)')
	new_cws "$1" "$x"
}

# nprobe WS ARGS...: net-probe ARGS in WS; its stdout in PROBE_OUT, its exit code in PROBE_RC.
PROBE_OUT=
PROBE_RC=
nprobe() {
	local ws=$1 q
	shift
	printf -v q '%q ' "$@"
	PROBE_OUT='' PROBE_RC=''
	run_cmd "$ws" "net-probe $q" || return 1
	if [[ $(j .status) != exited ]]; then
		_fail "net-probe $*: $(j '{status, reason, stderr}')"
		return 1
	fi
	PROBE_OUT=$(j .stdout)
	PROBE_RC=$(j .exitCode)
}
