/* SPDX-License-Identifier: MIT */
/* secret set | ls | rm: values a workspace's git credential helper may ask for. A value is read
 * from stdin only, never from the command line, where any local user could read it (ps). */

#include <errno.h>
#include <signal.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"

#define VALUE_MAX 16384 /* the controller's limit */

static const char *json_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* "gh host=github.com username=x-access-token expiresAt=…": the secret in one line. */
static void secret_print_line(const json_t *s)
{
	printf("%s", json_str(s, "name") ?: "?");
	if (json_str(s, "host"))
		printf(" host=%s", json_str(s, "host"));
	if (json_str(s, "username"))
		printf(" username=%s", json_str(s, "username"));
	if (json_str(s, "expiresAt"))
		printf(" expiresAt=%s", json_str(s, "expiresAt"));
	if (json_is_true(json_object_get(s, "expired")))
		printf(" expired");
	printf("\n");
}

/* ---- set --------------------------------------------------------------------------------- */

struct value {
	char buf[VALUE_MAX + 2]; /* one byte more than allowed, to notice a longer value */
	size_t len;
};

static void value_wipe(struct value *v)
{
	explicit_bzero(v->buf, sizeof(v->buf));
	v->len = 0;
}

/* Reads up to sizeof(v->buf) bytes of fd, to its end (or, with line, its first newline). */
static int value_read(int fd, struct value *v, bool line)
{
	while (v->len < sizeof(v->buf)) {
		ssize_t k = read(fd, v->buf + v->len, line ? 1 : sizeof(v->buf) - v->len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		v->len += (size_t)k;
		if (line && v->buf[v->len - 1] == '\n')
			break;
	}
	return 0;
}

static struct termios tty_saved;

/* ^C while the value is typed: the terminal gets its echo back before the signal ends us. */
static void tty_restore_and_die(int sig)
{
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &tty_saved);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* From a terminal: a prompt, and the line typed without echo. */
static int value_read_tty(const char *name, struct value *v)
{
	struct sigaction sa = { .sa_handler = tty_restore_and_die }, old_int, old_term, old_hup;
	struct termios quiet;
	int r;

	if (tcgetattr(STDIN_FILENO, &tty_saved) < 0)
		return -errno;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	quiet = tty_saved;
	quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
	quiet.c_lflag |= ICANON;
	r = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) < 0 ? -errno : 0;
	if (r == 0) {
		fprintf(stderr, "value of secret %s (not shown): ", name);
		fflush(stderr);
		r = value_read(STDIN_FILENO, v, true);
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &tty_saved);
		fputc('\n', stderr);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	return r;
}

/* The value from stdin, one final line break removed ("echo $TOKEN |" adds it). Returns 0, or
 * the exit status after a message. */
static int value_get(struct cli *cli, const char *name, struct value *v)
{
	int r = isatty(STDIN_FILENO) ? value_read_tty(name, v) : value_read(STDIN_FILENO, v, false);

	if (r < 0) {
		fprintf(stderr, "station-sandbox: cannot read the value from stdin: %s\n",
			strerror(-r));
		return EXIT_FAILED;
	}
	if (v->len > 0 && v->buf[v->len - 1] == '\n')
		v->len--;
	if (v->len > 0 && v->buf[v->len - 1] == '\r')
		v->len--;
	if (v->len == 0)
		return cli_usage(cli,
				 "no value on stdin (pipe it in: the value is never an argument)");
	if (v->len > VALUE_MAX)
		return cli_usage(cli, "the value is over %d bytes", VALUE_MAX);
	return 0;
}

static int cmd_secret_set(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "username", required_argument, NULL, 'u' },
		{ "expires-at", required_argument, NULL, 'e' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	struct station_secret_options o = {};
	_cleanup_json_ json_t *secret = NULL;
	_cleanup_free_ struct value *v = NULL;
	bool json = false;
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) >= 0) {
		if (opt == 'H')
			o.host = optarg;
		else if (opt == 'u')
			o.username = optarg;
		else if (opt == 'e')
			o.expires_at = optarg;
		else if (opt == 'j')
			json = true;
		else if (opt == 'h')
			return cli_help(cli);
		else
			return cli_option_error(cli, argv, opt);
	}
	if (argc - optind < 2)
		return cli_usage(cli, "WS and NAME are needed (the value comes from stdin)");
	if (argc - optind > 2)
		return cli_usage(cli,
				 "unexpected argument '%s' (the value comes from stdin, never "
				 "from the command line)",
				 argv[optind + 2]);
	v = calloc(1, sizeof(*v));
	if (!v)
		return EXIT_FAILED;
	r = value_get(cli, argv[optind + 1], v);
	if (r == 0)
		r = station_secret_put(cli->client, argv[optind], argv[optind + 1], v->buf, v->len,
				       &o, &secret);
	value_wipe(v);
	if (r > 0)
		return r;
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(secret) < 0 ? EXIT_FAILED : 0;
	secret_print_line(secret);
	return 0;
}

