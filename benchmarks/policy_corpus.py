"""Load every ``volcano-scheduler.conf`` in a directory and say which ones Caldera takes.

A drop-in replacement must load the policies clusters already run. Point this at a directory of
bare policy files (one per ``*.yaml``/``*.conf``) and it prints, per file, whether it loads,
with how many warnings (keys nothing reads, plugins Caldera does not have), or the one error
that refuses it; then the totals. ``--strict`` loads as ``caldera run --strict-policy`` does.

    python benchmarks/policy_corpus.py ../shared/real-configs
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from caldera.errors import ConfigError
from caldera.framework.policy import load_policy_file
from caldera.framework.registry import Registry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--strict", action="store_true", help="refuse what Volcano ignores")
    parser.add_argument("--warnings", action="store_true", help="print each warning")
    args = parser.parse_args()
    registry = Registry.from_entry_points()
    files = sorted(p for p in args.directory.iterdir() if p.suffix in (".yaml", ".conf"))
    loaded = warned = 0
    for path in files:
        try:
            policy = load_policy_file(path, registry, strict=args.strict)
        except ConfigError as exc:
            print(f"refused  {path.name}: {str(exc).removeprefix(f'{path}: ')}")
            continue
        loaded += 1
        warned += bool(policy.warnings)
        print(
            f"loaded   {path.name}"
            + (f" ({len(policy.warnings)} warnings)" * bool(policy.warnings))
        )
        if args.warnings:
            for warning in policy.warnings:
                print(f"         {str(warning).removeprefix(f'{path}: ')}")
    print(f"{loaded} of {len(files)} loaded ({warned} with warnings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
