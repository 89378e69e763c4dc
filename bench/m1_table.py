"""The small-M sweep table of bench/device-m1.sh and bench/device-gemvs.sh: one column per
`m1-<label>.json` in DIR (in the order they were written), one row per shape, µs per call
queued, the share of copy bandwidth on the weight, cuBLAS's queued µs; appended to SUMMARY.

Usage: python3 bench/m1_table.py DIR SUMMARY
"""
import glob
import json
import os
import sys


def main():
    r, s = sys.argv[1], sys.argv[2]
    cols, rows = [], {}
    for f in sorted(glob.glob(f"{r}/m1-*.json"), key=os.path.getmtime):
        lab = os.path.basename(f)[3:-5]
        try:
            d = json.load(open(f))
        except Exception:
            continue
        cols.append(lab)
        for x in d["rows"]:
            k = f"{x['m']}x{x['n']}x{x['k']}"
            rows.setdefault(k, {})[lab] = (x["ours_queued_ms"] * 1e3, x.get("copy_fraction_queued"),
                                           x.get("cublas_queued_ms"), x["correct"])
    out = ["µs queued per call (share of copy bandwidth on the weight); cuBLAS queued µs",
           f"{'shape':>14} " + " ".join(f"{c:>14}" for c in cols) + "   cuBLAS"]
    # No copy fraction: not a streaming row.
    frac = lambda x: "  -  " if x is None else f"{x:.2f}"
    for k, v in rows.items():
        cub = next((c for (_, _, c, _) in v.values() if c), None)
        cells = [f"{v[c][0]:7.1f} ({frac(v[c][1])}){'' if v[c][3] else '!'}" if c in v else f"{'-':>14}"
                 for c in cols]
        out.append(f"{k:>14} " + " ".join(cells) + (f"   {cub * 1e3:6.1f}" if cub else ""))
    open(s, "a").write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
