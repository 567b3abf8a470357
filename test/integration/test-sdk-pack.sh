#!/bin/bash
# run-all: not under sanitizers: npm pack and npm install only; no controller
# The TypeScript SDK as another project depends on it: `npm pack` in sdk/typescript gives a
# tarball with the built dist/ (and no sources, tests or prepare step); an empty project
# installs it offline, from a cache of its own, without a single warning, imports
# "station-sandbox/container", "station-sandbox/host" and "station-sandbox" under node and
# type-checks them under tsc; the SDK's engines.node admits the node the tools image ships.
. "$(dirname "$0")/lib.sh"

SDK=$SRC/sdk/typescript

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "$TEST_NAME" "node and npm are needed (apt-get install nodejs npm)"
	exit 0
fi

TARBALL=
t_pack() {
	local log=$TMP/pack.log list
	(
		cd "$SDK" || exit 1
		npm_ci "$SDK" || exit 1
		npm pack --silent --pack-destination "$TMP" >"$TMP/pack.out"
	) >"$log" 2>&1 || {
		_fail "npm pack failed:"
		tail -n 20 "$log" | sed 's/^/#   /'
		return 1
	}
	TARBALL=$TMP/$(tail -n 1 "$TMP/pack.out")
	[[ -f $TARBALL ]] || { _fail "no tarball: $(cat "$TMP/pack.out")"; return 1; }
	list=$(tar -tzf "$TARBALL" | sort)
	local f
	for f in package/package.json package/README.md package/dist/index.js package/dist/index.d.ts \
		package/dist/container.js package/dist/container.d.ts package/dist/host.js; do
		assert_contains "$f" "$list" "tarball holds $f" || return 1
	done
	assert_eq "" "$(grep -vE '^package/(package\.json|README\.md|dist/.*)$' <<<"$list")" \
		"nothing but package.json, README.md and dist/"
	tar -xzf "$TARBALL" -C "$TMP" package/package.json
	assert_eq "null" "$(jq -c '.scripts.prepare // .scripts.install // .scripts.postinstall // null' "$TMP/package/package.json")" \
		"no install-time script"
}
run_test "sdk npm pack has dist/ and no prepare step" t_pack
[[ -n $TARBALL ]] || exit 1

PROJECT=$TMP/empty
t_install() {
	mkdir -p "$PROJECT"
	# An empty cache and --offline: nothing may be fetched.
	(cd "$PROJECT" && npm_config_cache=$TMP/npm-cache npm install --offline --no-audit \
		--no-fund "$TARBALL") >"$TMP/install.log" 2>&1 || {
		_fail "npm install of the tarball failed:"
		sed 's/^/#   /' "$TMP/install.log"
		return 1
	}
	if grep -qi 'warn' "$TMP/install.log"; then
		_fail "npm install warned:"
		sed 's/^/#   /' "$TMP/install.log"
		return 1
	fi
	assert_eq "function function function" "$(cd "$PROJECT" && node --input-type=module -e '
import { ContainerSandboxAdapter } from "station-sandbox/container";
import { HostSandboxAdapter } from "station-sandbox/host";
import { StationClient } from "station-sandbox";
console.log(typeof ContainerSandboxAdapter, typeof HostSandboxAdapter, typeof StationClient);' 2>&1)" \
		"imports of the three entry points"
}
run_test "sdk tarball installs offline without warnings and imports" t_install

t_types() {
	cat >"$PROJECT/check.ts" <<'TS'
import { ContainerSandboxAdapter } from "station-sandbox/container";
import type { Run } from "station-sandbox";
const sandboxes = new ContainerSandboxAdapter({
	socketPath: "/nonexistent/station.sock",
	image: "sha256:" + "0".repeat(64),
});
export async function first(id: string): Promise<Run["status"]> {
	const run = await sandboxes.exec(id, { command: "true" });
	return run.status;
}
TS
	# A deliberate type error beside it: the check can fail.
	printf '%s\n' 'import { ContainerSandboxAdapter } from "station-sandbox/container";' \
		'new ContainerSandboxAdapter({ socketPath: 42, image: "x" });' >"$PROJECT/bad.ts"
	local tsc=$SDK/node_modules/.bin/tsc flags=(--noEmit --strict --module nodenext
		--moduleResolution nodenext --target es2022 --skipLibCheck false --types node
		--typeRoots "$SDK/node_modules/@types")
	(cd "$PROJECT" && "$tsc" "${flags[@]}" check.ts) >"$TMP/tsc.log" 2>&1 || {
		_fail "the installed types do not check:"
		sed 's/^/#   /' "$TMP/tsc.log"
		return 1
	}
	if (cd "$PROJECT" && "$tsc" "${flags[@]}" bad.ts) >"$TMP/tsc-bad.log" 2>&1; then
		_fail "a wrong option type passed tsc"
		return 1
	fi
	assert_contains "bad.ts(2,31): error TS2322" "$(cat "$TMP/tsc-bad.log")" "the error at socketPath: 42"
}
run_test "sdk tarball's types resolve through its exports" t_types

# engines.node ">=N": N is at most the major version of the node the tools image ships
# (scripts/build-tools-image records it in the layout's .build-info).
t_engines() {
	local want image_node info=${TOOLS_IMAGE:-$SRC/build/tools-image}/.build-info
	want=$(jq -r .engines.node "$TMP/package/package.json")
	assert_match '^>=[0-9]+$' "$want" "engines.node" || return 1
	if [[ ! -f $info ]]; then
		note "no tools image built in ${info%/.build-info}: engines.node $want not compared"
		return 0
	fi
	image_node=$(jq -r .node "$info")
	image_node=${image_node#v}
	assert_le "${want#>=}" "${image_node%%.*}" "engines.node $want against the image's node $image_node"
}
run_test "sdk engines.node admits the tools image's node" t_engines
