// Where the controller under test is: the variables test/integration/test-sdk-typescript.sh sets.
//   STATION_SOCKET      its unix socket (required)
//   STATION_URL         a TCP listener (tests over TCP skip without it)
//   STATION_TOKEN       the admin token of that listener
//   STATION_TEST_IMAGE_LAYOUT  an OCI layout of the busybox test image (container tests skip without it)
//   STATION_TEST_DEFAULT_IMAGE the worker's --default-image: that image, as name@sha256:…
//   STATION_TEST_SECCOMP       the seccomp profile for container workspaces
//   STATION_PREVIEW            the controller's preview listener, HOST:PORT (preview tests skip without it)
import { dirname } from "node:path";

export const SOCKET = process.env.STATION_SOCKET ?? "";
export const URL = process.env.STATION_URL ?? "";
export const TOKEN = process.env.STATION_TOKEN ?? "";
export const IMAGE_LAYOUT = process.env.STATION_TEST_IMAGE_LAYOUT ?? "";
export const DEFAULT_IMAGE = process.env.STATION_TEST_DEFAULT_IMAGE ?? "";
export const SECCOMP = process.env.STATION_TEST_SECCOMP ?? "";
export const PREVIEW = process.env.STATION_PREVIEW ?? "";
export const ROOT = SOCKET ? dirname(SOCKET) : "";

if (!SOCKET) throw new Error("STATION_SOCKET is not set: run test/integration/test-sdk-typescript.sh");

/** Polls `fn` every 50 ms until it returns a truthy value; throws after `ms`. */
export async function until(what, fn, ms = 10_000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
