// A minimal RFC 6455 client endpoint over a socket node's http module has upgraded: masked
// frames out, unmasked frames in, fragments joined, pings answered, the closing handshake.
// Enough for the API's terminal attach and followed output; not a general-purpose WebSocket.
// The server is not trusted: a masked frame, RSV bits, an unknown opcode, a bad control frame
// or fragment sequence (1002) and a message over `maxMessage` (1009, judged from the header,
// before its payload is buffered) end the connection with that close code and a reason.

import { randomBytes } from "node:crypto";
import type { Duplex } from "node:stream";

export interface WsHandlers {
  onText?: (text: string) => void;
  /** The payload (not copied: it may share memory with the bytes received). */
  onBinary?: (data: Buffer) => void;
  /** error: what ended the connection, when it broke (a deadline that passed: README, "Deadlines"). */
  onClose?: (code: number | null, reason: string, error?: Error) => void;
  /** The server broke the protocol (reason says how); onClose follows with the code sent. */
  onProtocolError?: (reason: string) => void;
  /** Bytes of one message at most; default 16 MiB. */
  maxMessage?: number;
}

const DEFAULT_MAX_MESSAGE = 16 * 1024 * 1024;

const OP_CONT = 0x0,
  OP_TEXT = 0x1,
  OP_BINARY = 0x2,
  OP_CLOSE = 0x8,
  OP_PING = 0x9,
  OP_PONG = 0xa;

export class WsConnection {
  private buf: Buffer;
  private fragments: Buffer[] = [];
  private fragLength = 0;
  private fragOpcode = 0;
  private closeSent = false;
  private closed = false;

  constructor(
    private readonly socket: Duplex,
    head: Buffer,
    private readonly handlers: WsHandlers,
  ) {
    this.buf = head;
    socket.on("data", (c: Buffer) => {
      this.buf = this.buf.length ? Buffer.concat([this.buf, c]) : c;
      this.parse();
    });
    socket.on("close", () => this.finish(1006, "connection closed"));
    socket.on("error", (e) => this.finish(1006, "connection error", true, e));
    if (head.length) queueMicrotask(() => this.parse());
  }

  sendText(text: string): void {
    this.send(OP_TEXT, Buffer.from(text, "utf8"));
  }

  sendBinary(data: Buffer | Uint8Array | string): void {
    this.send(OP_BINARY, typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data));
  }

  /** Starts the closing handshake; the socket ends when the server answers (or after 5 s). */
  close(code = 1000, reason = ""): void {
    if (this.closeSent || this.closed) return;
    const r = Buffer.from(reason, "utf8");
    const p = Buffer.alloc(2 + r.length);
    p.writeUInt16BE(code, 0);
    r.copy(p, 2);
    this.send(OP_CLOSE, p);
    this.closeSent = true;
    setTimeout(() => this.socket.destroy(), 5000).unref();
  }

  private send(opcode: number, payload: Buffer): void {
    if (this.closeSent || this.closed) return;
    const len = payload.length;
    const hlen = len < 126 ? 2 : len < 65536 ? 4 : 10;
    const frame = Buffer.alloc(hlen + 4 + len);
    frame[0] = 0x80 | opcode;
    if (len < 126) frame[1] = 0x80 | len;
    else if (len < 65536) {
      frame[1] = 0x80 | 126;
      frame.writeUInt16BE(len, 2);
    } else {
      frame[1] = 0x80 | 127;
      frame.writeBigUInt64BE(BigInt(len), 2);
    }
    const mask = randomBytes(4);
    mask.copy(frame, hlen);
    for (let i = 0; i < len; i++) frame[hlen + 4 + i] = payload[i]! ^ mask[i & 3]!;
    this.socket.write(frame);
  }

  private parse(): void {
    const max = this.handlers.maxMessage ?? DEFAULT_MAX_MESSAGE;
    for (;;) {
      const b = this.buf;
      if (b.length < 2) return;
      const fin = (b[0]! & 0x80) !== 0;
      const opcode = b[0]! & 0x0f;
      const masked = (b[1]! & 0x80) !== 0;
      const control = (opcode & 0x8) !== 0;
      let len = b[1]! & 0x7f;
      let off = 2;
      if (b[0]! & 0x70) return this.fail(1002, "reserved bits set");
      if (![OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG].includes(opcode))
        return this.fail(1002, "unknown opcode");
      if (masked) return this.fail(1002, "server frames must not be masked");
      if (control && (!fin || len > 125)) return this.fail(1002, "bad control frame");
      if (opcode === OP_CONT && !this.fragOpcode) return this.fail(1002, "continuation without a message");
      if ((opcode === OP_TEXT || opcode === OP_BINARY) && this.fragOpcode)
        return this.fail(1002, "new message inside a fragmented one");
      if (len === 126) {
        if (b.length < 4) return;
        len = b.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (b.length < 10) return;
        const big = b.readBigUInt64BE(2);
        len = big > BigInt(Number.MAX_SAFE_INTEGER) ? Infinity : Number(big);
        off = 10;
      }
      if (!control && len > max - (opcode === OP_CONT ? this.fragLength : 0))
        return this.fail(1009, "message too big");
      if (b.length < off + len) return;
      const payload = b.subarray(off, off + len);
      this.buf = b.subarray(off + len);
      this.frame(fin, opcode, payload);
      if (this.closed) return;
    }
  }

  /** The server broke the protocol: our close with code, then the connection is dropped. */
  private fail(code: number, reason: string): void {
    this.buf = Buffer.alloc(0);
    if (!this.closeSent && !this.closed) {
      const p = Buffer.alloc(2);
      p.writeUInt16BE(code, 0);
      this.send(OP_CLOSE, p);
      this.closeSent = true;
    }
    this.handlers.onProtocolError?.(reason);
    this.socket.end();
    this.finish(code, reason);
  }

  private frame(fin: boolean, opcode: number, payload: Buffer): void {
    switch (opcode) {
      case OP_PING:
        this.send(OP_PONG, payload);
        return;
      case OP_PONG:
        return;
      case OP_CLOSE: {
        const code = payload.length >= 2 ? payload.readUInt16BE(0) : null;
        const reason = payload.length > 2 ? payload.subarray(2).toString("utf8") : "";
        if (!this.closeSent) {
          const echo = code === null ? Buffer.alloc(0) : payload.subarray(0, 2);
          this.send(OP_CLOSE, echo);
          this.closeSent = true;
        }
        this.socket.end(); // flushes the echo; the server closes the TCP connection
        this.finish(code, reason, false);
        return;
      }
      case OP_CONT:
        this.fragments.push(Buffer.from(payload));
        this.fragLength += payload.length;
        if (fin) {
          const whole = Buffer.concat(this.fragments);
          const op = this.fragOpcode;
          this.fragments = [];
          this.fragLength = 0;
          this.fragOpcode = 0;
          this.message(op, whole);
        }
        return;
      default:
        if (!fin) {
          this.fragOpcode = opcode;
          this.fragments = [Buffer.from(payload)];
          this.fragLength = payload.length;
          return;
        }
        this.message(opcode, payload);
    }
  }

  private message(opcode: number, payload: Buffer): void {
    if (opcode === OP_TEXT) this.handlers.onText?.(payload.toString("utf8"));
    else if (opcode === OP_BINARY) this.handlers.onBinary?.(payload);
  }

  private finish(code: number | null, reason: string, destroy = true, error?: Error): void {
    if (this.closed) return;
    this.closed = true;
    if (destroy) this.socket.destroy();
    this.handlers.onClose?.(code, reason, error);
  }
}
