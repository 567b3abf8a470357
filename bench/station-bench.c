/* SPDX-License-Identifier: MIT */
/* station-bench SUBCOMMAND [OPTIONS]: one measurement per call, appended to --out as JSON rows;
 * `report` prints the table. bench/run drives it; see bench.h and BENCHMARKS.md. */

#include <curl/curl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const struct {
	const char *name;
	int (*fn)(const struct bench_opts *o);
	const char *usage;
} commands[] = {
	{ "floor", cmd_floor, "--runs N" },
	{ "exec", cmd_exec, "--endpoint E --workspace W --runs N" },
	{ "oci-exec", cmd_oci_exec,
	  "--runtime R --state DIR --bundle DIR --runs N [--private-mntns]" },
	{ "oci-run", cmd_oci_run,
	  "--runtime R --state DIR --bundle DIR --runs N [--private-mntns]" },
	{ "create", cmd_create,
	  "--endpoint E --image REF --runs N [--network none|bridge|restricted [--egress JSON]] "
	  "[--pool]" },
	{ "create-burst", cmd_create_burst, "--endpoint E --image REF [--clients N]" },
	{ "rate", cmd_rate, "--endpoint E --workspace W --clients N --seconds S --reps N" },
	{ "spawn-rate", cmd_spawn_rate, "--clients N --seconds S --reps N" },
	{ "memory", cmd_memory,
	  "--endpoint E --count N --controller-pid PID [--image REF --runs N]" },
	{ "output", cmd_output,
	  "--endpoint E --workspace W --bytes N --reps N [--transport follow|sse|ws]" },
	{ "polls", cmd_polls, "--url URL --token-file F --clients N --seconds S --reps N" },
	{ "preview", cmd_preview,
	  "--url http://HOST:PORT/ --netns-pid PID --app-port N --runs N --bytes N --reps N "
	  "[--controller-pid PID]" },
	{ "pause", cmd_pause, "--endpoint E --image REF --count N --runs N [--cgroup NAME]" },
	{ "snapshot", cmd_snapshot, "--endpoint E --workspace W --root DIR --bytes N --runs N" },
	{ "fork", cmd_fork, "--endpoint E --workspace W --count N --runs N" },
	{ "oci-clean", cmd_oci_clean, "--runtime R --state DIR [--private-mntns]" },
	{ "cmd", NULL, "--runs N -- ARGV…" },
};

enum {
	OPT_OUT = 256,
	OPT_ID,
	OPT_ENDPOINT,
	OPT_WORKSPACE,
	OPT_IMAGE,
	OPT_RUNTIME,
	OPT_STATE,
	OPT_BUNDLE,
	OPT_URL,
	OPT_TOKEN_FILE,
	OPT_PRIVATE_MNTNS,
	OPT_RUNS,
	OPT_WARMUP,
	OPT_REPS,
	OPT_CLIENTS,
	OPT_SECONDS,
	OPT_COUNT,
	OPT_BYTES,
	OPT_CONTROLLER_PID,
	OPT_TRANSPORT,
	OPT_NETWORK,
	OPT_EGRESS,
	OPT_POOL,
	OPT_NETNS_PID,
	OPT_APP_PORT,
	OPT_ROOT,
	OPT_CGROUP,
};

static const struct option options[] = {
	{ "out", required_argument, NULL, OPT_OUT },
	{ "id", required_argument, NULL, OPT_ID },
	{ "endpoint", required_argument, NULL, OPT_ENDPOINT },
	{ "workspace", required_argument, NULL, OPT_WORKSPACE },
	{ "image", required_argument, NULL, OPT_IMAGE },
	{ "runtime", required_argument, NULL, OPT_RUNTIME },
	{ "state", required_argument, NULL, OPT_STATE },
	{ "bundle", required_argument, NULL, OPT_BUNDLE },
	{ "url", required_argument, NULL, OPT_URL },
	{ "token-file", required_argument, NULL, OPT_TOKEN_FILE },
	{ "private-mntns", no_argument, NULL, OPT_PRIVATE_MNTNS },
	{ "runs", required_argument, NULL, OPT_RUNS },
	{ "warmup", required_argument, NULL, OPT_WARMUP },
	{ "reps", required_argument, NULL, OPT_REPS },
	{ "clients", required_argument, NULL, OPT_CLIENTS },
	{ "seconds", required_argument, NULL, OPT_SECONDS },
	{ "count", required_argument, NULL, OPT_COUNT },
	{ "bytes", required_argument, NULL, OPT_BYTES },
	{ "controller-pid", required_argument, NULL, OPT_CONTROLLER_PID },
	{ "transport", required_argument, NULL, OPT_TRANSPORT },
	{ "network", required_argument, NULL, OPT_NETWORK },
	{ "egress", required_argument, NULL, OPT_EGRESS },
	{ "pool", no_argument, NULL, OPT_POOL },
	{ "netns-pid", required_argument, NULL, OPT_NETNS_PID },
	{ "app-port", required_argument, NULL, OPT_APP_PORT },
	{ "root", required_argument, NULL, OPT_ROOT },
	{ "cgroup", required_argument, NULL, OPT_CGROUP },
	{},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: station-bench SUBCOMMAND --out FILE --id ROW [OPTIONS]\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "       station-bench %s %s\n", commands[i].name, commands[i].usage);
	fprintf(f, "       station-bench report FILE [--json] [--wall SECONDS] [--settings TEXT]\n"
		   "common: --warmup N (discarded samples first); the token for --endpoint comes\n"
		   "from STATION_TOKEN\n");
}

