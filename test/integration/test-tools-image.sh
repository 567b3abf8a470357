#!/bin/bash
# run-all: serial: needs the tools image, which CI builds beside the other tests (it runs after them)
# run-all: not under sanitizers: the tools image's own programs in a container; the controller paths run in the container tests
# The default tools image (scripts/build-tools-image) is agent-ready: in a container workspace
# on it, what an agent tries first (free, ps, ip, python3 with pip and venv, node 20 or later,
# npm, rg, curl, wget, git, jq, a C compiler, make) runs, as user node with HOME /home/node,
# npm prefix /home/node/.local and working directory /home/node/workspace; numpy, pandas,
# matplotlib (Agg), scipy and ipykernel import. Network "none": no outside world needed.
#
# The tools image (minutes the first time) is cached in TOOLS_IMAGE (default
# <source>/build/tools-image, shared with test-network-seed, `make test` and `make test-asan`).
. "$(dirname "${BASH_SOURCE[0]}")/container-lib.sh"

TOOLS_IMAGE=${TOOLS_IMAGE:-$SRC/build/tools-image}
TOOLS_IMAGE_NAME=node-tools

container_prereqs

t0=$SECONDS
tools_image_build
case $? in
0) ;;
2) _container_skip_all "$TOOLS_IMAGE_WHY" ;;
*) not_ok "tools image builds" "$TOOLS_IMAGE_WHY"; exit 1 ;;
esac
note "tools image $TOOLS_DIGEST ready in $((SECONDS - t0)) s ($(tail -n 1 "$TMP/tools-image.log"))"

if ! start_container_controller --import-dir "$TOOLS_IMAGE"; then
	not_ok "controller starts" "see the diagnostics above"
	exit 1
fi
tools_image_import "$TOOLS_IMAGE_NAME"
if [[ $STATUS != 201 || $(j .digest) != "$TOOLS_DIGEST" ]]; then
	not_ok "tools image imports" "HTTP $STATUS $(_short "$BODY")"
	exit 1
fi
TOOLS=$TOOLS_IMAGE_NAME@$TOOLS_DIGEST

# sh_cmd WS SCRIPT [SECONDS]: runs SCRIPT in WS; the final run is in BODY.
sh_cmd() {
	run_start "$1" "$(jq -nc --arg s "$2" '{command: $s, timeoutMs: 230000}')" 60000 || return 1
	[[ $(j .status) != running ]] && return 0
	run_wait "$1" "$RUN" "${3:-240}"
}

# The image is agent-ready: what an agent tries first runs, as user node with the same HOME and
# npm prefix as ever (each line of the script prints its tool's answer; set -e stops at the
# first that is missing, and the stderr says which).
test_agent_tools() {
	local ws out
	new_ws ws "$(jq -nc --arg img "$TOOLS" '{adapter: "container", image: $img}')" || return 1
	sh_cmd "$ws" 'set -e
free -m | head -n 2
ps -e -o pid=,comm= | head -n 3
ip addr show lo | grep -c "inet 127.0.0.1"
python3 --version
python3 -m venv "$HOME/.venv-check" && "$HOME/.venv-check/bin/pip" --version | cut -d" " -f1
node --version
npm --version
rg --version | head -n 1
curl --version | head -n 1
wget --version | head -n 1
git --version
jq --version
cc --version | head -n 1
make --version | head -n 1
printf "%s\n" "$(id -un) $(id -u) $HOME $(npm config get prefix) $PWD"' || return 1
	out=$(j .stdout)
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "the tools run ($(j .stderr | tail -n 3))" || return 1
	note "$(tr '\n' ';' <<<"$out")"
	assert_match $'Mem: +[0-9]+' "$out" "free -m" || return 1
	assert_match $'\n1\n' "$out" "ip addr shows loopback"
	assert_match $'\nPython 3\.(1[1-9]|[2-9][0-9])\.' "$out" "python3 3.11 or later"
	assert_match $'\npip\n' "$out" "pip in a venv"
	local node
	node=$(grep -oE '^v[0-9]+' <<<"$out" | head -n 1)
	assert_le 20 "${node#v}" "node major version ($node)"
	assert_match $'\nripgrep [0-9]' "$out" "rg --version"
	assert_match $'\ncurl [0-9]' "$out" "curl --version"
	assert_match $'\nGNU Wget' "$out" "wget"
	assert_match $'\ngit version' "$out" "git"
	assert_match $'\njq-' "$out" "jq"
	assert_match $'\ncc ' "$out" "cc"
	assert_match $'\nGNU Make' "$out" "make"
	assert_eq "node 1000 /home/node /home/node/.local /home/node/workspace" "$(tail -n 1 <<<"$out")" \
		"user, HOME, npm prefix, working directory"
	api -q DELETE "/v1/workspaces/$ws"
}

# What a code context and a data-analysis agent use: the kernel's packages import, and
# matplotlib draws with Agg (the image's MPLBACKEND; matplotlib spells it Agg or agg by version)
# into a PNG without a display.
test_data_stack() {
	local ws out
	new_ws ws "$(jq -nc --arg img "$TOOLS" '{adapter: "container", image: $img}')" || return 1
	sh_cmd "$ws" 'set -e
python3 -c "import numpy, pandas, matplotlib, scipy, ipykernel, jupyter_client; print(matplotlib.get_backend().lower())"
python3 -c "
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.savefig(\"/tmp/plot.png\")
"
head -c 8 /tmp/plot.png | od -An -tx1 | tr -d " \n"; echo
echo "MPLBACKEND=$MPLBACKEND"' || return 1
	out=$(j .stdout)
	assert_eq "exited 0" "$(j '"\(.status) \(.exitCode)"')" "the imports and the plot ($(j .stderr | tail -n 3))" || return 1
	assert_eq $'agg\n89504e470d0a1a0a\nMPLBACKEND=Agg' "$out" "backend, the PNG's signature, the image's Env"
	api -q DELETE "/v1/workspaces/$ws"
}

run_test tools-image-agent-ready test_agent_tools
run_test tools-image-data-stack test_data_stack
