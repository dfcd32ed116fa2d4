"""Walk every CLI command through the bad-input table (tests/bad_inputs.py) and print, per command,
how the cases ended: one clear line (good), several lines, a traceback, or exit 0 (silent).

    .venv/bin/python experiments/bad_input_sweep.py [--show traceback,silent,multi-line] [--only fit,info]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from bad_inputs import cases, make_fixtures, run_case  # noqa: E402

KINDS = ("one-line", "multi-line", "traceback", "silent")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", default="traceback,silent,multi-line",
                        help="print the stderr of cases that ended this way (comma-separated kinds)")
    parser.add_argument("--only", default="", help="only these commands (comma-separated)")
    args = parser.parse_args()
    show = set(filter(None, args.show.split(",")))
    only = set(filter(None, args.only.split(",")))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fixtures = make_fixtures(root / "fixtures")
        counts: dict[str, Counter] = defaultdict(Counter)
        for i, case in enumerate(cases()):
            if only and case.command not in only:
                continue
            work = root / f"case{i}"
            work.mkdir()
            start = time.perf_counter()
            outcome = run_case(case, fixtures, work)
            counts[case.command][outcome.kind] += 1
            if outcome.kind in show:
                tail = "\n    ".join(outcome.stderr.strip().splitlines()[-4:])
                print(f"[{outcome.kind}] {case.id} ({time.perf_counter() - start:.1f} s)\n    {tail}")
    print(f"\n{'command':<10}" + "".join(f"{k:>12}" for k in KINDS) + f"{'total':>8}")
    total = Counter()
    for command, counter in counts.items():
        total.update(counter)
        print(f"{command:<10}" + "".join(f"{counter[k]:>12}" for k in KINDS) + f"{sum(counter.values()):>8}")
    print(f"{'all':<10}" + "".join(f"{total[k]:>12}" for k in KINDS) + f"{sum(total.values()):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
