/* SPDX-License-Identifier: MIT */
/* attach: a terminal on this one (raw mode, resize on SIGWINCH, a detach key); terminal ls,
 * terminal close. */

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"
#include "output.h"

/* The detach key: Ctrl-] then d (twice Ctrl-] sends one), like tmux's prefix key. */
#define DETACH_PREFIX 0x1d
#define DETACH_KEY 'd'
#define DETACH_HELP "Ctrl-] d"

static volatile sig_atomic_t got_winch;
static volatile sig_atomic_t got_quit;

static void on_winch(int sig)
{
	got_winch = 1;
}

static void on_quit(int sig)
{
	got_quit = 1;
}

struct attach_state {
	const char *ws;
	const char *term;
	bool prefix; /* Ctrl-] seen, the next key decides */
	bool detached;
	bool exited;
	int exit_code;
	int signal;
	uint64_t gap;
};

/* ---- the local terminal -------------------------------------------------------------------- */

struct tty {
	bool raw;
	struct termios saved;
};

static void tty_raw(struct tty *t)
{
	struct termios raw;

	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &t->saved) < 0)
		return;
	raw = t->saved;
	cfmakeraw(&raw);
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0)
		t->raw = true;
}

static void tty_restore(struct tty *t)
{
	if (t->raw)
		(void)tcsetattr(STDIN_FILENO, TCSAFLUSH, &t->saved);
	t->raw = false;
}

static void tty_size(unsigned *cols, unsigned *rows)
{
	struct winsize w = { 0 };

	*cols = 80;
	*rows = 24;
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 && w.ws_row > 0) {
		*cols = w.ws_col;
		*rows = w.ws_row;
	}
}

/* ---- the session --------------------------------------------------------------------------- */

static void term_output(const void *data, size_t n, void *userdata)
{
	(void)output_write(STDOUT_FILENO, data, n);
}

static void term_gap(uint64_t bytes, void *userdata)
{
	struct attach_state *s = userdata;

	s->gap += bytes;
}

static void term_exit(int exit_code, int signal, void *userdata)
{
	struct attach_state *s = userdata;

	s->exited = true;
	s->exit_code = exit_code;
	s->signal = signal;
}

static const struct station_term_callbacks term_callbacks = {
	.output = term_output,
	.gap = term_gap,
	.exit = term_exit,
};

/* Keystrokes to the terminal, minus the detach sequence. */
static int forward_input(struct station_term *t, struct attach_state *s, const uint8_t *in,
			 size_t n)
{
	uint8_t out[4096 + 2];
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (s->prefix) {
			s->prefix = false;
			if (in[i] == DETACH_KEY) {
				s->detached = true;
				break;
			}
			if (in[i] != DETACH_PREFIX)
				out[k++] = DETACH_PREFIX;
			out[k++] = in[i];
		} else if (in[i] == DETACH_PREFIX)
			s->prefix = true;
		else
			out[k++] = in[i];
	}
	return station_term_send(t, out, k);
}

static int read_stdin(struct station_term *t, struct attach_state *s)
{
	uint8_t buf[4096];
	ssize_t n = read(STDIN_FILENO, buf, sizeof buf);

	if (n < 0 && errno == EINTR)
		return 0;
	if (n <= 0) { /* stdin closed: leave the terminal running */
		s->detached = true;
		return 0;
	}
	return forward_input(t, s, buf, (size_t)n);
}

static void send_size(struct station_term *t)
{
	unsigned cols, rows;

	got_winch = 0;
	tty_size(&cols, &rows);
	(void)station_term_resize(t, cols, rows);
}

