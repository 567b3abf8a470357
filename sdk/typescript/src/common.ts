// What every entry point exports besides its adapter.
export { StationClient } from "./client.js";
export { CodeContext, Contexts, decodeExecution } from "./contexts.js";
export type { CellResult, ExecuteOptions, Execution } from "./contexts.js";
export type {
  AttachHandlers,
  ConnectionOptions,
  CreateOptions,
  CreateWorkspaceOptions,
  OutputHandlers,
  TerminalSession,
  WorkspaceList,
  SnapshotList,
} from "./client.js";
export { PausedError, StationError } from "./errors.js";
export { WorkerUnavailableError, workerOfId, snapshotWorkerOf, mostFree, placeWorker, skipReason, parseWorkersEnv, readWorkersFile } from "./workers.js";
export type { UnreachableWorker, WorkerCapacity, WorkerConfig, WorkerState, WorkersOption } from "./workers.js";
export { WorkspaceFiles, WorkspacePorts, WorkspaceSecrets, READ_MAX_BYTES } from "./files.js";
export type { WatchOptions } from "./files.js";
export type { ClientErrorCode } from "./errors.js";
export { SandboxAdapter, decodeOutput, isTerminal } from "./adapter.js";
export type {
  AdapterOptions,
  BinaryOutput,
  ExecOptions,
  FollowOptions,
  SandboxAttempt,
  SandboxRun,
  SandboxService,
  TextOutput,
  WorkspaceOptions,
} from "./adapter.js";
export type * from "./types.js";
