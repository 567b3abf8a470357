import type { ErrorCode } from "./types.js";

/** Codes the SDK itself uses when no answer came from the controller (status 0). */
export type ClientErrorCode = "connection_failed" | "timeout" | "protocol_error";

/**
 * An error answer of the controller (`{"error":{"code","message","field"}}`) or a failure to
 * talk to it at all (then `status` is 0 and `code` is `connection_failed`, `timeout`: no answer
 * within a deadline, or `protocol_error`).
 */
export class StationError extends Error {
  /** The HTTP status, 0 when no answer came. */
  readonly status: number;
  /** `not_found`, `invalid_argument`, … (see docs/api.md "Errors"). */
  readonly code: ErrorCode | ClientErrorCode | (string & {});
  /** The request field at fault (`"timeoutMs"`, `"restart.policy"`), when one is. */
  readonly field: string | undefined;

  constructor(
    status: number,
    code: string,
    message: string,
    field?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "StationError";
    this.status = status;
    this.code = code;
    this.field = field;
  }
}

/**
 * A 409 with code `paused`: a command, terminal, file write or service start on a paused
 * workspace created without `autoResume`. Resume it (`resumeWorkspace`) and try again.
 */
export class PausedError extends StationError {
  constructor(message: string, field?: string, options?: { cause?: unknown }) {
    super(409, "paused", message, field, options);
    this.name = "PausedError";
  }
}

/** The error for an error answer: a PausedError for 409 `paused`, else a StationError. */
export function makeError(status: number, code: string, message: string, field?: string): StationError {
  if (status === 409 && code === "paused") return new PausedError(message, field);
  return new StationError(status, code, message, field);
}
