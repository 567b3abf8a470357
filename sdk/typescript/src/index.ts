// `import { … } from "station-sandbox"`: the client, both adapters and every API type.
export { HostSandboxAdapter } from "./host.js";
export type { HostSandboxAdapterOptions } from "./host.js";
export { ContainerSandboxAdapter } from "./container.js";
export type { ContainerSandboxAdapterOptions } from "./container.js";
export * from "./common.js";
