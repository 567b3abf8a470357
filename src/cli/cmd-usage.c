/* SPDX-License-Identifier: MIT */
/* usage: a workspace's CPU, memory, pids and network over time, or a worker's totals
 * (docs/api.md, "Usage history"; docs/cli.md, "usage"). */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "output.h"

/* bytes as a person reads them: "512B", "46.2MiB". */
static const char *bytes_text(json_t *v, char *buf, size_t size)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double n;
	size_t u = 0;

	if (!json_is_integer(v))
		return "-";
	n = (double)json_integer_value(v);
	if (n < 1024) {
		snprintf(buf, size, "%.0fB", n);
		return buf;
	}
	for (n /= 1024; n >= 1024 && u + 1 < ELEMENTSOF(units); n /= 1024)
		u++;
	snprintf(buf, size, n < 10 ? "%.2f%s" : n < 100 ? "%.1f%s" : "%.0f%s", n, units[u]);
	return buf;
}

/* "2026-12-07T07:19:50.000Z" without its milliseconds when they are 0. */
static const char *time_text(json_t *v, char *buf, size_t size)
{
	const char *t = json_string_value(v);
	size_t n;

	if (!t)
		return "-";
	n = strlen(t);
	if (n > 5 && strcmp(t + n - 5, ".000Z") == 0) {
		snprintf(buf, size, "%.*sZ", (int)(n - 5), t);
		return buf;
	}
	snprintf(buf, size, "%s", t);
	return buf;
}

static int usage_print(json_t *doc)
{
	static const char *const header[] = { "TIME", "CPU", "MEM", "PIDS", "RX", "TX" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *s;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(json_object_get(doc, "samples"), i, s) {
		char when[64], cpu[32], mem[32], pids[32], rx[32], tx[32];
		json_t *c = json_object_get(s, "cpu"), *p = json_object_get(s, "pids");
		const char *row[ELEMENTSOF(header)];

		snprintf(cpu, sizeof cpu, "%.2f", json_number_value(c));
		snprintf(pids, sizeof pids, "%lld", (long long)json_integer_value(p));
		row[0] = time_text(json_object_get(s, "t"), when, sizeof when);
		row[1] = json_is_number(c) ? cpu : "-";
		row[2] = bytes_text(json_object_get(s, "memoryBytes"), mem, sizeof mem);
		row[3] = json_is_integer(p) ? pids : "-";
		row[4] = bytes_text(json_object_get(s, "rxBytes"), rx, sizeof rx);
		row[5] = bytes_text(json_object_get(s, "txBytes"), tx, sizeof tx);
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

/* --worker NAME: that worker's handle of the list; without a list, the one controller, which
 * must be NAME (checked against its answer by the caller). */
static int worker_handle(struct cli *cli, const char *name, struct station_client **ret)
{
	const char *mine = station_client_worker_name(cli->client);

	if (station_client_n_workers(cli->client) > 0) {
		*ret = station_client_worker(cli->client, name);
		if (!*ret)
			return cli_usage(cli, "--worker %s: no such worker in the worker list (%s)",
					 name, station_client_endpoint(cli->client));
		return 0;
	}
	if (mine && strcmp(mine, name) != 0)
		return cli_usage(cli,
				 "--worker %s: the command goes to worker %s (the --worker "
				 "before the command)",
				 name, mine);
	*ret = cli->client;
	return 0;
}

/* The one controller's answer names another worker than --worker did. */
static int worker_check(struct cli *cli, json_t *doc, const char *name)
{
	const char *got = json_string_value(json_object_get(doc, "worker"));

	if (got && strcmp(got, name) == 0)
		return 0;
	fprintf(stderr, "station-sandbox usage: --worker %s: the controller at %s is worker '%s'\n",
		name, station_client_endpoint(cli->client), got ? got : "?");
	return EXIT_FAILED;
}

static int usage_fetch(struct cli *cli, const char *ws, const char *worker,
		       const struct station_usage_options *o, json_t **ret)
{
	struct cli on = *cli; /* a failure is told by the handle that failed */
	int r;

	if (ws)
		r = station_workspace_usage_history(cli->client, ws, o, ret);
	else {
		r = worker_handle(cli, worker, &on.client);
		if (r != 0)
			return r;
		r = station_worker_usage(on.client, o, ret);
	}
	if (r < 0)
		return cli_fail(&on, r);
	if (!ws && station_client_n_workers(cli->client) == 0)
		return worker_check(cli, *ret, worker);
	return 0;
}

static int cmd_usage(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "since", required_argument, NULL, 's' },
		{ "step", required_argument, NULL, 'S' },
		{ "worker", required_argument, NULL, 'w' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct station_usage_options o = {};
	_cleanup_json_ json_t *doc = NULL;
	const char *worker = NULL, *ws;
	bool json = false;
	char why[256];
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		switch (opt) {
		case 's':
			o.since = optarg;
			break;
		case 'S':
			o.step = optarg;
			break;
		case 'w':
			worker = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			return cli_help(cli);
		default:
			return cli_option_error(cli, argv, opt);
		}
	}
	if (argc - optind > 1)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind + 1]);
	ws = optind < argc ? argv[optind] : NULL;
	if (!ws == !worker)
		return cli_usage(cli, ws ? "WS or --worker NAME, not both" :
					   "WS or --worker NAME "
					   "is needed");
	if (station_usage_options_check(&o, why, sizeof why) < 0)
		return cli_usage(cli, "--%s", why);
	cli->workspace = ws;
	r = usage_fetch(cli, ws, worker, &o, &doc);
	if (r != 0)
		return r;
	r = json ? output_json(doc) : usage_print(doc);
	return r < 0 ? EXIT_OUTPUT : 0;
}

const struct cli_command cli_cmd_usage = {
	.name = "usage",
	.args = "(WS | --worker NAME) [--since TIME] [--step STEP] [--json]",
	.summary = "a workspace's CPU, memory, pids and network over time, or a worker's totals",
	.help = "  --worker NAME  the worker's totals (a tenant's token: its own workspaces' sum)\n"
		"  --since TIME   from then: RFC 3339 (2026-12-07T07:00:00Z), milliseconds since\n"
		"                 the epoch, or a duration back from now (90s, 30m, 1h); default 1h\n"
		"  --step STEP    each row's width, 100ms to 24h (5s, 1m); default the sampling\n"
		"                 interval within the last hour, else 1m\n"
		"  --json         the controller's answer as JSON\n"
		"Rows: TIME (the step's start), CPU (cores used over it), MEM (memory in use, its\n"
		"average), PIDS (the most), RX and TX (bytes received and sent within it).\n",
	.run = cmd_usage,
};
