#!/bin/bash
# run-all: exclusive: net-world: the outside worlds of net-world.sh (documentation networks, routes, nft tables) are few per machine
# run-all: not under sanitizers: the npm workflow in the tools image; its controller paths run in test-network and test-credentials
# The seed's Git workflow through a real controller, on the tools image: in a restricted
# workspace that allows exactly the git host's and the registry's names,
#   git clone http://git.example.test/repo.git; cd repo; npm ci; npm install --global .
# succeeds, the package's binary is on PATH and prints its text, and still does after a
# workspace restart. A workspace whose policy lacks the git host: the clone fails with git's
# "Could not resolve host", its counters show the refused query, and the outside DNS was never
# asked. Example 2 with a credential: a repository the git server serves only with a token is
# cloned with the token given only as a scoped secret (git asks git-credential-station), and
# fails without it; the token is then in no file under HOME or the overlay, in no process's
# environment or argv in the sandbox (sampled while git runs, and after), in no API response
# and in no log line. The outside world: net-world.sh.
#
# The tools image (scripts/build-tools-image, minutes the first time) is cached in TOOLS_IMAGE
# (default <source>/build/tools-image, shared by `make test` and `make test-asan`).
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/net-world.sh"

TOOLS_IMAGE=${TOOLS_IMAGE:-$SRC/build/tools-image}
TOOLS_IMAGE_NAME=node-tools
# The controller's own range and bridge (unique to this script: other controllers may run).
NET_RANGE=${NET_RANGE:-10.$((220 + $$ % 8)).$((($$ / 8) % 250)).0/24}
NET_BRIDGE=sts$(($$ % 1000000))
TOOLS=

container_prereqs
world_prereqs || _container_skip_all "$WORLD_WHY"
command -v nft >/dev/null || _container_skip_all "nft missing (apt-get install nftables)"
nft list tables >/dev/null 2>&1 || _container_skip_all "nftables unusable here: $(nft list tables 2>&1 | head -n 1)"
if _world_routed "$NET_RANGE"; then
	_container_skip_all "the workspace range $NET_RANGE is already routed on this host"
fi

# The tools image: built once into TOOLS_IMAGE (reused while its inputs are unchanged).
t0=$SECONDS
tools_image_build
case $? in
0) ;;
2) _container_skip_all "$TOOLS_IMAGE_WHY" ;;
*) not_ok "tools image builds" "$TOOLS_IMAGE_WHY"; exit 1 ;;
esac
note "tools image $TOOLS_DIGEST ready in $((SECONDS - t0)) s ($(tail -n 1 "$TMP/tools-image.log"))"

if ! world_up; then
	not_ok "world comes up" "see the diagnostics above"
	exit 1
fi
# Nothing of a workspace may ever reach the host's own link-local neighbours.
world_route_from "$NET_RANGE" || exit 1
# Answers live 30 s, as a CDN's do; the controller keeps them its default 10 minutes.
world_dns_ttl 30

if ! start_container_controller --import-dir "$TOOLS_IMAGE" \
	"$NET_FLAG_RANGE" "$NET_RANGE" "$NET_FLAG_BRIDGE" "$NET_BRIDGE" "$NET_FLAG_DNS" "$WORLD_DNS:53" "${NET_WORLD_FLAGS[@]}"; then
	not_ok "controller starts with a network range" "see the diagnostics above"
	exit 1
fi
tools_image_import "$TOOLS_IMAGE_NAME"
if [[ $STATUS != 201 || $(j .digest) != "$TOOLS_DIGEST" ]]; then
	not_ok "tools image imports" "HTTP $STATUS $(_short "$BODY")"
	exit 1
fi
TOOLS=$TOOLS_IMAGE_NAME@$TOOLS_DIGEST

