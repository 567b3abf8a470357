"""The three workers test/integration/test-sdk-workers.sh starts (w1, w2, w3 on loopback):
``STATION_TEST_W1_URL``, ``..._TOKEN``, ``..._SOCK`` per worker; ``STATION_TEST_WORKERS_FILE``
(a workers file with per-worker token files); ``STATION_TEST_IDS`` (with w2 stopped: a
workspace id on each of w1, w2, w3). These files are run by that script only (their names do
not match test_*.py)."""

from __future__ import annotations

import os

NAMES = ["w1", "w2", "w3"]
W = {n: {"url": os.environ.get(f"STATION_TEST_{n.upper()}_URL", ""),
         "token": os.environ.get(f"STATION_TEST_{n.upper()}_TOKEN", ""),
         "sock": os.environ.get(f"STATION_TEST_{n.upper()}_SOCK", "")} for n in NAMES}
for _n in NAMES:
    if not all(W[_n].values()):
        raise RuntimeError(f"STATION_TEST_{_n.upper()}_URL/TOKEN/SOCK not set: run test/integration/test-sdk-workers.sh")
WORKERS_FILE = os.environ.get("STATION_TEST_WORKERS_FILE", "")
OPTION = [{"name": n, "url": W[n]["url"], "token": W[n]["token"]} for n in NAMES]
