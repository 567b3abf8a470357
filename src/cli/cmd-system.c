/* SPDX-License-Identifier: MIT */
/* ready, worker: what the worker can do. */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "output.h"

/* Parses commands that take no arguments but --help (and --json when json is non-NULL).
 * Returns < 0 to go on, else the exit status. */
static int parse_plain(struct cli *cli, int argc, char **argv, bool *json)
{
	int r = cli_parse_json_args(cli, argc, argv, json);

	if (r >= 0)
		return r;
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	return -1;
}

static size_t checks_name_width(json_t *checks)
{
	size_t width = 0, i;
	json_t *check;

	json_array_foreach(checks, i, check) {
		const char *name = json_string_value(json_object_get(check, "name"));

		width = MAX(width, name ? strlen(name) : 0);
	}
	return width;
}

static void ready_print(json_t *doc)
{
	json_t *checks = json_object_get(doc, "checks"), *check;
	int width = (int)checks_name_width(checks);
	size_t i;

	json_array_foreach(checks, i, check) {
		const char *name = json_string_value(json_object_get(check, "name"));
		const char *message = json_string_value(json_object_get(check, "message"));
		bool ok = json_is_true(json_object_get(check, "ok"));

		printf("%-4s %-*s %s\n", ok ? "ok" : "FAIL", width, name ? name : "?",
		       message ? message : "");
	}
}

static int cmd_ready(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *doc = NULL;
	bool json = false;
	int r;

	r = parse_plain(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	r = station_ready(cli->client, &doc);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		output_json(doc);
	else
		ready_print(doc);
	return r == 1 ? 0 : EXIT_FAILED;
}

/* A number of the worker's answer at path ("capacity", "cpus", NULL), as text; "-" when absent. */
static const char *number_field(json_t *worker, const char *const *path, char *buf, size_t size)
{
	json_t *v = worker;

	for (; *path; path++)
		v = json_object_get(v, *path);
	if (!json_is_integer(v))
		return "-";
	snprintf(buf, size, "%lld", (long long)json_integer_value(v));
	return buf;
}

static int workers_print(json_t *list)
{
	static const char *const header[] = { "NAME", "URL",	   "STATE", "VERSION", "WORKSPACES",
					      "FREE", "MEM-AVAIL", "CPUS",  "ERROR" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *w;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, w) {
		json_t *doc = json_object_get(w, "worker");
		static const char *const p_count[] = { "workspaces", NULL };
		static const char *const p_free[] = { "capacity", "workspaces", "free", NULL };
		static const char *const p_mem[] = { "capacity", "memoryBytes", "available", NULL };
		static const char *const p_cpus[] = { "capacity", "cpus", NULL };
		char count[24], free_[24], mem[24], cpus[24];
		const char *why = json_string_value(json_object_get(w, "error"));
		_cleanup_free_ char *error = why ? output_escape(why) : NULL;
		const char *row[] = {
			json_string_value(json_object_get(w, "name")),
			json_string_value(json_object_get(w, "url")),
			json_string_value(json_object_get(w, "state")),
			json_string_value(json_object_get(doc, "version")),
			number_field(doc, p_count, count, sizeof count),
			number_field(doc, p_free, free_, sizeof free_),
			number_field(doc, p_mem, mem, sizeof mem),
			number_field(doc, p_cpus, cpus, sizeof cpus),
			error ? error : "",
		};

		if (!row[0])
			row[0] = "?";
		if (!row[3])
			row[3] = "-";
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

/* worker ls: every worker of the list (or the one controller), up or down. Exit 0 when at
 * least one answered. */
static int cmd_worker_ls(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *list = NULL;
	bool json = false, any_up = false;
	json_t *w;
	size_t i;
	int r;

	r = parse_plain(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	r = station_workers_status(cli->client, &list);
	if (r < 0)
		return cli_fail(cli, r);
	json_array_foreach(list, i, w)
		any_up |= strcmp(json_string_value(json_object_get(w, "state")), "up") == 0;
	r = json ? output_json(list) : workers_print(list);
	return r < 0 || !any_up ? EXIT_FAILED : 0;
}

static int cmd_worker(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *doc = NULL;
	int r;

	if (argc > 1 && strcmp(argv[1], "ls") == 0)
		return cmd_worker_ls(cli, argc - 1, argv + 1);
	r = parse_plain(cli, argc, argv, NULL);
	if (r >= 0)
		return r;
	r = station_worker(cli->client, &doc);
	if (r < 0)
		return cli_fail(cli, r);
	return output_json(doc) < 0 ? EXIT_FAILED : 0;
}

const struct cli_command cli_cmd_ready = {
	.name = "ready",
	.args = "[--json]",
	.summary = "check that the worker can create workspaces (exit 0 when ready, else 1)",
	.help = "  --json  print the controller's answer as JSON\n",
	.run = cmd_ready,
};

const struct cli_command cli_cmd_worker = {
	.name = "worker",
	.args = "[ls [--json]]",
	.summary = "show the worker (JSON); 'worker ls': each worker, up or down, and its capacity",
	.run = cmd_worker,
};