# tools_ws VAR ALLOW_JSON [EXTRA_JSON]: a restricted workspace on the tools image allowing
# ALLOW_JSON (EXTRA_JSON: more of the create's body).
tools_ws() {
	new_ws "$1" "$(jq -nc --arg img "$TOOLS" --argjson allow "$2" --argjson x "${3:-{\}}" \
		'{adapter: "container", image: $img, network: "restricted", egress: {allow: $allow}} + $x')"
}

# sh_cmd WS SCRIPT [SECONDS]: runs SCRIPT in WS; the final run is in BODY. npm is pointed at the
# test registry the way a user would point it at theirs (npm 9's `install --global .` reads no
# project .npmrc), and asks no other host for npm's latest version.
sh_cmd() {
	run_start "$1" "$(jq -nc --arg s "$2" --arg r "$WORLD_REGISTRY_URL/" \
		'{command: $s, timeoutMs: 230000, env: {NPM_CONFIG_REGISTRY: $r, NPM_CONFIG_UPDATE_NOTIFIER: "false"}}')" 60000 || return 1
	[[ $(j .status) != running ]] && return 0
	run_wait "$1" "$RUN" "${3:-240}"
}

network_get() {
	api -q GET "/v1/workspaces/$1/network"
	[[ $STATUS == 200 ]] || _fail "GET network: HTTP $STATUS $(_short "$BODY")"
}

WS_OK=

# The client that caches lookups longer than their TTL. npm 9 (9.2 in the tools image, its
# make-fetch-happen 11) keeps a lookup for 5 minutes, but per process: npm ci here makes its
# requests within seconds of its lookups, so its cache never outlives the 30 s TTL. node plays
# that client instead: it looks the git host up before the clone and, at least 31 s after the
# clone's own (last) lookup of that name, connects to the address it kept: refused if the
# address lived for its TTL only, served while the controller keeps it (--egress-pin-min-ms).
CACHED_LOOKUP='require("dns").lookup(process.argv[1], {family: 4}, (e, a) => { if (e) throw e; require("fs").writeFileSync("/tmp/cached-address", a); })'
CACHED_CONNECT='const fs = require("fs"), http = require("http");
const addr = fs.readFileSync("/tmp/cached-address", "utf8");
const wait = Math.max(0, (Number(fs.readFileSync("/tmp/cloned-at", "utf8")) + 31) * 1000 - Date.now());
setTimeout(() => {
	const req = http.get({host: addr, port: 80, path: "/repo.git/info/refs?service=git-upload-pack", headers: {Host: process.argv[1]}, timeout: 10000}, (r) => {
		console.log(`cached address ${addr}: HTTP ${r.statusCode} after ${wait} ms of waiting`);
		process.exit(r.statusCode === 200 ? 0 : 1);
	});
	req.on("timeout", () => req.destroy(new Error("timed out")));
	req.on("error", (e) => { console.error(`cached address ${addr}: ${e.message}`); process.exit(1); });
}, wait);'

