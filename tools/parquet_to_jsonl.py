#!/usr/bin/env python3
"""tools/parquet_to_jsonl.py: converts a verl / DAPO-Math-17k parquet file to the JSONL schema dapo reads
(docs/design.md §6): one compact JSON object per line with data_source, prompt [{role, content}], ability,
reward_model {ground_truth, style}, extra_info. Non-ASCII is written as raw UTF-8.

    pip install pyarrow
    python3 tools/parquet_to_jsonl.py dapo-math-17k.parquet data/dapo-math-17k.jsonl [--dedupe]

--dedupe drops rows whose prompt and ground truth repeat an earlier row (DAPO-Math-17k ships every problem many
times; the DAPO AIME eval file repeats each problem 32 times). pandas index columns are dropped.
"""
import argparse
import json
import sys


def plain(v):
    """numpy / pyarrow values -> JSON-able Python values."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("parquet")
    ap.add_argument("jsonl")
    ap.add_argument("--dedupe", action="store_true")
    a = ap.parse_args()
    try:
        import pyarrow.parquet as pq
    except ImportError:
        sys.exit("pyarrow is needed: pip install pyarrow")
    table = pq.read_table(a.parquet)
    seen, kept, dropped = set(), 0, 0
    with open(a.jsonl, "w", encoding="utf-8") as out:
        for row in table.to_pylist():
            row = {k: plain(v) for k, v in row.items() if not k.startswith("__index_level")}
            for need in ("prompt", "reward_model"):
                if need not in row:
                    sys.exit(f"{a.parquet}: column '{need}' is missing (have: {', '.join(table.column_names)})")
            if a.dedupe:
                key = json.dumps([row["prompt"], row["reward_model"].get("ground_truth")], sort_keys=True)
                if key in seen:
                    dropped += 1
                    continue
                seen.add(key)
            out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n")
            kept += 1
    print(f"{a.jsonl}: {kept} rows written, {dropped} duplicates dropped", file=sys.stderr)


if __name__ == "__main__":
    main()
