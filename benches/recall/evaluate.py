#!/usr/bin/env python3
"""Evidence recall of `ctxgate context select` on a set made by generate.py.

For each budget, runs ctxgate three ways over DATADIR/history.jsonl and DATADIR/queries.jsonl:

  ctxgate       the default configuration (the full engine)
  recency-only  the newest messages that fit the budget (no selection, no archive recall)
  bm25-only     plain full-text ranking filling the budget (no lookback window, no
                neighbours, no snippets)

and prints mean evidence recall (the fraction of a query's evidence ids in `selected`,
averaged over queries), the share of queries with all their evidence, median elapsed_us,
and recall per category. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_BIN = REPO / "target" / "release" / "ctxgate"
CATEGORIES = ["single", "update", "multi", "temporal"]

# Everything not set here is ctxgate's built-in default. An explicit file is passed even for
# the full engine so that no config/ctxgate.toml in the working directory is picked up.
SYSTEMS = {
    "ctxgate": "# the full engine: built-in defaults\n[conversation]\n",
    "recency-only": (
        "# the newest messages that fit the budget\n"
        "[conversation]\n"
        "lookback_count = 100000\n"
        "use_selection = false\n"
        "archive_recall = false\n"
    ),
    "bm25-only": (
        "# plain full-text ranking filling the budget\n"
        "[conversation]\n"
        "lookback_count = 0\n"
        "archive_recall = true\n"
        "archive_neighbours = 0\n"
        "archive_snippet_tokens = 0\n"
    ),
}


def load_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def run(binary: Path, config: Path, data: Path, budget: int, workdir: Path) -> tuple[list[dict], str]:
    cmd = [
        str(binary), "--config", str(config), "context", "select",
        "--history", str(data / "history.jsonl"),
        "--queries", str(data / "queries.jsonl"),
        "--budget-tokens", str(budget),
    ]
    # CTXGATE__SECTION__KEY variables would override the config files.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXGATE")}
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"ctxgate failed (exit {proc.returncode}): {' '.join(cmd)}\n{proc.stderr}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], proc.stderr


def score(rows: list[dict], evidence: dict, categories: dict, history_ids: set, budget: int):
    by_query = {str(r["query"]): r for r in rows}
    recalls: dict[str, float] = {}
    problems: list[str] = []
    missing = [q for q in evidence if q not in by_query]
    if missing:
        problems.append(f"{len(missing)} queries without an output line (e.g. {missing[0]})")
    empty = over = unknown = dup = bad_sum = 0
    for qid, ev in evidence.items():
        r = by_query.get(qid)
        if r is None:
            recalls[qid] = 0.0
            continue
        ids = [str(s["id"]) for s in r["selected"]]
        empty += not ids
        over += r["tokens"] > budget
        unknown += any(i not in history_ids for i in ids)
        dup += len(ids) != len(set(ids))
        bad_sum += sum(s["tokens"] for s in r["selected"]) != r["tokens"]
        got = set(ids)
        recalls[qid] = sum(e in got for e in ev) / len(ev)
    for n, what in ((empty, "empty selections"), (over, "selections over the budget"),
                    (unknown, "selections with ids not in the history"),
                    (dup, "selections with duplicate ids"),
                    (bad_sum, "lines whose tokens differ from the sum of selected tokens")):
        if n:
            problems.append(f"{n} {what}")
    per_cat = {}
    for c in CATEGORIES:
        vals = [v for q, v in recalls.items() if categories.get(q) == c]
        per_cat[c] = (statistics.fmean(vals), len(vals)) if vals else (float("nan"), 0)
    elapsed = [r["elapsed_us"] for r in rows]
    tokens = [r["tokens"] for r in rows]
    reasons: dict[str, int] = {}
    for r in rows:
        for s in r["selected"]:
            reasons[s["reason"]] = reasons.get(s["reason"], 0) + 1
    return {
        "recall": statistics.fmean(recalls.values()),
        "complete": statistics.fmean(v == 1.0 for v in recalls.values()),
        "per_category": per_cat,
        "median_us": statistics.median(elapsed) if elapsed else 0,
        "mean_tokens": statistics.fmean(tokens) if tokens else 0,
        "reasons": reasons,
        "problems": problems,
        "recalls": recalls,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("datadir", type=Path)
    ap.add_argument("--bin", type=Path, default=DEFAULT_BIN, help=f"ctxgate binary (default {DEFAULT_BIN})")
    ap.add_argument("--budgets", default="1000,2000,4000", help="comma-separated token budgets")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated subset of " + ", ".join(SYSTEMS))
    ap.add_argument("--json", type=Path, help="also write the results (with per-query recall) here")
    ap.add_argument("--raw", type=Path, help="keep ctxgate's raw output lines in this directory")
    args = ap.parse_args()

    binary = args.bin.resolve()
    if not binary.exists():
        sys.exit(f"no binary at {binary}; build it with: cd {REPO} && cargo build --release --bin ctxgate")
    data = args.datadir.resolve()
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    for s in systems:
        if s not in SYSTEMS:
            sys.exit(f"unknown system {s!r}; known: {', '.join(SYSTEMS)}")
    with open(data / "evidence.json", encoding="utf-8") as fh:
        evidence = {k: list(v) for k, v in json.load(fh).items()}
    cat_path = data / "categories.json"
    categories = json.loads(cat_path.read_text(encoding="utf-8")) if cat_path.exists() else {}
    queries = load_jsonl(data / "queries.jsonl")
    history_ids = {str(m["id"]) for m in load_jsonl(data / "history.jsonl")}
    missing_ev = [q["id"] for q in queries if q["id"] not in evidence]
    if missing_ev:
        sys.exit(f"{len(missing_ev)} queries have no evidence entry (e.g. {missing_ev[0]})")
    evidence = {q["id"]: evidence[q["id"]] for q in queries}
    bad = [e for ev in evidence.values() for e in ev if e not in history_ids]
    if bad:
        sys.exit(f"{len(bad)} evidence ids are not in the history (e.g. {bad[0]})")
    if args.raw:
        args.raw.mkdir(parents=True, exist_ok=True)

    results: dict[tuple[str, int], dict] = {}
    with tempfile.TemporaryDirectory(prefix="ctxgate-recall-") as tmp:
        tmpdir = Path(tmp)
        configs = {}
        for name in systems:
            configs[name] = tmpdir / f"{name}.toml"
            configs[name].write_text(SYSTEMS[name], encoding="utf-8")
        for budget in budgets:
            for name in systems:
                print(f"running {name} at {budget} tokens…", file=sys.stderr)
                rows, _stderr = run(binary, configs[name], data, budget, tmpdir)
                if args.raw:
                    with open(args.raw / f"{name}-{budget}.jsonl", "w", encoding="utf-8") as fh:
                        for r in rows:
                            fh.write(json.dumps(r) + "\n")
                results[(name, budget)] = score(rows, evidence, categories, history_ids, budget)

    n_cat = {c: sum(1 for q in evidence if categories.get(q) == c) for c in CATEGORIES}
    print(f"{len(evidence)} queries ({', '.join(f'{c} {n_cat[c]}' for c in CATEGORIES)}), "
          f"{len(history_ids)} history messages, data {data}")
    print()
    print("Mean evidence recall (complete = share of queries with all their evidence selected)")
    print(f"{'budget':>6}  {'system':<13} {'recall':>6} {'complete':>8} {'median_us':>9} {'mean_tokens':>11}")
    for budget in budgets:
        for name in systems:
            r = results[(name, budget)]
            print(f"{budget:>6}  {name:<13} {r['recall']:>6.3f} {r['complete']:>8.3f} "
                  f"{r['median_us']:>9.0f} {r['mean_tokens']:>11.0f}")
    print()
    print("Recall per category")
    print(f"{'budget':>6}  {'system':<13} " + " ".join(f"{c:>8}" for c in CATEGORIES))
    for budget in budgets:
        for name in systems:
            pc = results[(name, budget)]["per_category"]
            print(f"{budget:>6}  {name:<13} " + " ".join(f"{pc[c][0]:>8.3f}" for c in CATEGORIES))
    problems = [(k, p) for k, r in results.items() for p in r["problems"]]
    if problems:
        print()
        print("Problems in ctxgate's output:")
        for (name, budget), p in problems:
            print(f"  {name} at {budget}: {p}")
    if args.json:
        out = {
            f"{name}@{budget}": {k: v for k, v in r.items()}
            for (name, budget), r in results.items()
        }
        args.json.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
