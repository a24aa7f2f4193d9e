"""Whether the advice holds across torch releases: the suggestion rules each zoo fixture gets, on two torches.

The advice is keyed to what a break or a recompile is (registry ids, gb_types, guard kinds), not to one
release's wording. Run once per interpreter to write what each fixture gets (the analysis without the fix
phase or explain: rules only), then compare the two files:

    .venv/bin/python benchmarks/advice_across_torch.py dump /tmp/rules-2.13.json
    .venv-compat-2.15.0/bin/python benchmarks/advice_across_torch.py dump /tmp/rules-2.15.json
    python3 benchmarks/advice_across_torch.py compare /tmp/rules-2.13.json /tmp/rules-2.15.json

`compare` prints each fixture whose rules differ, and the count of those that agree (a fixture that does
not import on one side, the transformers ones in the compat venv, is listed as skipped).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings


def dump(path: str) -> None:
    import torch

    from ctc_doctor import AnalyzeOptions, analyze
    from ctc_doctor.fixtures.registry import all_fixtures

    warnings.filterwarnings("ignore")
    out: dict[str, object] = {"torch": torch.__version__}
    rules: dict[str, object] = {}
    for name, spec in sorted(all_fixtures().items()):
        try:
            torch.manual_seed(0)
            report = analyze(spec.builder()(), AnalyzeOptions(spec=spec.target, explain=False))
            rules[name] = sorted({s.rule for s in report.suggestions})
        except ImportError as exc:
            rules[name] = f"skipped: {exc}"
    out["rules"] = rules
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=1)
    print(f"torch {torch.__version__}: {len(rules)} fixtures -> {path}")


def compare(a_path: str, b_path: str) -> int:
    with open(a_path, encoding="utf-8") as fh:
        a = json.load(fh)
    with open(b_path, encoding="utf-8") as fh:
        b = json.load(fh)
    same = differ = skipped = 0
    for name in sorted(set(a["rules"]) | set(b["rules"])):
        ra, rb = a["rules"].get(name), b["rules"].get(name)
        if not isinstance(ra, list) or not isinstance(rb, list):
            skipped += 1
            continue
        if ra == rb:
            same += 1
            continue
        differ += 1
        print(f"{name}:\n  torch {a['torch']}: {', '.join(ra)}\n  torch {b['torch']}: {', '.join(rb)}")
    print(f"torch {a['torch']} vs {b['torch']}: {same} fixtures get the same rules, {differ} differ, {skipped} skipped")
    return 1 if differ else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("dump").add_argument("path")
    cmp = sub.add_parser("compare")
    cmp.add_argument("a")
    cmp.add_argument("b")
    args = parser.parse_args()
    if args.command == "dump":
        dump(args.path)
    else:
        sys.exit(compare(args.a, args.b))


if __name__ == "__main__":
    main()
