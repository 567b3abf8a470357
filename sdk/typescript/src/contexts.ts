// Code contexts (docs/api.md, "Code contexts"): a stateful interpreter (a Jupyter kernel) in a
// workspace, what one cell defines the next sees. `client.contexts(workspaceId)` hands out
// `Contexts`; `create("python")` a `CodeContext`, whose `execute(code, {onStdout})` resolves
// with the ended cell, its images as bytes.

import type { StationClient } from "./client.js";
import type { ContextInfo, ContextLanguage, ExecutionInfo, ExecutionStatus, CellErrorInfo } from "./types.js";

/** One display or execute result of a cell. */
export interface CellResult {
  type: "execute_result" | "display_data" | string;
  /** The MIME bundle as sent (binary types base64). */
  data: Record<string, unknown>;
  truncated: boolean;
  /** `text/plain`, or null. */
  text: string | null;
  /** `text/html` (untrusted: the cell made it), or null. */
  html: string | null;
  /** `image/png`'s decoded bytes, or null. */
  png: Uint8Array | null;
}

/** An ended (or running) cell with its results decoded. */
export interface Execution {
  id: string;
  contextId: string;
  runId: string | null;
  status: ExecutionStatus;
  executionCount: number | null;
  /** The kept output as text (head; `stdoutTail` the tail when longer than kept). */
  stdout: string;
  stderr: string;
  stdoutTail: string | null;
  stderrTail: string | null;
  stdoutBytes: number;
  stderrBytes: number;
  truncated: boolean;
  results: CellResult[];
  error: CellErrorInfo | null;
  /** The `text/plain` of the last execute result (the cell's value), or null. */
  text: string | null;
  /** The PNG bytes of every result that has one, in order. */
  images: Uint8Array[];
  durationMs: number | null;
  raw: ExecutionInfo;
}

export interface ExecuteOptions {
  /** The cell's stdout as it comes. */
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  /** The cell is interrupted after this (status `timed_out`); the server's default otherwise. */
  timeoutMs?: number;
}

function part(enc: string | undefined, v: string | null | undefined): string | null {
  if (v === undefined || v === null) return null;
  return enc === "base64" ? Buffer.from(v, "base64").toString("utf8") : v;
}

/** The API's execution with its output decoded and its images as bytes. */
export function decodeExecution(raw: ExecutionInfo): Execution {
  const results = (raw.results ?? []).map((r): CellResult => {
    const data = r.data ?? {};
    const png = data["image/png"];
    const text = data["text/plain"];
    const html = data["text/html"];
    return {
      type: r.type,
      data,
      truncated: r.truncated === true,
      text: typeof text === "string" ? text : null,
      html: typeof html === "string" ? html : null,
      png: typeof png === "string" ? new Uint8Array(Buffer.from(png, "base64")) : null,
    };
  });
  const last = [...results].reverse().find((r) => r.type === "execute_result");
  return {
    id: raw.id,
    contextId: raw.contextId,
    runId: raw.runId ?? null,
    status: raw.status,
    executionCount: raw.executionCount ?? null,
    stdout: part(raw.encoding, raw.stdout) ?? "",
    stderr: part(raw.encoding, raw.stderr) ?? "",
    stdoutTail: part(raw.encoding, raw.stdoutTail),
    stderrTail: part(raw.encoding, raw.stderrTail),
    stdoutBytes: raw.stdoutBytes ?? 0,
    stderrBytes: raw.stderrBytes ?? 0,
    truncated: raw.truncated === true,
    results,
    error: raw.error ?? null,
    text: last?.text ?? null,
    images: results.flatMap((r) => (r.png ? [r.png] : [])),
    durationMs: raw.durationMs ?? null,
    raw,
  };
}

/** One context: attributes as last fetched (`refresh()`). */
export class CodeContext {
  info: ContextInfo;

  constructor(
    private readonly client: StationClient,
    readonly workspaceId: string,
    info: ContextInfo,
  ) {
    this.info = info;
  }

  get id(): string {
    return this.info.id;
  }
  get language(): ContextLanguage {
    return this.info.language;
  }
  get state(): ContextInfo["state"] {
    return this.info.state;
  }

  async refresh(): Promise<this> {
    this.info = await this.client.context(this.workspaceId, this.id);
    return this;
  }

  /**
   * Runs a cell and resolves with it ended: check `status` (`ok`, `error`, `timed_out`,
   * `interrupted`); a cell that raised resolves, with `error`. 409 `busy` while another cell runs.
   */
  async execute(code: string, options: ExecuteOptions = {}): Promise<Execution> {
    const live = options.onStdout !== undefined || options.onStderr !== undefined;
    const request = { code, ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}) };
    let e = await this.client.executeCell(this.workspaceId, this.id, request, live ? {} : { waitMs: 60_000 });
    if (live) {
      const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
      await this.client.followExecution(this.workspaceId, this.id, e.id, {
        onOutput: (c) => {
          const text = decoders[c.stream].decode(c.data, { stream: true });
          if (text) (c.stream === "stdout" ? options.onStdout : options.onStderr)?.(text);
        },
      });
    }
    while (e.status === "running") e = await this.client.execution(this.workspaceId, this.id, e.id, { waitMs: 60_000 });
    return decodeExecution(e);
  }

  /** Interrupts the running cell; resolves with it ended (`interrupted`). 409 when none runs. */
  async interrupt(): Promise<Execution> {
    return decodeExecution(await this.client.interruptContext(this.workspaceId, this.id));
  }

  /** A fresh interpreter: the variables are gone. */
  async restart(): Promise<this> {
    this.info = await this.client.restartContext(this.workspaceId, this.id);
    return this;
  }

  async delete(): Promise<void> {
    await this.client.deleteContext(this.workspaceId, this.id);
  }

  /** The context's executions, newest first. */
  async executions(): Promise<Execution[]> {
    return (await this.client.executions(this.workspaceId, this.id)).map(decodeExecution);
  }
}

/** A workspace's contexts. */
export class Contexts {
  constructor(
    private readonly client: StationClient,
    readonly workspaceId: string,
  ) {}

  /** A new context once its interpreter answers (422 `kernel_missing` names the package). */
  async create(language: ContextLanguage = "python", options: { cwd?: string; env?: Record<string, string> } = {}): Promise<CodeContext> {
    return new CodeContext(this.client, this.workspaceId, await this.client.createContext(this.workspaceId, { language, ...options }));
  }

  async get(contextId: string): Promise<CodeContext> {
    return new CodeContext(this.client, this.workspaceId, await this.client.context(this.workspaceId, contextId));
  }

  async list(): Promise<CodeContext[]> {
    return (await this.client.listContexts(this.workspaceId)).map((c) => new CodeContext(this.client, this.workspaceId, c));
  }
}
