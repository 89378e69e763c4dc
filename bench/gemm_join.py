"""Joins `bench --ops gemm` JSON (ours and cuBLAS, same process) with `benches/torch_gemm.py`
JSON (torch, same device call) into one table: ours / best peer per row.

Usage: python3 bench/gemm_join.py OURS.json TORCH.json [--json OUT.json] [--markdown OUT.md]

A row's best peer is the fastest of cuBLAS (from our file: single call, queued, CUDA graph) and
every correct torch impl of the
same (case, dtype, m, n, k, batch); ours is the best of our single call, queued call and
CUDA graph replay (the column `ours how` says which), as torch's best of eager and graph. Only plain GEMM rows are joined (the fused and batched
rows have their own peers in our file). The summary gives the geomean of ours / best peer and the
worst row. Rows without a torch match keep cuBLAS alone as the peer and say so.
"""
import argparse
import json
import math


def key(r):
    case = "linear_bias_gelu" if "gelu" in r["case"] else "gemm"
    return (case, r["dtype"], r["m"], r["n"], r["k"], r.get("batch", 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("torch")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    ours = json.load(open(args.ours))
    torch = json.load(open(args.torch))
    best_torch = {}
    for r in torch["best"]:
        best_torch[key(r)] = r
    rows = []
    for r in ours["rows"]:
        # Rows of the irregular suite (`--shape-suite`) have no case: plain GEMMs, their peer
        # under `cublas`, their path under `family`, and a queued (back-to-back) time per call
        # for each side beside the single-call one; each side keeps its better time.
        r.setdefault("case", "gemm")
        if "family" in r:
            r.setdefault("path", r["family"])
        if r["case"] != "gemm":
            continue
        # Ours, like the peers, keeps the best of a single call, a queued call and a CUDA
        # graph replay (`ours_graph` on `bench --ops gemm` rows, `ours_graph_ms` on the suite's).
        graph = (r.get("ours_graph") or {}).get("median_ms") or r.get("ours_graph_ms")
        mine = [("call", r["ours"]["median_ms"]), ("queued", r.get("ours_queued_ms")), ("graph", graph)]
        ours_how, ours_ms = min(((h, x) for h, x in mine if x), key=lambda p: p[1])
        peers = []
        if r.get("peer", "").lower().startswith("cublas") and r.get("peer_stats"):
            peers.append((r["peer"], r["peer_stats"]["median_ms"]))
        if r.get("cublas"):
            peers.append(("cuBLAS", r["cublas"]["median_ms"]))
        if r.get("cublas_queued_ms"):
            peers.append(("cuBLAS queued", r["cublas_queued_ms"]))
        cublas_graph = (r.get("peer_graph") or {}).get("median_ms") or r.get("cublas_graph_ms")
        if cublas_graph:
            peers.append(("cuBLAS graph", cublas_graph))
        t = best_torch.get(key(r))
        if t:
            peers.append(("torch " + t["impl"], t["median_ms"]))
        if not peers:
            continue
        name, peer_ms = min(peers, key=lambda p: p[1])
        rows.append({
            "case": r["case"], "dtype": r["dtype"], "m": r["m"], "n": r["n"], "k": r["k"],
            "batch": r.get("batch", 1), "path": r.get("path", ""), "ours_ms": ours_ms,
            "ours_how": ours_how,
            "best_peer": name, "peer_ms": peer_ms, "ratio": peer_ms / ours_ms,
            "correct": r.get("correct", False), "torch_matched": t is not None,
        })
    ratios = [x["ratio"] for x in rows if x["correct"]]
    summary = {
        "rows": len(rows),
        "geomean_vs_best_peer": math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None,
        "min_vs_best_peer": min(ratios) if ratios else None,
        "all_correct": all(x["correct"] for x in rows),
    }
    doc = {"schema": "ferrotune-gemm-join/1", "device": ours.get("device"), "commit": ours.get("commit"),
           "torch": torch.get("torch"), "summary": summary, "rows": rows}
    lines = ["| case | dtype | shape | path | ours ms | ours how | best peer | peer ms | ours / best |",
             "|---|---|---|---|---|---|---|---|---|"]
    for x in rows:
        shape = f"{x['m']}x{x['n']}x{x['k']}" + (f"x{x['batch']}" if x["batch"] > 1 else "")
        lines.append(f"| {x['case']} | {x['dtype']} | {shape} | {x['path']} | {x['ours_ms']:.4f} | {x['ours_how']} | {x['best_peer']} "
                     f"| {x['peer_ms']:.4f} | {x['ratio']:.2f}x{'' if x['correct'] else ' WRONG'} |")
    g = summary["geomean_vs_best_peer"]
    lines.append("")
    lines.append(f"geomean ours / best peer: {g:.3f}x over {len(ratios)} rows; worst {summary['min_vs_best_peer']:.3f}x"
                 if g else "no rows")
    text = "\n".join(lines)
    print(text)
    if args.json:
        json.dump(doc, open(args.json, "w"), indent=1)
    if args.markdown:
        open(args.markdown, "w").write(text + "\n")


if __name__ == "__main__":
    main()