/* Until the terminal ends, the user detaches or the connection breaks. */
static int session(struct station_term *t, struct attach_state *s)
{
	struct pollfd fds[2] = {
		{ .fd = STDIN_FILENO, .events = POLLIN },
		{ .fd = station_term_fd(t), .events = POLLIN },
	};
	int r = 0;

	send_size(t);
	/* The first output may have come with the handshake: no poll() would announce it. */
	r = station_term_pump(t, &term_callbacks, s);
	if (r != 0)
		return r < 0 ? r : 0;
	while (!s->detached && !got_quit) {
		if (got_winch)
			send_size(t);
		if (poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (fds[1].revents) {
			r = station_term_pump(t, &term_callbacks, s);
			if (r != 0)
				return r < 0 ? r : 0;
		}
		if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			r = read_stdin(t, s);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_winch }; /* no SA_RESTART: poll() wakes */

	sigaction(SIGWINCH, &sa, NULL);
	sa.sa_handler = on_quit;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
}

static int report_end(const struct cli *cli, const struct attach_state *s, int r)
{
	if (s->gap)
		fprintf(stderr,
			"[%llu bytes of output were skipped: this terminal fell behind]\r\n",
			(unsigned long long)s->gap);
	if (s->exited) {
		if (s->signal > 0)
			fprintf(stderr, "[terminal %s ended: signal %d]\n", s->term, s->signal);
		else
			fprintf(stderr, "[terminal %s exited with code %d]\n", s->term,
				s->exit_code);
		return s->exit_code > 0 ? s->exit_code : s->signal > 0 ? 128 + s->signal : 0;
	}
	if (s->detached || got_quit) {
		fprintf(stderr, "[detached from %s; reattach with: station-sandbox attach %s %s]\n",
			s->term, s->ws, s->term);
		return 0;
	}
	if (r < 0)
		fprintf(stderr, "station-sandbox: terminal connection failed: %s\n", strerror(-r));
	else
		fprintf(stderr,
			"[connection to the controller closed; the terminal keeps running]\n");
	return EXIT_FAILED;
}

static int open_terminal(struct cli *cli, const char *ws, const char *command, char **ret)
{
	struct station_terminal_options o = { .command = command };
	_cleanup_json_ json_t *t = NULL;
	const char *id;
	int r;

	tty_size(&o.cols, &o.rows);
	r = station_terminal_open(cli->client, ws, &o, &t);
	if (r < 0)
		return cli_fail(cli, r);
	id = json_string_value(json_object_get(t, "id"));
	if (!id || !(*ret = strdup(id)))
		return cli_fail(cli, -ENOMEM);
	return -1;
}

static int cmd_attach(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "read-only", no_argument, NULL, 'r' },
		{ "command", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	_cleanup_free_ char *created = NULL;
	struct attach_state s = {};
	struct station_term *t = NULL;
	const char *command = NULL;
	bool read_only = false;
	struct tty tty = {};
	int opt, r;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":hrc:", options, NULL)) >= 0) {
		if (opt == 'r')
			read_only = true;
		else if (opt == 'c')
			command = optarg;
		else if (opt == 'h')
			return cli_help(cli);
		else
			return cli_option_error(cli, argv, opt);
	}
	if (argc - optind < 1)
		return cli_usage(cli, "missing WORKSPACE");
	if (argc - optind > 2)
		return cli_usage(cli, "unexpected argument '%s'", argv[optind + 2]);
	s.ws = argv[optind];
	cli->workspace = s.ws;
	s.term = optind + 1 < argc ? argv[optind + 1] : NULL;
	if (!s.term) {
		r = open_terminal(cli, s.ws, command, &created);
		if (r >= 0)
			return r;
		s.term = created;
	}
	r = station_term_attach(cli->client, s.ws, s.term, read_only, &t);
	if (r < 0)
		return cli_fail(cli, r);
	fprintf(stderr, "[attached to terminal %s%s; detach with " DETACH_HELP "]\r\n", s.term,
		read_only ? " (read-only)" : "");
	install_signals();
	tty_raw(&tty);
	r = session(t, &s);
	tty_restore(&tty);
	station_term_free(t);
	return report_end(cli, &s, r);
}

const struct cli_command cli_cmd_attach = {
	.name = "attach",
	.args = "WORKSPACE [TERMINAL]",
	.summary = "attach this terminal to a workspace terminal (a new login shell by default)",
	.help = "  --read-only      watch only: keystrokes are ignored\n"
		"  --command CMD    for a new terminal: run CMD instead of the login shell\n"
		"Detach with " DETACH_HELP " (Ctrl-] twice sends one Ctrl-]); the terminal keeps\n"
		"running and a later attach replays its scrollback.\n",
	.run = cmd_attach,
};

