/* SPDX-License-Identifier: MIT */
/* pause, resume, snapshot create | ls | rm, fork: a workspace's state kept, branched and
 * brought back (docs/api.md, "Pause and resume", "Snapshots and fork"; docs/cli.md). */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "output.h"

static const char *json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* ---- pause, resume ----------------------------------------------------------------------- */

static int pause_or_resume(struct cli *cli, int argc, char **argv,
			   int (*call)(struct station_client *, const char *, json_t **))
{
	_cleanup_json_ json_t *ws = NULL;
	bool json = false;
	int r;

	r = cli_parse_json_args(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no workspace given" : "one workspace at a time");
	r = call(cli->client, argv[optind], &ws);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(ws) < 0 ? EXIT_FAILED : 0;
	printf("%s %s\n", json_str(ws, "id") ?: argv[optind], json_str(ws, "state") ?: "?");
	return fflush(stdout) == EOF ? EXIT_OUTPUT : 0;
}

static int cmd_pause(struct cli *cli, int argc, char **argv)
{
	return pause_or_resume(cli, argc, argv, station_workspace_pause);
}

static int cmd_resume(struct cli *cli, int argc, char **argv)
{
	return pause_or_resume(cli, argc, argv, station_workspace_resume);
}

/* ---- snapshot create --------------------------------------------------------------------- */

/* The one line a new snapshot prints: its id first, so that $(… | cut -f1 -d' ') works. */
static int snapshot_print(const json_t *s)
{
	printf("%s\n", json_str(s, "id") ?: "?");
	return fflush(stdout) == EOF ? EXIT_OUTPUT : 0;
}

static int cmd_snapshot_create(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "memory", no_argument, NULL, 'm' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct station_snapshot_options o = {};
	_cleanup_json_ json_t *s = NULL;
	bool json = false;
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		switch (opt) {
		case 'n':
			if (optarg[0] == '\0' || strlen(optarg) > STATION_SNAPSHOT_NAME_MAX)
				return cli_usage(cli, "--name wants 1 to %d characters",
						 STATION_SNAPSHOT_NAME_MAX);
			o.name = optarg;
			break;
		case 'm':
			o.memory = true;
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
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no workspace given" : "one workspace at a time");
	r = station_snapshot_create(cli->client, argv[optind], &o, &s);
	if (r < 0)
		return cli_fail(cli, r);
	return json ? (output_json(s) < 0 ? EXIT_FAILED : 0) : snapshot_print(s);
}

/* ---- snapshot ls, rm --------------------------------------------------------------------- */

/* With several workers, a WORKER column comes second. */
static int snapshots_print(const json_t *list, bool workers)
{
	static const char *const header[] = {
		"ID", "WORKSPACE", "NAME", "SIZE", "MEMORY", "CREATED"
	};
	static const char *const header_workers[] = { "ID",   "WORKER", "WORKSPACE", "NAME",
						      "SIZE", "MEMORY", "CREATED" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *s;
	size_t i;

	if (json_array_size(list) == 0) {
		printf("(no snapshots: 'station-sandbox snapshot create WS' makes one)\n");
		return fflush(stdout) == EOF ? -EIO : 0;
	}
	if (table_new(workers ? ELEMENTSOF(header_workers) : ELEMENTSOF(header),
		      workers ? header_workers : header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, s) {
		char size[32], name_buf[40 * 4 + 4];
		const char *name = json_str(s, "name");
		/* The name is its creator's to choose: shortened, control characters gone. */
		const char *row[7], **p = row;

		*p++ = json_str(s, "id");
		if (workers)
			*p++ = json_str(s, "worker");
		*p++ = json_str(s, "workspaceId");
		*p++ = name ? output_shorten(name, 40, name_buf) : NULL;
		*p++ = size;
		*p++ = json_is_true(json_object_get(s, "memory")) ? "yes" : "no";
		*p++ = json_str(s, "createdAt");

		snprintf(size, sizeof(size), "%lld",
			 (long long)json_integer_value(json_object_get(s, "sizeBytes")));
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int cmd_snapshot_ls(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *all = NULL;
	json_t *list;
	bool json = false;
	int r, status;

	r = cli_parse_json_args(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	r = station_snapshot_list_all(cli->client, &all);
	if (r < 0)
		return cli_fail(cli, r);
	status = cli_ls_unreachable(cli, all);
	if (status != 0)
		return status;
	list = json_object_get(all, "snapshots");
	r = json ? output_json(list) :
		   snapshots_print(list, station_client_n_workers(cli->client) > 0);
	return r < 0 ? EXIT_FAILED : 0;
}

static int cmd_snapshot_rm(struct cli *cli, int argc, char **argv)
{
	int r, status = 0;

	r = cli_parse_json_args(cli, argc, argv, NULL);
	if (r >= 0)
		return r;
	if (optind >= argc)
		return cli_usage(cli, "no snapshot given");
	for (int i = optind; i < argc; i++) {
		r = station_snapshot_delete(cli->client, argv[i]);
		if (r == -ECONNREFUSED)
			return cli_fail(cli, r);
		if (r < 0)
			status = cli_fail(cli, r);
		else
			printf("%s\n", argv[i]);
		fflush(stdout);
	}
	return status;
}

/* ---- fork -------------------------------------------------------------------------------- */

static int fork_print(const json_t *doc)
{
	json_t *ws;
	size_t i;

	json_array_foreach(json_object_get(doc, "workspaces"), i, ws)
		printf("%s\n", json_str(ws, "id") ?: "?");
	if (fflush(stdout) == EOF)
		return EXIT_OUTPUT;
	fprintf(stderr, "snapshot %s, source paused %lld ms\n", json_str(doc, "snapshot") ?: "?",
		(long long)json_integer_value(json_object_get(doc, "pausedMs")));
	return 0;
}

static int cmd_fork(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	_cleanup_json_ json_t *doc = NULL;
	uint64_t count = 1;
	bool json = false;
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":hn:", options, NULL)) >= 0) {
		switch (opt) {
		case 'n':
			r = cli_parse_u64(cli, "-n", optarg, &count);
			if (r != 0)
				return r;
			if (count < 1 || count > STATION_FORK_MAX)
				return cli_usage(cli, "-n %s: out of range (want 1-%d)", optarg,
						 STATION_FORK_MAX);
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
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no workspace given" : "one workspace at a time");
	r = station_workspace_fork(cli->client, argv[optind], (unsigned)count, &doc);
	if (r < 0)
		return cli_fail(cli, r);
	return json ? (output_json(doc) < 0 ? EXIT_FAILED : 0) : fork_print(doc);
}

/* ---- the command table ------------------------------------------------------------------ */

const struct cli_command cli_cmd_pause = {
	.name = "pause",
	.args = "[--json] WS",
	.summary = "freeze every process of a workspace; its clocks stop until resume",
	.help = "Prints the workspace's id and state (paused). Commands, terminals, file writes\n"
		"and service starts are refused while it is paused, unless it was created with\n"
		"--auto-resume. The pause survives a controller restart.\n\n"
		"  --json  print the workspace as JSON\n",
	.run = cmd_pause,
};

const struct cli_command cli_cmd_resume = {
	.name = "resume",
	.args = "[--json] WS",
	.summary = "thaw a paused workspace: its processes and clocks go on",
	.help = "  --json  print the workspace as JSON\n",
	.run = cmd_resume,
};

static const struct cli_command snapshot_create = {
	.name = "snapshot create",
	.args = "[--name NAME] [--memory] [--json] WS",
	.summary = "keep a workspace's HOME and filesystem changes as a snapshot; print its id",
	.help = "The workspace is paused while it is read (and resumed after, unless it was\n"
		"paused already). A host workspace's snapshot holds its workspace directory only.\n\n"
		"  --name NAME  a name to know it by (1 to 128 characters)\n"
		"  --memory     the processes too (CRIU): refused naming what this worker lacks\n"
		"               when it cannot\n"
		"  --json       print the snapshot as JSON\n",
	.run = cmd_snapshot_create,
};

static const struct cli_command snapshot_ls = {
	.name = "snapshot ls",
	.args = "[--json]",
	.summary = "list snapshots, newest first",
	.help = "  --json  print the snapshots as a JSON array\n"
		"With a worker list, every worker's, a WORKER column second; each worker that did\n"
		"not answer is named on stderr (exit status 1 when none did).\n",
	.run = cmd_snapshot_ls,
};

static const struct cli_command snapshot_rm = {
	.name = "snapshot rm",
	.args = "ID...",
	.summary = "delete snapshots and their images",
	.help = "Refused while a workspace runs on the snapshot. With a worker list, each goes\n"
		"to the worker its id names (s-WORKER-…); an id of the older shape s-… names none:\n"
		"station-sandbox --worker NAME snapshot rm ID.\n",
	.run = cmd_snapshot_rm,
};

static const struct cli_command *const snapshot_commands[] = {
	&snapshot_create,
	&snapshot_ls,
	&snapshot_rm,
};

static int cmd_snapshot(struct cli *cli, int argc, char **argv)
{
	return cli_dispatch(cli, argc, argv, "snapshot", snapshot_commands,
			    ELEMENTSOF(snapshot_commands), "list", "ls");
}

const struct cli_command cli_cmd_snapshot = {
	.name = "snapshot",
	.args = "create|ls|rm [ARGS]",
	.summary = "a workspace's state kept as an image: create, ls, rm",
	.help = "  create [--name N] [--memory] WS   print the new snapshot's id\n"
		"  ls                                the snapshots, newest first\n"
		"  rm ID...                          delete snapshots\n"
		"'station-sandbox create --snapshot ID' starts a workspace from one.\n"
		"'station-sandbox snapshot COMMAND --help' describes a command.\n",
	.run = cmd_snapshot,
};

const struct cli_command cli_cmd_fork = {
	.name = "fork",
	.args = "[-n COUNT] [--json] WS",
	.summary = "snapshot a workspace and start COUNT workspaces from it; print their ids",
	.help = "Prints the new workspaces' ids, one per line (the snapshot's id and how long\n"
		"the source was paused go to stderr). Each fork is independent from then on.\n\n"
		"  -n, --count N  how many (1 to 100; default 1)\n"
		"  --json         print {\"workspaces\":[…],\"snapshot\",\"pausedMs\"}\n",
	.run = cmd_fork,
};