test_seed_workflow() {
	local allow
	allow=$(jq -nc --arg g "$WORLD_GIT_NAME" --arg r "$WORLD_REGISTRY_NAME" '[{domain: $g}, {domain: $r}]')
	tools_ws WS_OK "$allow" '{"cpus": 0.25}' || return 1
	network_get "$WS_OK" || return 1
	assert_eq restricted "$(j .mode)" "network mode" || return 1
	local t0=$SECONDS
	sh_cmd "$WS_OK" "set -e
node -e '$CACHED_LOOKUP' $WORLD_GIT_NAME
git clone $WORLD_GIT_URL
date +%s >/tmp/cloned-at
cd repo
npm ci
npm install --global .
node -e '$CACHED_CONNECT' $WORLD_GIT_NAME" || return 1
	local out
	out=$(j '{status, exitCode, stdout: (.stdout | .[-600:]), stderr: (.stderr | .[-1200:])}')
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "git clone; npm ci; npm install --global . ($out)" || return 1
	note "clone + npm ci + npm install --global + the cached address, on 0.25 CPU: $((SECONDS - t0)) s"
	assert_contains "cached address $WORLD_GIT: HTTP 200" "$(j .stdout)" "the address node kept past the TTL" || return 1
	sh_cmd "$WS_OK" "command -v $WORLD_BIN && $WORLD_BIN" || return 1
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "command -v; the binary ($(j .stderr))" || return 1
	assert_eq "/home/node/.local/bin/$WORLD_BIN"$'\n'"$WORLD_BIN_TEXT" "$(j .stdout)" "binary on PATH and its output"
	# The traffic went where the names say: the world's DNS was asked by the controller's
	# resolver (the workspace's only one), the registry served the tarball.
	world_dns_asked "$WORLD_GIT_NAME" || _fail "the outside DNS was never asked for $WORLD_GIT_NAME"
	grep -q "^registry .* GET /$WORLD_PKG/-/$WORLD_PKG-$WORLD_PKG_VERSION.tgz .* 200$" "$WORLD_DIR/http.log" ||
		_fail "the registry did not serve the tarball: $(grep ^registry "$WORLD_DIR/http.log" | tail -n 3)"
	network_get "$WS_OK" || return 1
	local allowed
	allowed=$(j .counters.allowed)
	assert_le 2 "${allowed:-0}" "counters.allowed (git and registry connections)"
	assert_le 2 "$(j .counters.dnsAllowed)" "counters.dnsAllowed"
}

test_seed_restart() {
	[[ -n $WS_OK ]] || {
		_fail "no workspace from the workflow test"
		return 1
	}
	api -q POST "/v1/workspaces/$WS_OK/restart"
	assert_status 200 "restart" || return 1
	sh_cmd "$WS_OK" "command -v $WORLD_BIN && $WORLD_BIN" || return 1
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "the binary after a restart ($(j .stderr))" || return 1
	assert_eq "/home/node/.local/bin/$WORLD_BIN"$'\n'"$WORLD_BIN_TEXT" "$(j .stdout)" "binary on PATH and its output after a restart"
}

# After the restart the network is the same: the clone's remote still answers.
test_seed_restart_network() {
	[[ -n $WS_OK ]] || return 1
	sh_cmd "$WS_OK" "cd repo && git fetch -q origin && git rev-parse --abbrev-ref HEAD" 120 || return 1
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "git fetch after a restart ($(j .stderr))"
	network_get "$WS_OK" || return 1
	assert_eq restricted "$(j .mode)" "network mode after a restart"
}

test_seed_git_host_not_allowed() {
	local ws before allow
	allow=$(jq -nc --arg r "$WORLD_REGISTRY_NAME" '[{domain: $r}]')
	tools_ws ws "$allow" || return 1
	before=$(grep -c " $WORLD_GIT_NAME " "$WORLD_DIR/dns.log")
	# Positive control: the same workspace resolves and reaches the name it allows.
	sh_cmd "$ws" "npm view $WORLD_PKG version" 120 || return 1
	assert_eq "exited 0 $WORLD_PKG_VERSION" "$(j '"\(.status) \(.exitCode) \(.stdout | rtrimstr("\n"))"')" \
		"npm view from the allowed registry ($(j .stderr | tail -c 400))"
	sh_cmd "$ws" "git clone $WORLD_GIT_URL" 120 || return 1
	assert_eq exited "$(j .status)" "run status" || return 1
	assert_ne 0 "$(j .exitCode)" "git clone exit code"
	assert_contains "Could not resolve host: $WORLD_GIT_NAME" "$(j .stderr)" "git's error"
	network_get "$ws" || return 1
	assert_le 1 "$(j .counters.dnsRefused)" "counters.dnsRefused"
	assert_eq "$before" "$(grep -c " $WORLD_GIT_NAME " "$WORLD_DIR/dns.log")" \
		"queries for $WORLD_GIT_NAME that reached the outside DNS"
}