/* ---- terminal ls | close -------------------------------------------------------------------- */

static const char *exit_text(json_t *t, char *buf, size_t n)
{
	json_t *code = json_object_get(t, "exitCode"), *sig = json_object_get(t, "signal");

	if (json_is_integer(code))
		snprintf(buf, n, "%lld", (long long)json_integer_value(code));
	else if (json_is_integer(sig))
		snprintf(buf, n, "signal %lld", (long long)json_integer_value(sig));
	else
		return NULL;
	return buf;
}

static int terminal_ls(struct cli *cli, const char *ws, bool json)
{
	static const char *const header[] = { "ID", "STATE", "SIZE", "EXIT", "COMMAND" };
	_cleanup_(table_freep) struct table *tab = NULL;
	_cleanup_json_ json_t *list = NULL;
	size_t i;
	json_t *t;
	int r = station_terminal_list(cli->client, ws, &list);

	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(list) < 0 ? EXIT_FAILED : 0;
	if (table_new(ELEMENTSOF(header), header, &tab) < 0)
		return EXIT_FAILED;
	json_array_foreach(list, i, t) {
		char size[32], code[32], cmd[256];
		const char *command = json_string_value(json_object_get(t, "command"));
		const char *cells[5] = {
			json_string_value(json_object_get(t, "id")),
			json_string_value(json_object_get(t, "state")),
			size,
			exit_text(t, code, sizeof code),
			command ? output_shorten(command, 60, cmd) : NULL,
		};

		snprintf(size, sizeof size, "%lldx%lld",
			 (long long)json_integer_value(json_object_get(t, "cols")),
			 (long long)json_integer_value(json_object_get(t, "rows")));
		if (table_add_row(tab, cells) < 0)
			return EXIT_FAILED;
	}
	return table_print(tab) < 0 ? EXIT_FAILED : 0;
}

static int terminal_close(struct cli *cli, const char *ws, const char *term, bool json)
{
	_cleanup_json_ json_t *t = NULL;
	char code[32];
	int r = station_terminal_close(cli->client, ws, term, &t);

	if (r < 0)
		return cli_fail(cli, r);
	if (json)
		return output_json(t) < 0 ? EXIT_FAILED : 0;
	printf("%s %s%s%s\n", term, json_string_value(json_object_get(t, "state")) ?: "?",
	       exit_text(t, code, sizeof code) ? " " : "",
	       exit_text(t, code, sizeof code) ? code : "");
	return 0;
}

static int cmd_terminal(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	const char *sub = argc > 1 ? argv[1] : NULL;
	bool json = false;
	int opt, want;

	if (!sub)
		return cli_usage(cli, "no terminal command given (ls or close)");
	if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0)
		return cli_help(cli);
	if (strcmp(sub, "ls") != 0 && strcmp(sub, "close") != 0)
		return cli_usage(cli, "unknown terminal command '%s'", sub);
	argc--;
	argv++;
	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":hj", options, NULL)) >= 0) {
		if (opt == 'j')
			json = true;
		else if (opt == 'h')
			return cli_help(cli);
		else
			return cli_option_error(cli, argv, opt);
	}
	want = strcmp(sub, "ls") == 0 ? 1 : 2;
	if (argc - optind != want)
		return cli_usage(cli, "%s wants %s", sub,
				 want == 1 ? "WORKSPACE" : "WORKSPACE TERMINAL");
	if (want == 1)
		return terminal_ls(cli, argv[optind], json);
	return terminal_close(cli, argv[optind], argv[optind + 1], json);
}

const struct cli_command cli_cmd_terminal = {
	.name = "terminal",
	.args = "ls WORKSPACE | close WORKSPACE TERMINAL [--json]",
	.summary = "list a workspace's terminals, or force-close one",
	.help = "  ls WORKSPACE [--json]             list terminals (live and ended)\n"
		"  close WORKSPACE TERMINAL [--json] kill the terminal's processes, show its end\n",
	.run = cmd_terminal,
};
