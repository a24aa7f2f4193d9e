"""Derive the deliberately corrupted traces in corrupt/ from the real two-rank capture (deterministic).

    python tests/data/logs/corrupt.py

- truncated.log        rank 0, cut in the middle of its last graph-break payload (no final newline),
                       as when a job is killed while writing
- garbage.log          rank 0 with binary junk, a record with broken JSON, payload lines without a
                       record, and one graph-break payload edited after writing (checksum mismatch)
- unknown_events.log   rank 0 with three records of an event kind no torch writes (a newer torch)
- interleaved_ranks.log.gz  ranks 0 and 1 merged record by record into one file (each record keeps
                       its "rank" key), as when several ranks share one log stream
"""

from __future__ import annotations

import glob
import gzip
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "two_rank_trace")
OUT = os.path.join(HERE, "corrupt")


def records(path: str) -> list[list[str]]:
    """A trace file as records: the header line plus its tab-prefixed payload lines."""
    out: list[list[str]] = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("\t") and out:
                out[-1].append(line)
            else:
                out.append([line])
    return out


def write(name: str, recs: list[list[str]], tail: str = "") -> None:
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as fh:
        for rec in recs:
            fh.writelines(rec)
        fh.write(tail)


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for old in os.listdir(OUT):
        os.remove(os.path.join(OUT, old))
    rank0 = records(glob.glob(os.path.join(SOURCE, "*rank_0_*.log"))[0])
    rank1 = records(glob.glob(os.path.join(SOURCE, "*rank_1_*.log"))[0])
    breaks = [i for i, r in enumerate(rank0) if '"dynamo_graph_break_reason"' in r[0]]

    # truncated: everything before the last break record, then half of it, cut mid-line
    last = breaks[-1]
    head = rank0[last][: max(2, len(rank0[last]) // 2)]
    cut = head[-1][: len(head[-1]) // 2]
    write("truncated.log", rank0[:last] + [head[:-1]], tail=cut)

    # garbage: junk bytes, broken JSON, orphan payload lines, an edited payload
    rng = random.Random(7)
    junk = bytes(rng.randrange(256) for _ in range(120)).decode("latin-1").replace("\n", " ").replace("\t", " ") + "\n"
    prefix = rank0[1][0].split("] ", 1)[0] + "] "
    bad_json = [prefix + '{"compilation_metrics": {"co_name": "forward", "compile_id": \n']
    orphan = ["this line is not a torch record\n", "\tpayload line 1 without a record\n", "\tpayload line 2\n"]
    edited = [list(r) for r in rank0]
    first = edited[breaks[0]]
    first[1] = first[1].replace("Graph break", "Graph brake", 1)
    mixed = edited[:5] + [[junk], bad_json, orphan] + edited[5:]
    write("garbage.log", mixed)

    # unknown event kinds
    unknown = [
        [prefix + f'{{"dynamo_future_event": {{"detail": {i}}}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}}\n'] for i in range(3)
    ]
    write("unknown_events.log", rank0[:3] + unknown + rank0[3:])

    # two ranks interleaved record by record
    merged: list[list[str]] = []
    for i in range(max(len(rank0), len(rank1))):
        merged.extend(r[i] for r in (rank0, rank1) if i < len(r))
    with gzip.open(os.path.join(OUT, "interleaved_ranks.log.gz"), "wt", encoding="utf-8") as fh:
        for rec in merged:
            fh.writelines(rec)
    print(f"wrote {len(os.listdir(OUT))} files to {OUT}")


if __name__ == "__main__":
    main()