# ws_token_procs TOPS TOKEN MARKER: every process of the workspace (in the cgroup dirs TOPS or
# below, seen from the host: more than the sandbox's user can see) is read once; prints
# "token PID FILE" for each environ or cmdline holding TOKEN, "marker PID" for each environ
# holding MARKER and "git PID" for each git process.
ws_token_procs() {
	local pid f
	for pid in $(find $1 -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u); do
		for f in environ cmdline; do
			grep -qaF -- "$2" "/proc/$pid/$f" 2>/dev/null && echo "token $pid $f"
		done
		grep -qaF -- "$3" "/proc/$pid/environ" 2>/dev/null && echo "marker $pid"
		grep -qa '^git' "/proc/$pid/cmdline" 2>/dev/null && echo "git $pid"
	done
	return 0
}

# grep_token DIR TOKEN [GREP OPTIONS...]: the files under DIR holding TOKEN.
grep_token() {
	grep -rlaF "${@:3}" -- "$2" "$1" 2>/dev/null
	return 0
}

# _scan WS TOKEN MARKER: one reading into SEEN; true when the marker was seen.
SEEN=
_scan() {
	SEEN=$(ws_token_procs "$1" "$2" "$3")
	grep -q '^marker' <<<"$SEEN"
}

test_seed_credential() {
	local ws allow token=$WORLD_GIT_TOKEN marker scans=0 hits= marker_seen=0 git_seen=0 tops
	[[ $token == ghs_* ]] || {
		_fail "the world made no git token"
		return 1
	}
	allow=$(jq -nc --arg g "$WORLD_GIT_NAME" '[{domain: $g}]')
	tools_ws ws "$allow" || return 1
	# Negative control: without the secret the server's 401 stands, and git says so.
	sh_cmd "$ws" "git clone $WORLD_GIT_PRIVATE_URL" 120 || return 1
	assert_eq exited "$(j .status)" "run status without the secret" || return 1
	assert_ne 0 "$(j .exitCode)" "git clone without the secret" || return 1
	assert_contains "could not read Username for 'http://$WORLD_GIT_NAME'" "$(j .stderr)" "git's error" || return 1
	grep -q "^git .* GET /private.git/info/refs?service=git-upload-pack $WORLD_GIT_NAME 401$" "$WORLD_DIR/http.log" ||
		_fail "the server did not answer 401: $(grep ^git "$WORLD_DIR/http.log" | tail -n 2)"
	grep -q "credential refused workspace=$ws protocol=http host=$WORLD_GIT_NAME reason=\"no secret for this host\"" "$CONTROLLER_LOG" ||
		_fail "the refusal is not logged"

	api -q PUT "/v1/workspaces/$ws/secrets/git" "$(jq -nc --arg v "$token" --arg h "$WORLD_GIT_NAME" '{value: $v, host: $h}')"
	assert_status 201 "PUT the secret" || return 1
	# The clone, then fetches (each asks the helper again) and a sleeper, while every process
	# of the workspace is read from the host over and over. MARKER, in the run's env, is the
	# positive control of that reading.
	marker=station-marker-$RANDOM$RANDOM
	tops=$(cgroup_dirs "$ws" | grep -E "/$ws\$")
	[[ -n $tops ]] || {
		_fail "no cgroup directory of $ws"
		return 1
	}
	# A second helper, called by git only to "store" after each authenticated request, holds
	# git-remote-http (with the token in its memory) for half a second, so that git processes
	# are alive for the reading however fast the machine is.
	local hold='git -c "credential.helper=!f() { cat >/dev/null; sleep 0.5; }; f"'
	run_start "$ws" "$(jq -nc --arg u "$WORLD_GIT_PRIVATE_URL" --arg m "$marker" --arg g "$hold" '{
		command: ("set -e; " + $g + " clone -q " + $u + " private; for i in 1 2 3 4 5 6 7 8 9 10 11 12; do " + $g + " -C private fetch -q; done; sleep 2; git -C private log --format=%s"),
		env: {MARKER: $m}, timeoutMs: 200000}')" || return 1
	local run=$RUN
	while run_is_running "$ws" "$run"; do
		_scan "$tops" "$token" "$marker" && marker_seen=1
		grep -q '^git' <<<"$SEEN" && git_seen=$((git_seen + 1))
		scans=$((scans + 1))
		hits+=$(grep '^token' <<<"$SEEN")
	done
	run_wait "$ws" "$run" 240 || return 1
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "clone with the secret ($(j .stderr | tail -c 600))" || return 1
	assert_eq "station-hello-cli 1.0.0" "$(j '.stdout | rtrimstr("\n") | split("\n") | last')" "the private repository's commit ($(j "{stdout, stderr}" | tail -c 600))" || return 1
	note "$scans scans of the workspace's processes while the run ran, $git_seen of them saw git"
	assert_eq 1 "$marker_seen" "positive control: the marker seen in a process's environ" || return 1
	assert_le 1 "$git_seen" "positive control: scans that saw a git process" || return 1
	assert_eq "" "$hits" "processes holding the token while git ran" || return 1
	# And after: a sleeper is the only process left but the agent.
	run_start "$ws" "$(jq -nc --arg m "$marker" '{command: "sleep 30", env: {MARKER: $m}}')" || return 1
	local sleeper=$RUN
	wait_for -t 10 _scan "$tops" "$token" "$marker" || _fail "positive control: the sleeper's marker not seen"
	api -q POST "/v1/workspaces/$ws/commands/$sleeper/cancel"
	assert_eq "" "$(grep '^token' <<<"$SEEN")" "processes holding the token after" || return 1
	grep -q "^git .* GET /private.git/info/refs?service=git-upload-pack $WORLD_GIT_NAME 200$" "$WORLD_DIR/http.log" ||
		_fail "the server never answered 200 to the token"

	# Files: the clone is in HOME (positive control), the token in no file there or in the
	# overlay's upper layer; the store holds it sealed only.
	local wsdir=$ROOT/workspaces/$ws
	[[ -n $(grep_token "$wsdir/home" station-hello-cli) ]] || _fail "positive control: the clone's files are not under HOME"
	assert_eq "" "$(grep_token "$wsdir/home" "$token")" "files under HOME holding the token" || return 1
	assert_eq "" "$(grep_token "$wsdir/upper" "$token")" "files in the overlay upper holding the token" || return 1
	assert_eq "" "$(grep_token "$wsdir/cred" "$token")" "the credential socket's directory" || return 1
	assert_eq "" "$(grep_token "$ROOT" "$token" --exclude-dir=rootfs --exclude-dir=lower --exclude-dir=images)" "files of the root" || return 1
	# Logs: the release is logged (positive control), the value never.
	grep -q "credential released workspace=$ws secret=git protocol=http host=$WORLD_GIT_NAME" "$CONTROLLER_LOG" ||
		_fail "the release is not logged"
	assert_eq 0 "$(grep -cF -- "$token" "$CONTROLLER_LOG" "$wsdir/agent.log" | awk -F: '{s += $2} END {print s + 0}')" "log lines holding the token" || return 1
	# API responses.
	local path
	for path in "/v1/workspaces/$ws" "/v1/workspaces/$ws/secrets" "/v1/workspaces/$ws/secrets/git" \
		"/v1/workspaces/$ws/commands" "/v1/workspaces/$ws/commands/$run" "/v1/workspaces"; do
		api -q GET "$path"
		assert_eq "200 0" "$STATUS $(grep -cF -- "$token" <<<"$BODY")" "GET $path" || return 1
	done
}

run_test seed-workflow test_seed_workflow
run_test seed-credential test_seed_credential
run_test seed-restart test_seed_restart
run_test seed-restart-network test_seed_restart_network
run_test seed-git-host-not-allowed test_seed_git_host_not_allowed
