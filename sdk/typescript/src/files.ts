// The adapters' `files`, `secrets` and `ports`: a workspace's files (read and written by its
// agent, inside the sandbox, as the sandbox's user), the secrets its git credential helper may
// ask for, and its ports' preview URLs. Every method takes the workspace id first, as the adapter's own methods do.

import type { Readable } from "node:stream";

import type { StationClient } from "./client.js";
import type {
  ByteRange,
  DeletedFile,
  DeletedSecret,
  ExposedPort,
  ExposePortOptions,
  FileEntry,
  FileEvent,
  FileList,
  PortList,
  Secret,
  SetSecretRequest,
  WriteFileOptions,
} from "./types.js";

/** What `read()` caps a file at unless told otherwise (the API's advice for SDKs). */
export const READ_MAX_BYTES = 64 * 1024 * 1024;

export interface WatchOptions {
  /** Subdirectories too. */
  recursive?: boolean;
  /** Closes the watch (the iterator then ends). */
  signal?: AbortSignal;
}

/**
 * Paths are absolute in the sandbox's view (`/home/node/workspace/a.txt` in a container) or
 * relative to the workspace directory. Failures are StationErrors naming the path: 400
 * `invalid_argument` (an invalid path, one escaping a host workspace, a FIFO or device), 403
 * `forbidden`, 404 `not_found`, 409 `conflict` (exists, not empty), 412 `precondition_failed`
 * (`ifMatch`), 413 `payload_too_large` (`maxBytes`), 416 `range_not_satisfiable`.
 */
export class WorkspaceFiles {
  constructor(private readonly client: StationClient) {}

  /** The entry (a final symlink is not followed). */
  stat(workspaceId: string, path: string): Promise<FileEntry> {
    return this.client.statFile(workspaceId, path);
  }

  /** A directory's entries, sorted by name; default the workspace directory. */
  list(workspaceId: string, path = "."): Promise<FileList> {
    return this.client.listFiles(workspaceId, path);
  }

  /** The file's bytes; refused (413) beyond `maxBytes`, 64 MiB unless given. */
  async read(workspaceId: string, path: string, options: { maxBytes?: number; range?: ByteRange } = {}): Promise<Buffer> {
    const { data } = await this.client.readFile(workspaceId, path, { maxBytes: READ_MAX_BYTES, ...options });
    return data;
  }

  /** The file as UTF-8 text (a TypeError when it is not valid UTF-8). */
  async readText(workspaceId: string, path: string, options: { maxBytes?: number } = {}): Promise<string> {
    const data = await this.read(workspaceId, path, options);
    return new TextDecoder("utf-8", { fatal: true }).decode(data);
  }

  /** Replaces or creates the file atomically (readers see the old or the new content). */
  write(workspaceId: string, path: string, data: string | Uint8Array, options: WriteFileOptions = {}): Promise<FileEntry> {
    return this.client.writeFile(workspaceId, path, data, options);
  }

  /**
   * Streams `source` (a node Readable, a web ReadableStream, any async iterable of chunks) into
   * the file, never held whole; atomic as `write`. Give `size` to send a Content-Length.
   */
  upload(
    workspaceId: string,
    path: string,
    source: AsyncIterable<Uint8Array | string>,
    options: WriteFileOptions & { size?: number; signal?: AbortSignal } = {},
  ): Promise<FileEntry> {
    return this.client.writeFile(workspaceId, path, source, options);
  }

  /** The file's bytes as a stream (`pipeline(stream, createWriteStream(…))`). */
  download(workspaceId: string, path: string, options: { range?: ByteRange; maxBytes?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    return this.client.downloadFile(workspaceId, path, options);
  }

  mkdir(workspaceId: string, path: string, options: { parents?: boolean; mode?: string | number } = {}): Promise<FileEntry> {
    return this.client.makeDirectory(workspaceId, path, options);
  }

  /** Replaces `to` unless `overwrite: false` (then 409 when it exists); resolves with the entry at `to`. */
  rename(workspaceId: string, from: string, to: string, options: { overwrite?: boolean } = {}): Promise<FileEntry> {
    return this.client.renameFile(workspaceId, from, to, options);
  }

  /** A symlink is removed, never followed; a non-empty directory needs `recursive`. */
  remove(workspaceId: string, path: string, options: { recursive?: boolean } = {}): Promise<DeletedFile> {
    return this.client.deleteFile(workspaceId, path, options);
  }

  /**
   * `for await (const e of sandboxes.files.watch(id, "src", { recursive: true }))`: `ready`
   * first, then changes. `overflow` means events were lost: list again.
   */
  watch(workspaceId: string, path = ".", options: WatchOptions = {}): AsyncGenerator<FileEvent, void, undefined> {
    return this.client.watchFiles(workspaceId, path, options);
  }
}

/** Values go in and never come back out. */
export class WorkspaceSecrets {
  constructor(private readonly client: StationClient) {}

  /** Stores or replaces `name`: `{value, host?, username?, expiresAt?}`. */
  set(workspaceId: string, name: string, request: SetSecretRequest): Promise<Secret> {
    return this.client.setSecret(workspaceId, name, request);
  }

  /** Names, hosts, usernames and times; never values. */
  list(workspaceId: string): Promise<Secret[]> {
    return this.client.secrets(workspaceId);
  }

  get(workspaceId: string, name: string): Promise<Secret> {
    return this.client.secret(workspaceId, name);
  }

  /** Revoked at once. */
  delete(workspaceId: string, name: string): Promise<DeletedSecret> {
    return this.client.deleteSecret(workspaceId, name);
  }
}

/**
 * Previews: a port inside a workspace given a URL of its own (docs/api.md, "Previews"). Needs a
 * controller with `--preview-listen` and a workspace with its own network (a container).
 */
export class WorkspacePorts {
  constructor(private readonly client: StationClient) {}

  /** `{url, host, token, openUrl, expiresAt, …}`; the token only in this answer. */
  expose(workspaceId: string, port: number, options: ExposePortOptions = {}): Promise<ExposedPort> {
    return this.client.exposePort(workspaceId, port, options);
  }

  /** `{exposed, listening}`. */
  list(workspaceId: string): Promise<PortList> {
    return this.client.ports(workspaceId);
  }

  /** Its URL answers 404 from now on. */
  revoke(workspaceId: string, port: number): Promise<void> {
    return this.client.revokePort(workspaceId, port);
  }
}
