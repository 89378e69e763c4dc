"""The table of `bench/device-longk.sh`: per shape, our time (µs per call, each side's
best of single-call, queued and, ours, CUDA graph replay) with each forced tile column, cuBLAS from the same process,
torch's best correct impl from the same call, and each column / best peer.

Usage: COLS="plan 17 18" python3 bench/longk_table.py DIR (DIR holds suite-<col>.json, torch.json)
"""
import json
import os
import sys


def best(*xs):
    xs = [x for x in xs if x]
    return min(xs) if xs else None


def main():
    d = sys.argv[1]
    cols = os.environ.get("COLS", "plan").split()
    rows, dev = {}, ""
    for c in cols:
        try:
            j = json.load(open(f"{d}/suite-{c}.json"))
        except (OSError, ValueError) as e:
            print(f"column {c}: no JSON ({e})")
            continue
        dev = dev or j.get("device", "")
        for r in j["rows"]:
            k = (r["dtype"], r["m"], r["n"], r["k"])
            ours = best(r["ours"]["median_ms"], r.get("ours_queued_ms"), r.get("ours_graph_ms"))
            cub = best((r.get("cublas") or {}).get("median_ms"), r.get("cublas_queued_ms"), r.get("cublas_graph_ms"))
            e = rows.setdefault(k, {"cublas": []})
            e[c] = (ours * 1e3, r.get("correct", True), r.get("family", ""))
            if cub:
                e["cublas"].append(cub * 1e3)
    torch = {}
    try:
        for t in json.load(open(f"{d}/torch.json"))["best"]:
            torch[(t["dtype"], t["m"], t["n"], t["k"])] = (t["median_ms"] * 1e3, t["impl"])
    except (OSError, ValueError, KeyError) as e:
        print(f"torch: none ({e})")
    print(f"{dev}; µs per call; ratio = best peer / ours (above 1: ours faster)\n")
    print("| shape | " + " | ".join(f"tile {c}" for c in cols) + " | cuBLAS | torch | " +
          " | ".join(f"{c} / best" for c in cols) + " |")
    print("|---" * (2 * len(cols) + 3) + "|")
    for k, e in rows.items():
        cub = min(e["cublas"]) if e["cublas"] else None
        t = torch.get(k)
        peer = best(cub, t[0] if t else None)
        cells = [f"{e[c][0]:.1f}{'' if e[c][1] else ' WRONG'}" if c in e else "-" for c in cols]
        ratios = [f"{peer / e[c][0]:.3f}" if c in e and peer else "-" for c in cols]
        print(f"| {k[0]} {k[1]}x{k[2]}x{k[3]} | " + " | ".join(cells) + f" | {cub:.1f} | " +
              (f"{t[0]:.1f} ({t[1]})" if t else "-") + " | " + " | ".join(ratios) + " |")
    for c in cols:
        rs = [best(min(e["cublas"]) if e["cublas"] else None, torch.get(k, (None,))[0]) / e[c][0]
              for k, e in rows.items() if c in e]
        if rs:
            g = 1.0
            for r in rs:
                g *= r
            print(f"\ntile {c}: geomean {g ** (1 / len(rs)):.3f}x the best peer over {len(rs)} shapes, worst {min(rs):.3f}x")
        for k, e in rows.items():
            if c in e:
                print(f"  {c} {k[0]} {k[1]}x{k[2]}x{k[3]}: {e[c][2]}")


main()
