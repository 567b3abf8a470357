/* SPDX-License-Identifier: MIT */
#pragma once

/* WebSocket, RFC 6455: the codec both the controller's API and the client library use. Pure: no
 * I/O, no allocation beyond its own state, driven byte by byte by the unit tests. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ws_opcode {
	WS_OP_CONTINUATION = 0x0,
	WS_OP_TEXT = 0x1,
	WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8,
	WS_OP_PING = 0x9,
	WS_OP_PONG = 0xa,
};

enum ws_close_code {
	WS_CLOSE_NORMAL = 1000,
	WS_CLOSE_GOING_AWAY = 1001,
	WS_CLOSE_PROTOCOL_ERROR = 1002,
	WS_CLOSE_UNSUPPORTED_DATA = 1003,
	WS_CLOSE_NO_STATUS = 1005, /* never on the wire: a close frame without a code */
	WS_CLOSE_ABNORMAL = 1006,  /* never on the wire: the connection ended without one */
	WS_CLOSE_INVALID_DATA = 1007,
	WS_CLOSE_POLICY = 1008,
	WS_CLOSE_TOO_BIG = 1009,
	WS_CLOSE_INTERNAL = 1011,
};

/* Control frames carry at most this many payload bytes; a close reason 123. */
#define WS_CONTROL_MAX 125u
/* A frame header: 2 bytes, 8 of extended length, 4 of mask key. */
#define WS_HEADER_MAX 14u
/* Sec-WebSocket-Accept: base64 of 20 bytes, NUL-terminated. */
#define WS_ACCEPT_SIZE 29u

/* Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + GUID)). -EINVAL unless key
 * is base64 of exactly 16 bytes. */
int ws_accept_key(const char *key, char ret[WS_ACCEPT_SIZE]);

/* A close code a peer may send: 1000-1003, 1007-1014, 3000-4999. */
bool ws_close_code_valid(unsigned code);

/* Writes the header of one frame with a payload of len bytes; mask_key NULL for a server
 * frame (unmasked), else the client's key. Returns the header's length (2-14). The payload of
 * a masked frame is masked separately with ws_mask(). */
size_t ws_frame_header(uint8_t out[WS_HEADER_MAX], enum ws_opcode op, bool fin, uint64_t len,
		       const uint8_t *mask_key);
/* XORs data with key as for payload bytes starting at position offset. Its own inverse. */
void ws_mask(void *data, size_t n, const uint8_t key[4], uint64_t offset);
/* A close frame's payload: the code, big-endian, then reason cut to 123 bytes at a character
 * boundary. code 0: an empty payload. Returns its length. */
size_t ws_close_payload(uint8_t out[WS_CONTROL_MAX], uint16_t code, const char *reason);

/* Incremental UTF-8 validation (RFC 3629: no overlongs, no surrogates, <= U+10FFFF; NUL is a
 * valid character here), fed in pieces split anywhere. */
struct ws_utf8 {
	uint8_t need;	/* continuation bytes still expected */
	uint8_t lo, hi; /* the range the next one must fall in */
};
/* False at the first byte that can never be part of valid UTF-8, whatever follows. */
bool ws_utf8_feed(struct ws_utf8 *u, const void *data, size_t n);
/* True when no character is left unfinished. */
bool ws_utf8_complete(const struct ws_utf8 *u);

/* The frame parser. A server's parser requires every frame masked; a client's (for tests and
 * the future C client) requires none. Frames are checked as their bytes arrive: RSV bits and
 * unknown opcodes (1002), control frames fragmented or over 125 bytes (1002), non-minimal
 * length encodings (1002), a continuation without a message or a new message inside one
 * (1002), a frame over max_frame or a message over max_message (1009, decided from the header,
 * before the payload is read), text that is not UTF-8 (1007, at the first bad byte, across
 * frames), a close payload of 1 byte or with an invalid code (1002) or a reason that is not
 * UTF-8 (1007). */
enum ws_role {
	WS_ROLE_SERVER,
	WS_ROLE_CLIENT,
};

struct ws_parser_ops {
	/* A whole message, defragmented; text is valid UTF-8 (not NUL-terminated). data lives
	 * only during the call: an unmasked message that came in one frame within the bytes fed
	 * points into them (no copy), any other into the parser's buffer. */
	int (*message)(void *userdata, enum ws_opcode op, const void *data, size_t n);
	/* A ping or a pong with its payload. */
	int (*control)(void *userdata, enum ws_opcode op, const void *data, size_t n);
	/* A valid close frame: code WS_CLOSE_NO_STATUS when it had none; reason NUL-terminated.
	 * The parser ignores everything after it. */
	int (*close)(void *userdata, uint16_t code, const char *reason);
};

struct ws_parser;

/* max_frame, max_message: payload bytes, > 0. */
int ws_parser_new(enum ws_role role, uint64_t max_frame, uint64_t max_message,
		  const struct ws_parser_ops *ops, void *userdata, struct ws_parser **ret);
void ws_parser_free(struct ws_parser *p);

/* Takes n bytes, calling ops as frames complete. 0 when all were taken; -EBADMSG when the peer
 * broke the protocol (ws_parser_error() says how; the parser takes nothing more); a callback's
 * negative return as is (the rest of data is not looked at). */
int ws_parser_feed(struct ws_parser *p, const void *data, size_t n);
/* After -EBADMSG: the close code to answer with and a short reason (static). 0 before. */
uint16_t ws_parser_error(const struct ws_parser *p, const char **ret_reason);
