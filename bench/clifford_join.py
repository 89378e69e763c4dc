#!/usr/bin/env python3
"""Joins the Clifford bench (ours, `xtask bench --ops clifford`) with the torch peers
(`benches/torch_clifford.py`) on (dim, op, B, N): a markdown table of ours vs torch eager and
torch.compile (the fastest of its default mode, `compile_cg` (reduce-overhead) and `compile_max`
(max-autotune-no-cudagraphs), where they ran). Usage: clifford_join.py OURS.json TORCH.json [TORCH2.json ...] [--out OUT.md]"""
import json, sys

args = sys.argv[1:]
out = None
if "--out" in args:
    i = args.index("--out")
    out = args[i + 1]
    del args[i:i + 2]
ours = json.load(open(args[0]))
torches = [json.load(open(p)) for p in args[1:]]
torch = torches[0]
peer = {}
for t in torches:
    for r in t["rows"]:
        if "error" in r or r.get("median_ms") is None:
            continue
        impl = "compile" if r["impl"] in ("compile_cg", "compile_max") else r["impl"]
        k = (r["dim"], r["op"], r["B"], r["N"], impl)
        peer[k] = min(peer.get(k, float("inf")), r["median_ms"])
lines = [
    f"Ours: {ours['device']}, commit {ours['commit']}; torch {torch['torch']} on {torch['device_name']} "
    f"({torch['date']}). f32, norm on; times are medians (ms).",
    "",
    "| dim | op | B | N | ours ms | ours GB/s | x copy | eager ms | compile ms | vs eager | vs compile |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
]
ratios = {}
for r in ours["rows"]:
    if r["dtype"] != "f32":
        continue
    k = (r["dim"], r["op"], r["B"], r["N"])
    e, c = peer.get(k + ("eager",)), peer.get(k + ("compile",))
    vs = lambda p: f"{p / r['ms']:.2f}x" if p else "-"
    if c:
        ratios.setdefault((r["dim"], r["op"]), []).append(c / r["ms"])
    lines.append(
        f"| {r['dim']}D | {r['op']} | {r['B']} | {r['N']} | {r['ms']:.4f} | {r['bytes_per_s'] / 1e9:.0f} | "
        f"{r['ratio_to_copy']:.2f} | {e or '-':.4} | {c or '-':.4} | {vs(e)} | {vs(c)} |"
        if e and c else
        f"| {r['dim']}D | {r['op']} | {r['B']} | {r['N']} | {r['ms']:.4f} | {r['bytes_per_s'] / 1e9:.0f} | "
        f"{r['ratio_to_copy']:.2f} | - | - | - | - |"
    )
lines += ["", "| dim | op | min vs compile | geomean vs compile | max vs compile |", "|---|---|---|---|---|"]
for (d, op), v in sorted(ratios.items()):
    g = 1.0
    for x in v:
        g *= x
    g **= 1 / len(v)
    lines.append(f"| {d}D | {op} | {min(v):.2f}x | {g:.2f}x | {max(v):.2f}x |")
text = "\n".join(lines) + "\n"
if out:
    open(out, "w").write(text)
print(text)
