/* SPDX-License-Identifier: MIT */
/* create, ls, rm, restart: workspaces. */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "output.h"

struct create_args {
	struct station_workspace_options ws;
	char **env;
	char **labels;
	char *seccomp_profile; /* a name, or a path made absolute */
	struct cli_egress egress;
	bool json;
};

static int parse_cpus(struct cli *cli, const char *s, double *ret)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v >= 0))
		return cli_usage(cli, "--cpus wants a non-negative number, not '%s'", s);
	*ret = v;
	return 0;
}

/* One option of create; 0 to go on, else the exit status. */
static int create_option(struct cli *cli, int opt, char **argv, struct create_args *a)
{
	switch (opt) {
	case 'e':
		return cli_env_add(cli, &a->env, optarg);
	case 'L':
		return cli_label_add(cli, &a->labels, optarg);
	case 'N':
		a->ws.name = optarg;
		return 0;
	case 'c':
		return parse_cpus(cli, optarg, &a->ws.cpus);
	case 'm':
		return cli_parse_u64(cli, "--memory-mb", optarg, &a->ws.memory_mb);
	case 'p':
		return cli_parse_u64(cli, "--pids-limit", optarg, &a->ws.pids_limit);
	case 'I':
		return cli_parse_u64(cli, "--idle-timeout-ms", optarg, &a->ws.idle_timeout_ms);
	case 'a':
		a->ws.adapter = optarg;
		return 0;
	case 'i':
		a->ws.image = optarg;
		return 0;
	case 's':
		free(a->seccomp_profile);
		a->seccomp_profile = NULL;
		if (!strchr(optarg, '/')) { /* a profile name, looked up by the controller */
			a->seccomp_profile = strdup(optarg);
			return a->seccomp_profile ? 0 : -ENOMEM;
		}
		return cli_absolute_path(cli, "--seccomp-profile", optarg, &a->seccomp_profile);
	case 'n':
		a->ws.network = optarg;
		return 0;
	case 'A':
		return cli_egress_allow(cli, &a->egress, optarg);
	case 'E':
		a->egress.file = optarg;
		return 0;
	case 'j':
		a->json = true;
		return 0;
	case 'W':
		a->ws.worker = optarg;
		return 0;
	case 'S':
		a->ws.snapshot = optarg;
		return 0;
	case 'R':
		a->ws.auto_resume = true;
		return 0;
	case 'D':
		if (strcmp(optarg, "pause") != 0 && strcmp(optarg, "stop") != 0)
			return cli_usage(cli, "--idle-action wants pause or stop, not '%s'",
					 optarg);
		a->ws.idle_action = optarg;
		return 0;
	case 'h':
		return cli_help(cli);
	default:
		return cli_option_error(cli, argv, opt);
	}
}

