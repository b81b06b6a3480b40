"""``python -m benchmarks [NAME...]``: run every ``benchmarks/bench_*.py``
(or those whose name contains one of NAME) and print one table.

Each module offers ``run() -> list[dict]`` with keys ``name``, ``value``,
``unit``, optional ``target`` and ``note``. A benchmark that raises is
reported in the table and makes the exit status 1; the others still run.
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def discover(filters: list[str]) -> list[str]:
    here = Path(__file__).resolve().parent
    names = sorted(p.stem for p in here.glob("bench_*.py"))
    return [n for n in names if not filters or any(f in n for f in filters)]


def fmt(value: Any) -> str:
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)


def main(argv: list[str]) -> int:
    rows: list[dict[str, Any]] = []
    failed = False
    for name in discover(argv):
        t0 = time.perf_counter()
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            results = module.run()
        except Exception as exc:
            failed = True
            traceback.print_exc()
            rows.append({"name": name, "value": "FAILED", "unit": "", "note": f"{type(exc).__name__}: {exc}"})
            continue
        print(f"  {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        rows.extend(results)
    if not rows:
        print("no benchmarks matched", file=sys.stderr)
        return 1
    table = [("benchmark", "value", "unit", "target", "note")]
    table += [
        (
            str(r["name"]),
            fmt(r["value"]),
            str(r.get("unit", "")),
            str(r.get("target", "")),
            str(r.get("note", "")),
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for i, row in enumerate(table):
        cells = [
            row[0].ljust(widths[0]),
            row[1].rjust(widths[1]),
            row[2].ljust(widths[2]),
            row[3].ljust(widths[3]),
        ]
        print("  ".join(cells) + "  " + row[4])
        if i == 0:
            print("  ".join("-" * w for w in widths) + "  " + "-" * 4)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
