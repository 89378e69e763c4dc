"""Our GEMM times and ratios to the peer of the same call, across `bench --ops gemm` JSONs of
several device calls: one column per named run, so a kernel change can be read against the
runs before it (each ratio is against the cuBLAS of its own call; times of different calls
compare only roughly).

Usage: python3 bench/gemm_runs_table.py NAME=FILE[,FILE...] [NAME=FILE ...] > table.md
The first run's shapes (and any later run's new ones) make the rows; a shape missing from a
run shows "-". A row whose result was not correct shows "WRONG". Times and ratios take each side's best of its
single call and its CUDA-graph replay; the geomeans are over the plain `gemm` rows.
"""
import json
import math
import sys


def load(files):
    rows = {}
    for f in files.split(","):
        for r in json.load(open(f))["rows"]:
            key = (r.get("case", "gemm"), r["dtype"], r["m"], r["n"], r["k"])
            ours = min(x for x in (r["ours"]["median_ms"], (r.get("ours_graph") or {}).get("median_ms")) if x)
            peer = min(x for x in (r["peer_stats"]["median_ms"], (r.get("peer_graph") or {}).get("median_ms")) if x)
            rows.setdefault(key, (ours, peer, r.get("correct", True)))
    return rows


def main():
    runs = []
    for a in sys.argv[1:]:
        name, files = a.split("=", 1)
        runs.append((name, load(files)))
    keys = []
    for _, rows in runs:
        keys += [k for k in rows if k not in keys]
    head = ["case", "dtype", "shape"] + [f"{n} ms" for n, _ in runs] + [f"{n} / peer" for n, _ in runs]
    if len(runs) > 1:
        head.append(f"{runs[-1][0]} / {runs[0][0]} time")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    logs = {n: [] for n, _ in runs}
    for k in keys:
        cells = [k[0], k[1], f"{k[2]}x{k[3]}x{k[4]}"]
        got = [rows.get(k) for _, rows in runs]
        cells += ["-" if g is None else f"{g[0]:.4f}" for g in got]
        for (n, _), g in zip(runs, got):
            if g is None:
                cells.append("-")
            elif not g[2]:
                cells.append("WRONG")
            else:
                cells.append(f"{g[1] / g[0]:.3f}x")
                if k[0] == "gemm":
                    logs[n].append(math.log(g[1] / g[0]))
        if len(runs) > 1:
            a, b = got[0], got[-1]
            cells.append("-" if a is None or b is None else f"{b[0] / a[0]:.3f}")
        print("| " + " | ".join(cells) + " |")
    for n, l in logs.items():
        if l:
            print(f"\n{n}: geomean ours / peer (case gemm) {math.exp(sum(l) / len(l)):.3f}x over {len(l)} rows", end="")
    print()


if __name__ == "__main__":
    main()
