/* SPDX-License-Identifier: MIT */
/* mcp: a Model Context Protocol server on standard input and output, whose tools are this
 * controller's workspaces (mcp.h). Only protocol messages go to standard output; diagnostics go
 * to standard error. It ends when standard input closes, after answering what it read. Its
 * flags are the operator's limits on what MCP clients may do. */

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "mcp.h"

#define MCP_HELP                                                                                    \
	"  --adapters LIST          adapters clients may use: container (default), host, or both\n" \
	"  --networks LIST          network modes workspace_create may ask for (default: none)\n"   \
	"  --image REF              the image of new workspaces (default: the worker's)\n"          \
	"  --cpus N, --memory-mb N, --pids-limit N\n"                                               \
	"                           limits of new workspaces (default: the worker's)\n"             \
	"  --max-cpus N, --max-memory-mb N, --max-pids-limit N\n"                                   \
	"                           the most a client may ask for\n"                                \
	"  --max-timeout-ms N       the longest command timeout a client may ask for\n"             \
	"  --max-output-bytes N     the most output a run may keep (default 8388608)\n"             \
	"  --result-bytes N         output shown per stream in a result (default 16384)\n"          \
	"  --wait-ms N              how long exec waits before returning a runId (default 25000)\n" \
	"  --max-wait-ms N          the longest waitMs a client may ask for (default 300000)\n"     \
	"  --exec-idle-timeout-ms N the idle timeout of a workspace exec makes when given no\n"     \
	"                           workspaceId (default 1800000, 30 min; 0: never)\n"              \
	"  --no-delete              do not offer workspace_delete\n"

volatile sig_atomic_t mcp_terminated;

static void on_terminate(int sig)
{
	mcp_terminated = 1;
}

static int split_list(const struct cli *cli, const char *what, const char *arg,
		      const char *const *allowed, char ***ret)
{
	_cleanup_free_ char *copy = strdup(arg);
	char *save = NULL, **list = calloc(8, sizeof(char *));
	size_t n = 0;

	if (!copy || !list) {
		free(list);
		return EXIT_FAILED;
	}
	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		const char *found = NULL;

		for (size_t i = 0; allowed[i]; i++)
			if (strcmp(allowed[i], w) == 0)
				found = allowed[i];
		if (!found || n >= 7) {
			free(list);
			return cli_usage(cli, "%s: unknown '%s'", what, w);
		}
		list[n++] = (char *)found;
	}
	free(*ret);
	*ret = list;
	return 0;
}

static int parse_double(const struct cli *cli, const char *name, const char *s, double *ret)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= 0 && v <= 1024))
		return cli_usage(cli, "%s wants a number from 0 to 1024, not '%s'", name, s);
	*ret = v;
	return 0;
}

static int mcp_option(struct cli *cli, int opt, struct mcp_limits *l)
{
	static const char *const adapters[] = { "container", "host", NULL };
	static const char *const networks[] = { "none", "bridge", "restricted", NULL };
	char **list = NULL;
	int r;

	switch (opt) {
	case 'a':
		r = split_list(cli, "--adapters", optarg, adapters, &list);
		if (r)
			return r;
		l->allow_container = l->allow_host = false;
		for (size_t i = 0; list[i]; i++) {
			l->allow_container |= strcmp(list[i], "container") == 0;
			l->allow_host |= strcmp(list[i], "host") == 0;
		}
		free(list);
		return 0;
	case 'n':
		return split_list(cli, "--networks", optarg, networks, &l->networks);
	case 'i':
		l->image = optarg;
		return 0;
	case 'c':
		return parse_double(cli, "--cpus", optarg, &l->cpus);
	case 'C':
		return parse_double(cli, "--max-cpus", optarg, &l->max_cpus);
	case 'm':
		return cli_parse_u64(cli, "--memory-mb", optarg, &l->memory_mb);
	case 'M':
		return cli_parse_u64(cli, "--max-memory-mb", optarg, &l->max_memory_mb);
	case 'p':
		return cli_parse_u64(cli, "--pids-limit", optarg, &l->pids_limit);
	case 'P':
		return cli_parse_u64(cli, "--max-pids-limit", optarg, &l->max_pids_limit);
	case 't':
		return cli_parse_u64(cli, "--max-timeout-ms", optarg, &l->max_timeout_ms);
	case 'o':
		return cli_parse_u64(cli, "--max-output-bytes", optarg, &l->max_output_bytes);
	case 'r':
		return cli_parse_u64(cli, "--result-bytes", optarg, &l->result_bytes);
	case 'w':
		return cli_parse_u64(cli, "--wait-ms", optarg, &l->default_wait_ms);
	case 'W':
		return cli_parse_u64(cli, "--max-wait-ms", optarg, &l->max_wait_ms);
	case 'I':
		return cli_parse_u64(cli, "--exec-idle-timeout-ms", optarg,
				     &l->exec_idle_timeout_ms);
	case 'D':
		l->allow_delete = false;
		return 0;
	default:
		return EXIT_USAGE;
	}
}

