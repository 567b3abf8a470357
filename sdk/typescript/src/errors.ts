import type { ErrorCode } from "./types.js";

/** Codes the SDK itself uses when no answer came from the controller (status 0). */
export type ClientErrorCode = "connection_failed" | "protocol_error";

/**
 * An error answer of the controller (`{"error":{"code","message","field"}}`) or a failure to
 * talk to it at all (then `status` is 0 and `code` is `connection_failed` or `protocol_error`).
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
