"""The whole app's resident memory over a big rollout folder: `python app.py` as a Space runs it, this checkout and
another side by side.

    python bench/app_memory_bench.py --folder <index folder> --baseline <checkout> [--rounds 2]

Each round starts each checkout's app in turn (ROLLOUT_DIR=<folder>, no upstream source, the embedded berth
server), waits for it to answer, asks its API what a visitor's Browse asks (the first page, a filter, a search, the
leaderboard), waits `--settle` seconds (background work: the store's index check, the index copy), and reads the
process's peak resident memory (VmHWM) and its memory then (VmRSS). A folder of index files only, as
`bench/million_bench.py` or `testkit/index_rows.py` writes it, is enough: Browse reads index rows, not records.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from workers import ms

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def memory(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmHWM:", "VmRSS:")):
            fields[line.split(":")[0]] = int(line.split()[1]) / 1024
    return fields


def one_app(checkout: Path, folder: Path, settle: float, timeout: float = 120.0) -> dict:
    from gradio_client import Client

    port = free_port()
    env = {**os.environ, "ROLLOUT_DIR": str(folder), "PUBLIC_ROLLOUTS": "", "GRADIO_SERVER_PORT": str(port),
           "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    app = subprocess.Popen([sys.executable, "app.py"], cwd=checkout, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        while True:
            try:
                client = Client(url, verbose=False)
                break
            except Exception:  # not up yet
                if time.perf_counter() - started > timeout or app.poll() is not None:
                    return {"failed": "the app did not answer"}
                time.sleep(0.5)
        out = {"up": time.perf_counter() - started, "at_start": memory(app.pid)}
        asked = time.perf_counter()
        first = client.predict(api_name="/browse_rollouts")
        out["first_page"] = time.perf_counter() - asked
        client.predict(tier="storm", sort="reward", api_name="/browse_rollouts")
        client.predict(q="sonnet", api_name="/browse_rollouts")
        client.predict(api_name="/browse_leaderboard")
        time.sleep(settle)
        out.update(rows=first["total"], end=memory(app.pid))
        return out
    finally:
        app.terminate()
        app.wait(30)


def line(name: str, r: dict) -> str:
    if "failed" in r:
        return f"| {name} | {r['failed']} | | | |"
    return (f"| {name} | {r['rows']:,} | {r['up']:.1f} s | {ms(r['first_page'])} | {r['at_start']['VmRSS']:,.0f} MB | "
            f"**{r['end']['VmHWM']:,.0f} MB** | {r['end']['VmRSS']:,.0f} MB |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--baseline", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--settle", type=float, default=25.0)
    args = parser.parse_args()
    print("| app | rows | answering after | first page (API) | RSS when answering | peak RSS | RSS at end |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for _ in range(args.rounds):
        for name, checkout in ((f"before ({args.baseline.name})", args.baseline), ("this checkout", ROOT)):
            print(line(name, one_app(checkout.resolve(), args.folder.resolve(), args.settle)), flush=True)
    print(f"- machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
