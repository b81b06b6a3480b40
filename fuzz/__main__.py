"""``python -m fuzz [HARNESS...]``: run each fuzz harness for a while.

Each harness runs in its own process for ``FUZZ_SECONDS`` seconds (default
60), under atheris when it is installed (else in the random-mutation mode),
with its corpus under ``var/fuzz/corpus/<harness>/``, seeded from the
regression captures and kept between runs. A crash, a broken invariant or
a hang stops that harness; the run goes on with the next, then exits 1,
naming each reproducer and the command that replays it.

Environment: ``FUZZ_SECONDS``, ``FUZZ_DIR`` (default ``var/fuzz``),
``FUZZ_MODE=random`` (no atheris even when installed), ``FUZZ_IGNORE``
(see ``fuzz._harness.ignoring_known``).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from fuzz import corpus

HARNESSES = ("fuzz_decoders", "fuzz_shoelog", "fuzz_commands", "fuzz_config", "fuzz_engine")
ROOT = Path(__file__).resolve().parent.parent

_STAT = re.compile(r"stat::(number_of_executed_units|average_exec_per_sec):\s*(\d+)")
_UNIT = re.compile(r"Test unit written to (\S+)")


def write_seeds(name: str, directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    seeds = corpus.SEEDS[name]()
    for data in seeds:
        path = directory / f"seed-{hashlib.sha1(data).hexdigest()}"
        if not path.exists():
            path.write_bytes(data)
    return len(seeds)


def run(name: str, seconds: int, work: Path) -> tuple[bool, dict[str, int], str | None]:
    corpus_dir = work / "corpus" / name
    artifacts = work / "artifacts" / name
    artifacts.mkdir(parents=True, exist_ok=True)
    write_seeds(name, corpus_dir)
    log_path = work / f"{name}.log"
    cmd = [
        sys.executable,
        "-m",
        f"fuzz.{name}",
        f"-max_total_time={seconds}",
        "-timeout=30",
        "-max_len=4096",
        "-print_final_stats=1",
        f"-artifact_prefix={artifacts}/",
        str(corpus_dir),
    ]
    with open(log_path, "w") as log:
        proc = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, check=False)
    text = log_path.read_text(errors="replace")
    stats = {k: int(v) for k, v in _STAT.findall(text)}
    units = _UNIT.findall(text)
    if proc.returncode != 0:
        tail = "\n".join(text.splitlines()[-40:])
        print(f"--- {name}: exit status {proc.returncode}; the end of {log_path}:\n{tail}\n---", flush=True)
        return False, stats, units[-1] if units else None
    return True, stats, None


def main(argv: list[str]) -> int:
    names = argv or list(HARNESSES)
    unknown = [n for n in names if n not in HARNESSES]
    if unknown:
        print(f"unknown harness {unknown[0]!r}; harnesses: {', '.join(HARNESSES)}", file=sys.stderr)
        return 2
    seconds = int(os.environ.get("FUZZ_SECONDS", "60"))
    work = Path(os.environ.get("FUZZ_DIR", ROOT / "var" / "fuzz")).resolve()
    try:
        import atheris  # noqa: F401
    except ImportError:
        mode = "random mutation (atheris is not installed)"
    else:
        mode = "random mutation (FUZZ_MODE=random)" if os.environ.get("FUZZ_MODE") == "random" else "atheris"
    print(f"fuzzing {len(names)} harness(es), {seconds} s each, {mode}; work directory {work}", flush=True)
    failed: list[tuple[str, str | None]] = []
    for name in names:
        start = time.monotonic()
        ok, stats, unit = run(name, seconds, work)
        took = time.monotonic() - start
        execs = stats.get("number_of_executed_units", 0)
        rate = stats.get("average_exec_per_sec", 0)
        verdict = "ok" if ok else "FAILED"
        print(f"{name:14} {verdict:6} {execs:>9} executions, {rate:>6} exec/s, {took:5.0f} s", flush=True)
        if not ok:
            failed.append((name, unit))
    for name, unit in failed:
        where = unit or f"(no reproducer written; see {work / (name + '.log')})"
        print(f"reproducer for {name}: {where}")
        if unit:
            print(f"  replay it: {sys.executable} -m fuzz.{name} {unit}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
