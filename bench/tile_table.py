"""One table of forced-tile `bench --ops gemm` runs against the peers of the same device call.

Usage: COLS="plan 8 15" python3 bench/tile_table.py DIR > table.md

DIR holds `gemm-<col>-<dtype>.json` (our bench, cuBLAS in the same process) and optionally
`torch-gemm-h100.json` (`benches/torch_gemm.py`). A row's best peer is the faster of the best
cuBLAS time over the columns' calls and torch's best impl; "best column / best peer" uses the
fastest correct column. The plan column is the first of COLS; its path is printed.
"""
import glob
import json
import os
import sys


def main():
    r = sys.argv[1]
    cols = os.environ["COLS"].split()
    rows, peer, path = {}, {}, {}
    for f in sorted(glob.glob(f"{r}/gemm-*-*.json")):
        col = os.path.basename(f).split("-")[1]
        if col not in cols:
            continue
        for x in json.load(open(f))["rows"]:
            key = (x.get("case", "gemm"), x["dtype"], f"{x['m']}x{x['n']}x{x['k']}")
            rows.setdefault(key, {})[col] = (x["ours"]["median_ms"], x["correct"])
            if x.get("peer_stats") and "cuBLAS" in str(x.get("peer", "")):
                peer.setdefault(key, []).append(x["peer_stats"]["median_ms"])
            if col == cols[0]:
                path[key] = x["path"].split(" ")[0]
    torch = {}
    try:
        for x in json.load(open(f"{r}/torch-gemm-h100.json"))["best"]:
            torch[(x.get("case", "gemm"), x["dtype"], f"{x['m']}x{x['n']}x{x['k']}")] = x["median_ms"]
    except (OSError, ValueError, KeyError) as e:
        print(f"(torch: {e})")
    head = " | ".join(f"{c} ms" for c in cols)
    print(f"| case | dtype | shape | {head} | cuBLAS ms (best of calls) | torch ms | best column / best peer | plan |")
    print("|" + "---|" * (len(cols) + 7))
    for key, v in rows.items():
        cub = min(peer.get(key, [float("inf")]))
        tq = torch.get(key) or float("inf")
        cells = [f"{v[c][0]:.4f}{'' if v[c][1] else ' WRONG'}" if c in v else "-" for c in cols]
        ok = [t for t, good in v.values() if good]
        ratio = f"{min(cub, tq) / min(ok):.3f}" if ok else "-"
        print(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(cells) + f" | {cub:.4f} | {tq:.4f} | {ratio} | {path.get(key, '')} |")


if __name__ == "__main__":
    main()