/* ---- ls, rm ------------------------------------------------------------------------------ */

static int secrets_print(const json_t *list)
{
	static const char *const header[] = { "NAME", "HOST", "USERNAME", "EXPIRES", "UPDATED" };
	_cleanup_(table_freep) struct table *t = NULL;
	json_t *s;
	size_t i;

	if (table_new(ELEMENTSOF(header), header, &t) < 0)
		return -ENOMEM;
	json_array_foreach(list, i, s) {
		_cleanup_free_ char *expires = NULL;
		const char *row[] = {
			json_str(s, "name"),	  json_str(s, "host"),
			json_str(s, "username"),  NULL,
			json_str(s, "updatedAt"),
		};

		if (json_str(s, "expiresAt") &&
		    asprintf(&expires, "%s%s", json_str(s, "expiresAt"),
			     json_is_true(json_object_get(s, "expired")) ? " (expired)" : "") < 0)
			return -ENOMEM;
		row[3] = expires;
		if (table_add_row(t, row) < 0)
			return -ENOMEM;
	}
	return table_print(t);
}

static int cmd_secret_ls(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *list = NULL;
	bool json = false;
	int r;

	r = cli_parse_json_args(cli, argc, argv, &json);
	if (r >= 0)
		return r;
	if (argc - optind != 1)
		return cli_usage(cli,
				 argc == optind ? "no workspace given" : "one workspace at a time");
	r = station_secret_list(cli->client, argv[optind], &list);
	if (r < 0)
		return cli_fail(cli, r);
	r = json ? output_json(list) : secrets_print(list);
	return r < 0 ? EXIT_FAILED : 0;
}

static int cmd_secret_rm(struct cli *cli, int argc, char **argv)
{
	_cleanup_json_ json_t *doc = NULL;
	bool json = false;
	int r;

	r = cli_parse_ws_and(cli, argc, argv, "NAME", &json);
	if (r >= 0)
		return r;
	r = station_secret_delete(cli->client, argv[optind], argv[optind + 1], &doc);
	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(doc) < 0 ? EXIT_FAILED : 0;
	printf("%s deleted\n", argv[optind + 1]);
	return 0;
}

/* ---- the command table ------------------------------------------------------------------ */

static const struct cli_command secret_set = {
	.name = "secret set",
	.args = "[--host HOST] [--username USER] [--expires-at TIME] [--json] WS NAME",
	.summary = "store a secret, its value read from stdin",
	.help = "The value is read from stdin (one final line break removed); from a terminal it\n"
		"is typed without echo. It is never an argument, and never shown again.\n\n"
		"  --host HOST        release it only for this host (github.com, name:port)\n"
		"  --username USER    the credential's user name (default x-access-token)\n"
		"  --expires-at TIME  RFC 3339 (2026-12-02T11:00:00Z): refused after then\n"
		"  --json             print the secret (without its value) as JSON\n",
	.run = cmd_secret_set,
};

static const struct cli_command secret_ls = {
	.name = "secret ls",
	.args = "[--json] WS",
	.summary = "list a workspace's secrets: names, hosts, users, expiry; never values",
	.help = "  --json  print the secrets as a JSON array\n",
	.run = cmd_secret_ls,
};

static const struct cli_command secret_rm = {
	.name = "secret rm",
	.args = "[--json] WS NAME",
	.summary = "revoke a secret at once",
	.help = "  --json  print the answer as JSON\n",
	.run = cmd_secret_rm,
};

static const struct cli_command *const secret_commands[] = {
	&secret_set,
	&secret_ls,
	&secret_rm,
};

static int cmd_secret(struct cli *cli, int argc, char **argv)
{
	return cli_dispatch(cli, argc, argv, "secret", secret_commands, ELEMENTSOF(secret_commands),
			    NULL, NULL);
}

const struct cli_command cli_cmd_secret = {
	.name = "secret",
	.args = "set|ls|rm [ARGS]",
	.summary = "a workspace's secrets (for git's credential helper): set, ls, rm",
	.help = "  set [--host H] [--username U] [--expires-at T] WS NAME   value from stdin\n"
		"  ls WS                                                    names, never values\n"
		"  rm WS NAME                                               revoke\n"
		"'station-sandbox secret COMMAND --help' describes a command.\n",
	.run = cmd_secret,
};
