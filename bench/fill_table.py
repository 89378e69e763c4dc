"""One table of forced-tile irregular-suite runs (`bench --ops gemm --shape-suite irregular
--shapes ...`, operands rotated past the L2) against the peers of the same device call.

Usage: COLS="plan 17 18" python3 bench/fill_table.py DIR > table.md

DIR holds `suite-<col>.json` (our suite run with column <col>'s setting, e.g. a Hopper tile forced; cuBLAS
in the same process) and optionally `torch.json` (`benches/torch_gemm.py --rotate`). Per shape
and column: our single-call and queued (back-to-back) median ms. The peers: cuBLAS single and
queued (the best over the columns' processes) and torch's best impl (eager or CUDA graph).
"queued / cuBLAS" compares the kernels (no host gap on either side); "single / best" is the
user's view: our single call against the faster of cuBLAS's single call and torch's best.
"""
import json
import math
import os
import sys


def main():
    r = sys.argv[1]
    cols = os.environ["COLS"].split()
    rows, path = {}, {}
    for col in cols:
        try:
            d = json.load(open(f"{r}/suite-{col}.json"))
        except (OSError, ValueError) as e:
            print(f"({col}: {e})")
            continue
        for x in d["rows"]:
            key = (x["dtype"], f"{x['m']}x{x['n']}x{x['k']}")
            ok = x.get("correct", False)
            rows.setdefault(key, {})[col] = (x["ours"]["median_ms"], x.get("ours_queued_ms"), ok,
                                              x["cublas"]["median_ms"], x.get("cublas_queued_ms"))
            if col == cols[0]:
                path[key] = x["family"].split(" ")[0]
    torch = {}
    try:
        for x in json.load(open(f"{r}/torch.json"))["best"]:
            torch[(x["dtype"], f"{x['m']}x{x['n']}x{x['k']}")] = (x["median_ms"], x["impl"])
    except (OSError, ValueError, KeyError) as e:
        print(f"(torch: {e})")
    head = " | ".join(f"{c} single / queued µs" for c in cols)
    print(f"| dtype | shape | {head} | cuBLAS single / queued µs | torch µs | best queued / cuBLAS queued | "
          "plan single / best single | best col | plan |")
    print("|" + "---|" * (len(cols) + 8))
    g_q, g_s = [], []
    for key, v in rows.items():
        cells, best = [], None
        for c in cols:
            if c not in v:
                cells.append("–")
                continue
            s, q, ok, _, _ = v[c]
            qs = f"{1e3 * q:.1f}" if q else "–"
            cells.append(f"{1e3 * s:.1f} / {qs}" + ("" if ok else " WRONG"))
            if ok and q and (best is None or q < best[1]):
                best = (c, q)
        cb_s = min(x[3] for x in v.values())
        cb_q = min((x[4] for x in v.values() if x[4]), default=float("nan"))
        t = torch.get(key)
        peer_s = min(cb_s, t[0]) if t else cb_s
        plan = v.get(cols[0])
        rq = cb_q / best[1] if best else float("nan")
        rs = peer_s / plan[0] if plan else float("nan")
        g_q.append(rq)
        g_s.append(rs)
        tcell = f"{1e3 * t[0]:.1f} ({t[1]})" if t else "–"
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + f" | {1e3 * cb_s:.1f} / {1e3 * cb_q:.1f} | {tcell} | "
              f"{rq:.3f}x | {rs:.3f}x | {best[0] if best else '–'} | {path.get(key, '')} |")
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
    print(f"\ngeomean: best column queued / cuBLAS queued {gm(g_q):.3f}x; plan single / best single {gm(g_s):.3f}x "
          f"over {len(g_q)} rows")


if __name__ == "__main__":
    main()