/* Returns < 0 to go on, else the exit status (0 after --help). */
static int create_parse(struct cli *cli, int argc, char **argv, struct create_args *a)
{
	static const struct option options[] = {
		{ "env", required_argument, NULL, 'e' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "memory-mb", required_argument, NULL, 'm' },
		{ "pids-limit", required_argument, NULL, 'p' },
		{ "idle-timeout-ms", required_argument, NULL, 'I' },
		{ "adapter", required_argument, NULL, 'a' },
		{ "image", required_argument, NULL, 'i' },
		{ "seccomp-profile", required_argument, NULL, 's' },
		{ "network", required_argument, NULL, 'n' },
		{ "allow", required_argument, NULL, 'A' },
		{ "egress", required_argument, NULL, 'E' },
		{ "json", no_argument, NULL, 'j' },
		{ "worker", required_argument, NULL, 'W' },
		{ "snapshot", required_argument, NULL, 'S' },
		{ "auto-resume", no_argument, NULL, 'R' },
		{ "idle-action", required_argument, NULL, 'D' },
		{ "name", required_argument, NULL, 'N' },
		{ "label", required_argument, NULL, 'L' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int opt, r = -1;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		r = create_option(cli, opt, argv, a);
		if (r != 0)
			return r;
		if (opt == 'h')
			return 0;
	}
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	if (a->ws.worker && station_client_n_workers(cli->client) == 0)
		return cli_usage(cli, "--worker needs a worker list (STATION_WORKERS or a workers "
				      "file; docs/cli.md, \"Many workers\")");
	if (a->ws.snapshot && a->ws.image)
		return cli_usage(cli,
				 "--snapshot and --image are exclusive (a snapshot has its image)");
	if ((a->egress.allow || a->egress.file) && !a->ws.network)
		a->ws.network = "restricted";
	if ((a->egress.allow || a->egress.file) && strcmp(a->ws.network, "restricted") != 0)
		return cli_usage(cli, "--allow and --egress need --network restricted, not '%s'",
				 a->ws.network);
	r = cli_egress_text(cli, &a->egress, "--egress", &a->ws.egress);
	if (r != 0)
		return r;
	a->ws.env = a->env;
	a->ws.labels = a->labels;
	a->ws.seccomp_profile = a->seccomp_profile;
	return -1;
}

static int cmd_create(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *ws = NULL;
	struct create_args a = {};
	int r;

	r = create_parse(cli, argc, argv, &a);
	if (r < 0)
		r = station_workspace_create(cli->client, &a.ws, &ws);
	free(a.env);
	free(a.labels);
	free(a.seccomp_profile);
	cli_egress_done(&a.egress);
	if (!ws) /* help, a usage error, or a failed request */
		return r >= 0 ? r : cli_fail(cli, r);
	if (a.json)
		return output_json(ws) < 0 ? EXIT_FAILED : 0;
	printf("%s\n", json_string_value(json_object_get(ws, "id")));
	return 0;
}

/* With several workers, a WORKER column comes second. The name comes last ("-": none). */
static int ls_print(json_t *list, bool workers)
{
	static const char *const header[] = { "ID", "STATE", "ADAPTER", "CREATED", "NAME" };
	static const char *const header_workers[] = { "ID",	 "WORKER",  "STATE",
						      "ADAPTER", "CREATED", "NAME" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *ws;
	size_t i;

	if (table_new(workers ? ELEMENTSOF(header_workers) : ELEMENTSOF(header),
		      workers ? header_workers : header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, ws) {
		const char *row[6], **p = row;
		const char *name = json_string_value(json_object_get(ws, "name"));

		*p++ = json_string_value(json_object_get(ws, "id"));
		if (workers)
			*p++ = json_string_value(json_object_get(ws, "worker"));
		*p++ = json_string_value(json_object_get(ws, "state"));
		*p++ = json_string_value(json_object_get(ws, "adapter"));
		*p++ = json_string_value(json_object_get(ws, "createdAt"));
		*p++ = name ? name : "-";
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

int cli_ls_unreachable(const struct cli *cli, json_t *all)
{
	json_t *unreachable = json_object_get(all, "unreachable"), *u;
	size_t i;

	json_array_foreach(unreachable, i, u) {
		_cleanup_free_ char *safe =
			output_escape(json_string_value(json_object_get(u, "error")));

		fprintf(stderr, "station-sandbox: %s\n", safe ? safe : "?");
	}
	if (json_array_size(unreachable) > 0 &&
	    json_array_size(unreachable) == station_client_n_workers(cli->client))
		return EXIT_FAILED;
	return 0;
}

/* ls's options; < 0 to go on, else the exit status. */
static int ls_parse(struct cli *cli, int argc, char **argv, struct station_workspace_filter *f,
		    char ***labels, bool *json)
{
	static const struct option options[] = {
		{ "json", no_argument, NULL, 'j' },	  { "label", required_argument, NULL, 'L' },
		{ "name", required_argument, NULL, 'N' }, { "state", required_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },	  {},
	};
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		if (opt == 'h')
			return cli_help(cli);
		if (opt == 'j')
			*json = true;
		else if (opt == 'N')
			f->name = optarg;
		else if (opt == 'S')
			f->state = optarg;
		else if (opt == 'L' && (r = cli_selector_add(cli, labels, optarg)) != 0)
			return r;
		else if (opt != 'L')
			return cli_option_error(cli, argv, opt);
	}
	f->labels = *labels;
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	return -1;
}

static int cmd_ls(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *list = NULL;
	struct station_workspace_filter f = {};
	_cleanup_free_ char **labels = NULL;
	bool json = false;
	int r;

	r = ls_parse(cli, argc, argv, &f, &labels, &json);
	if (r >= 0)
		return r;
	if (station_client_n_workers(cli->client) > 0) {
		_cleanup_json_ json_t *all = NULL;
		int status;

		r = station_workspace_list_where(cli->client, &f, &all);
		if (r < 0)
			return cli_fail(cli, r);
		status = cli_ls_unreachable(cli, all);
		if (status != 0)
			return status;
		list = json_incref(json_object_get(all, "workspaces"));
	} else {
		_cleanup_json_ json_t *all = NULL;

		r = station_workspace_list_where(cli->client, &f, &all);
		if (r < 0)
			return cli_fail(cli, r);
		list = json_incref(json_object_get(all, "workspaces"));
	}
	r = json ? output_json(list) : ls_print(list, station_client_n_workers(cli->client) > 0);
	return r < 0 ? EXIT_FAILED : 0;
}

static int cmd_rm(struct cli *cli, int argc, char **argv)
{
	int r, status = 0;

	r = cli_parse_json_args(cli, argc, argv, NULL);
	if (r >= 0)
		return r;
	if (optind >= argc)
		return cli_usage(cli, "no workspace given");
	for (int i = optind; i < argc; i++) {
		r = station_workspace_delete(cli->client, argv[i], NULL);
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

static int cmd_restart(struct cli *cli, int argc, char **argv)
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
	r = station_workspace_restart(cli->client, argv[optind], &ws);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(ws) < 0 ? EXIT_FAILED : 0;
	printf("%s\n", json_string_value(json_object_get(ws, "id")));
	return 0;
}

const struct cli_command cli_cmd_create = {
	.name = "create",
	.args = "[--adapter host|container] [--image REF] [--seccomp-profile NAME|PATH] "
		"[--network none|bridge|restricted] [--allow RULE... | --egress FILE|-] "
		"[--env K=V]... [--cpus N] [--memory-mb N] [--pids-limit N] [--idle-timeout-ms N] "
		"[--snapshot ID] [--auto-resume] [--idle-action pause|stop] [--name NAME] "
		"[--label K=V]... [--worker NAME] [--json]",
	.summary = "create a workspace and print its id",
	.help = "  --adapter A            host or container (default: the controller's)\n"
		"  --image REF            container image, pinned by digest: name@sha256:<64 hex>\n"
		"                         or sha256:<64 hex> (default: the controller's)\n"
		"  --seccomp-profile NAME|PATH\n"
		"                         Docker-format seccomp profile for a container: a name\n"
		"                         or a path in the controller's profile directories\n"
		"                         (default: the controller's)\n"
		"  --network MODE         a container's network: none (loopback only), bridge\n"
		"                         (outbound through NAT) or restricted (bridge with an\n"
		"                         egress policy, default deny); default: none\n"
		"  --allow RULE           restricted: allow a destination (repeatable; implies\n"
		"                         --network restricted):\n" CLI_ALLOW_HELP
		"  --egress FILE|-        restricted: the egress policy as a JSON file (- for\n"
		"                         stdin), {\"allow\": [...]} (docs/api.md, \"Network\")\n"
		"  --env K=V              set an environment variable for every command (repeatable)\n"
		"  --cpus N               CPU limit, in CPUs (0: none)\n"
		"  --memory-mb N          memory limit in MiB (0: the worker's default)\n"
		"  --pids-limit N         process limit (0: the worker's default)\n"
		"  --idle-timeout-ms N    stop it once idle this long (0: never)\n"
		"  --idle-action A        what being idle that long does: stop (default) or pause\n"
		"  --snapshot ID          start from a snapshot (s-WORKER-…): its image, HOME and\n"
		"                         files (snapshot create, fork); not with --image; with a\n"
		"                         worker list, on the worker its id names\n"
		"  --auto-resume          once paused, resume by itself for a command, terminal,\n"
		"                         file write or service start (else those are refused)\n"
		"  --name NAME            its name, unique among your workspaces on the worker:\n"
		"                         [a-z0-9][a-z0-9._-]{0,62}, not shaped as an id; any\n"
		"                         WS argument takes it in place of the id\n"
		"  --label K=V            a label (repeatable; at most 32)\n"
		"  --worker NAME          with a worker list: create on that worker (default:\n"
		"                         where the placement rule puts it)\n"
		"  --json                 print the new workspace as JSON\n",
	.run = cmd_create,
};

const struct cli_command cli_cmd_ls = {
	.name = "ls",
	.args = "[--label K=V|K]... [--name NAME] [--state STATE] [--json]",
	.summary = "list workspaces (with a worker list: of every worker, a WORKER column)",
	.help = "  --label K=V    only those with label K set to V (repeatable: all must hold)\n"
		"  --label K      only those with label K\n"
		"  --name NAME    only the one with this name\n"
		"  --state STATE  only those in this state (ready, stopped, paused, …)\n"
		"  --json         print the workspaces as a JSON array\n"
		"With a worker list, each worker that did not answer is named on stderr; the exit\n"
		"status is 0 when at least one answered, 1 when none did.\n",
	.run = cmd_ls,
};

const struct cli_command cli_cmd_rm = {
	.name = "rm",
	.args = "WS...",
	.summary = "delete workspaces, their runs and their files",
	.run = cmd_rm,
};

const struct cli_command cli_cmd_restart = {
	.name = "restart",
	.args = "[--json] WS",
	.summary = "restart a workspace's agent, keeping its HOME",
	.help = "  --json  print the workspace as JSON\n",
	.run = cmd_restart,
};
