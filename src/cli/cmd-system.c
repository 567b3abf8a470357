/* SPDX-License-Identifier: MIT */
/* ready, worker: what the worker can do. */

#include <getopt.h>
#include <stdio.h>
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

static int cmd_worker(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *doc = NULL;
	int r;

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
	.args = "",
	.summary = "show the worker: name, version, adapters, limits (JSON)",
	.run = cmd_worker,
};
