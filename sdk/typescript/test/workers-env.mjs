// The three workers test/integration/test-sdk-workers.sh starts (w1, w2, w3 on loopback):
//   STATION_TEST_W1_URL, …_TOKEN, …_SOCK   each worker's TCP listener, admin token, unix socket
//   STATION_TEST_WORKERS_FILE              a workers file naming them with per-worker token files
//   STATION_TEST_IDS                       (with w2 stopped) a workspace id on each of w1, w2, w3
export const NAMES = ["w1", "w2", "w3"];
export const W = Object.fromEntries(
  NAMES.map((n) => {
    const u = n.toUpperCase();
    return [n, { url: process.env[`STATION_TEST_${u}_URL`], token: process.env[`STATION_TEST_${u}_TOKEN`], sock: process.env[`STATION_TEST_${u}_SOCK`] }];
  }),
);
for (const n of NAMES) if (!W[n].url || !W[n].token || !W[n].sock) throw new Error(`STATION_TEST_${n.toUpperCase()}_URL/TOKEN/SOCK not set: run test/integration/test-sdk-workers.sh`);
export const WORKERS_FILE = process.env.STATION_TEST_WORKERS_FILE ?? "";
/** The explicit option: names, TCP URLs and each worker's token. */
export const OPTION = NAMES.map((name) => ({ name, url: W[name].url, token: W[name].token }));

/** Runs `fn` with the environment changed as `vars` says (undefined: unset), then restores it. */
export async function withEnv(vars, fn) {
  const saved = {};
  for (const [k, v] of Object.entries(vars)) {
    saved[k] = process.env[k];
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
