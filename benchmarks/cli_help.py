# SPDX-License-Identifier: Apache-2.0
"""
CLI start-up: wall time of `haystack-agentic [COMMAND] --help` for every command, in a fresh interpreter each time.

Each command runs `--repeat` times (default 5) as `python -m haystack_agentic.cli.main ... --help` with this
checkout first on `PYTHONPATH`; the figures are the median and the slowest run, in seconds. The target is < 1.5 s
for every command (issue 13). The first run of all may be slower (a cold page cache); it is counted like the others.

Run: `python benchmarks/cli_help.py [--repeat 5]`
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = [[], ["index"], ["ask"], ["serve"]]
TARGET_SECONDS = 1.5


def time_help(command: list[str], repeat: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    seconds = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "haystack_agentic.cli.main", *command, "--help"],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="Runs per command (default 5).")
    args = parser.parse_args()
    print(f"{'command':<32} {'median s':>9} {'max s':>7}  target < {TARGET_SECONDS} s")
    slow = 0
    for command in COMMANDS:
        seconds = time_help(command, args.repeat)
        label = " ".join(["haystack-agentic", *command, "--help"])
        ok = max(seconds) < TARGET_SECONDS
        slow += not ok
        print(f"{label:<32} {statistics.median(seconds):>9.2f} {max(seconds):>7.2f}  {'ok' if ok else 'SLOW'}")
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