static int parse_option(int opt, const char *arg, struct bench_opts *o)
{
	switch (opt) {
	case OPT_OUT:
		o->out = arg;
		break;
	case OPT_ID:
		o->id = arg;
		break;
	case OPT_ENDPOINT:
		o->endpoint = arg;
		break;
	case OPT_WORKSPACE:
		o->workspace = arg;
		break;
	case OPT_IMAGE:
		o->image = arg;
		break;
	case OPT_RUNTIME:
		o->runtime = arg;
		break;
	case OPT_STATE:
		o->state = arg;
		break;
	case OPT_BUNDLE:
		o->bundle = arg;
		break;
	case OPT_URL:
		o->url = arg;
		break;
	case OPT_TOKEN_FILE:
		o->token_file = arg;
		break;
	case OPT_PRIVATE_MNTNS:
		o->private_mntns = true;
		break;
	case OPT_RUNS:
		o->runs = atoi(arg);
		break;
	case OPT_WARMUP:
		o->warmup = atoi(arg);
		break;
	case OPT_REPS:
		o->reps = atoi(arg);
		break;
	case OPT_CLIENTS:
		o->clients = atoi(arg);
		break;
	case OPT_SECONDS:
		o->seconds = atof(arg);
		break;
	case OPT_COUNT:
		o->count = atoi(arg);
		break;
	case OPT_BYTES:
		o->bytes = strtoull(arg, NULL, 10);
		break;
	case OPT_CONTROLLER_PID:
		o->controller_pid = (pid_t)atoi(arg);
		break;
	case OPT_TRANSPORT:
		o->transport = arg;
		break;
	case OPT_NETWORK:
		o->network = arg;
		break;
	case OPT_EGRESS:
		o->egress = arg;
		break;
	case OPT_POOL:
		o->pool = true;
		break;
	case OPT_NETNS_PID:
		o->netns_pid = (pid_t)atoi(arg);
		break;
	case OPT_APP_PORT:
		o->app_port = atoi(arg);
		break;
	case OPT_ROOT:
		o->root = arg;
		break;
	case OPT_CGROUP:
		o->cgroup = arg;
		break;
	default:
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct bench_opts o = { .runs = 100,
				.warmup = 10,
				.reps = 3,
				.clients = 1,
				.seconds = 3,
				.count = 200,
				.bytes = 1ull << 30 };
	if (argc < 2 || strcmp(argv[1], "--help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 64 : 0;
	}
	if (strcmp(argv[1], "report") == 0)
		return cmd_report(argc - 1, argv + 1) < 0 ? 1 : 0;
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		int opt;
		while ((opt = getopt_long(argc - 1, argv + 1, "", options, NULL)) != -1)
			if (parse_option(opt, optarg, &o) < 0) {
				usage(stderr);
				return 64;
			}
		if ((!o.out || !o.id || o.runs <= 0 || o.reps <= 0) &&
		    commands[i].fn != cmd_oci_clean) {
			fprintf(stderr,
				"station-bench %s: --out, --id and positive --runs and "
				"--reps are required\n",
				argv[1]);
			return 64;
		}
		o.token = getenv("STATION_TOKEN");
		curl_global_init(CURL_GLOBAL_DEFAULT); /* before any thread makes a handle */
		int r = commands[i].fn ? commands[i].fn(&o) : cmd_command(&o, argv + 1 + optind);
		curl_global_cleanup();
		return r < 0 ? 1 : 0;
	}
	fprintf(stderr, "station-bench: unknown subcommand \"%s\"\n", argv[1]);
	usage(stderr);
	return 64;
}