static int mcp_parse(struct cli *cli, int argc, char **argv, struct mcp_limits *l)
{
	static const struct option options[] = {
		{ "adapters", required_argument, NULL, 'a' },
		{ "networks", required_argument, NULL, 'n' },
		{ "image", required_argument, NULL, 'i' },
		{ "cpus", required_argument, NULL, 'c' },
		{ "max-cpus", required_argument, NULL, 'C' },
		{ "memory-mb", required_argument, NULL, 'm' },
		{ "max-memory-mb", required_argument, NULL, 'M' },
		{ "pids-limit", required_argument, NULL, 'p' },
		{ "max-pids-limit", required_argument, NULL, 'P' },
		{ "max-timeout-ms", required_argument, NULL, 't' },
		{ "max-output-bytes", required_argument, NULL, 'o' },
		{ "result-bytes", required_argument, NULL, 'r' },
		{ "wait-ms", required_argument, NULL, 'w' },
		{ "max-wait-ms", required_argument, NULL, 'W' },
		{ "exec-idle-timeout-ms", required_argument, NULL, 'I' },
		{ "no-delete", no_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		if (opt == 'h')
			return cli_help(cli);
		if (opt == '?' || opt == ':')
			return cli_option_error(cli, argv, opt);
		r = mcp_option(cli, opt, l);
		if (r)
			return r;
	}
	if (optind < argc)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind]);
	if (l->result_bytes < 64 || l->result_bytes > 1024 * 1024)
		return cli_usage(cli, "--result-bytes wants 64 to 1048576");
	if (l->max_output_bytes < 2 || l->max_output_bytes > 8388608)
		return cli_usage(cli, "--max-output-bytes wants 2 to 8388608");
	if (l->exec_idle_timeout_ms &&
	    (l->exec_idle_timeout_ms < 1000 || l->exec_idle_timeout_ms > 2592000000ull))
		return cli_usage(cli, "--exec-idle-timeout-ms wants 0 or 1000 to 2592000000");
	if (l->default_wait_ms > l->max_wait_ms)
		return cli_usage(cli, "--wait-ms is beyond --max-wait-ms");
	if ((l->max_cpus && l->cpus > l->max_cpus) ||
	    (l->max_memory_mb && l->memory_mb > l->max_memory_mb) ||
	    (l->max_pids_limit && l->pids_limit > l->max_pids_limit))
		return cli_usage(cli, "a default limit is beyond its maximum");
	return -1;
}

static int mcp_run(struct cli *cli, int argc, char **argv)
{
	static char *default_networks[] = { (char *)"none", NULL };
	struct mcp_server s = {
		.client = cli->client,
		.in_fd = STDIN_FILENO,
		.out_fd = STDOUT_FILENO,
		.limits = {
			.allow_container = true,
			.allow_delete = true,
			.max_output_bytes = 8388608,
			.result_bytes = 16384,
			.default_wait_ms = 25000,
			.max_wait_ms = 300000,
			.exec_idle_timeout_ms = MCP_EXEC_IDLE_TIMEOUT_MS,
		},
	};
	int r;

	r = mcp_parse(cli, argc, argv, &s.limits);
	if (r >= 0) {
		free(s.limits.networks);
		return r;
	}
	if (!s.limits.networks) {
		s.limits.networks = calloc(2, sizeof(char *));
		if (s.limits.networks)
			s.limits.networks[0] = default_networks[0];
	}
	s.queue = json_array();
	s.runs = json_object();
	if (!s.queue || !s.runs || !s.limits.networks) {
		fprintf(stderr, "station-sandbox mcp: out of memory\n");
		return EXIT_FAILED;
	}
	signal(SIGPIPE, SIG_IGN);
	/* SIGTERM (the controller's /mcp when its client went away) cancels the run an exec in
	 * progress started, then ends the server. No SA_RESTART: waits see EINTR. */
	struct sigaction sa = { .sa_handler = on_terminate };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	station_client_set_interrupt(cli->client, mcp_interrupt_check, &s);
	while (!s.out_closed && !mcp_terminated) {
		json_t *msg;

		if (json_array_size(s.queue) == 0) {
			if (s.in_eof)
				break;
			mcp_input_poll(&s, -1);
			continue;
		}
		msg = json_incref(json_array_get(s.queue, 0));
		json_array_remove(s.queue, 0);
		mcp_handle_queued(&s, msg);
		json_decref(msg);
	}
	station_client_set_interrupt(cli->client, NULL, NULL);
	json_decref(s.queue);
	json_decref(s.runs);
	free(s.limits.networks);
	free(s.in_buf);
	return 0;
}

const struct cli_command cli_cmd_mcp = {
	"mcp",
	"[OPTIONS]",
	"serve the Model Context Protocol on stdin/stdout (workspaces as tools)",
	MCP_HELP,
	mcp_run,
};
