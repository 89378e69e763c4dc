"""Torch peers of the Clifford-algebra layer ops (issue 6), checked from first principles and timed.

The maths is the one of shared/notes/clifford-ops.md, for Cl(2,0) and Cl(3,0), layout (MV_DIM, B, N):
  fused_gelu_sgp_norm(x, y, weight (N, W), normalize)    GELU gate on the scalar part, weighted
                                                          geometric product per feature, optional
                                                          per-grade RMS norm over the features;
  fused_gelu_fcgp_norm(x, y, weight (W, N, N), normalize) the same with every path mixing features
                                                          through its own N x N matrix.
The geometric product is not transcribed: it is built at import from the basis-blade product
(bitmask blades, reordering sign, Euclidean metric), and the per-output-component lists of
(path, sign, x component, y component) are precomputed, so the torch code is the straight-line
sequence of tensor ops a hand-written implementation would be.

Self-check (every run starts with it; `--check` runs only it; non-zero exit on any mismatch): the
path lists equal the notes' order; the f32 eager implementation on the chosen device matches a
float64 reference computed pair by pair from the blade table, on random inputs of several shapes
(odd N included), normalised or not; the 2D notes' hand formulas match; autograd gradients pass
finite differences (gradcheck, float64) and the f32 gradients match the float64 ones; the notes'
analytic gradient of the GELU gate matches autograd.

Timing (CUDA events, warm-up, median of many, input sets rotated when a set fits in L2): ops
`fwd` (sgp with norm, no autograd), `fwdbwd` (sgp with norm, forward then the gradients w.r.t. x,
y and weight), `fcgp_fwd` (fcgp with norm); impls `eager` and `compile` (torch.compile, default
mode; one compile per (dim, op, N) with the batch dimension dynamic, or per exact shape with
`--compile-mode per-shape`; a failure is recorded in the row's `error`), and `copy`: a device copy moving the
op's fewest bytes (read + write), the bandwidth ceiling. Before timing, every impl's output (and
gradients) at that size is compared with the float64 eager result on the device.

    python3 benches/torch_clifford.py --out $OUT/torch-clifford.json        # the GPU sweep
    python3 benches/torch_clifford.py --check --device cpu                  # the check alone
    python3 benches/torch_clifford.py --device cpu --quick --impls eager --out /tmp/q.json
"""
import argparse
import datetime
import json
import math
import os
import statistics
import sys
import time

import torch

SCHEMA = "ferrotune-torch-clifford/1"
EPS = 1e-6  # inside the square root of the per-grade RMS norm
INV_SQRT2 = 1.0 / math.sqrt(2.0)
DEFAULT_B = (1024, 4096, 8192)
DEFAULT_N = (128, 512, 1024)
QUICK_SIZES = ((64, 16), (96, 33))
OPS = ("fwd", "fwdbwd", "fcgp_fwd")
COMPILE_MODES = {
    "per-n": "one compile per (dim, op, N), the batch dimension dynamic (default)",
    "per-shape": "one compile per (dim, op, B, N), every size static (3x the compiles)",
    "dynamic": "one compile per (dim, op), B and N dynamic (fewest compiles, reductions not specialised)",
}

# ---------------------------------------------------------------------------------------------
# The algebra, from basis blades.

# Component order of the layout: blades as bitmasks (bit j = e_{j+1}); e13, not e31.
BLADES = {
    2: (0b00, 0b01, 0b10, 0b11),
    3: (0b000, 0b001, 0b010, 0b100, 0b011, 0b101, 0b110, 0b111),
}

# The notes' path order, (x grade, output grade, y grade): the weight index is the position.
NOTES_PATHS = {
    2: ((0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 1), (1, 1, 0), (1, 1, 2), (1, 2, 1), (2, 0, 2), (2, 1, 1),
        (2, 2, 0)),
    3: ((0, 0, 0), (0, 1, 1), (0, 2, 2), (0, 3, 3), (1, 0, 1), (1, 1, 0), (1, 1, 2), (1, 2, 1), (1, 2, 3),
        (1, 3, 2), (2, 0, 2), (2, 1, 1), (2, 1, 3), (2, 2, 0), (2, 2, 2), (2, 3, 1), (3, 0, 3), (3, 1, 2),
        (3, 2, 1), (3, 3, 0)),
}

# (output component, path) pairs: the signed per-path products the fcgp multiplies (notes: 14, 44).
NOTES_FC_TERMS = {2: 14, 3: 44}


def grade(blade):
    return bin(blade).count("1")


def reorder_sign(a, b):
    """Sign of e_a e_b brought to canonical order e_(a xor b): one flip per pair (bit of a, lower
    bit of b) that must be swapped. Every basis vector squares to +1 (Euclidean), so that is all."""
    swaps = 0
    a >>= 1
    while a:
        swaps += grade(a & b)
        a >>= 1
    return -1 if swaps & 1 else 1


class Algebra:
    """Cl(dim, 0) in the layout's component order, with the product tables the ops need."""

    def __init__(self, dim):
        self.dim = dim
        self.blades = BLADES[dim]
        self.mv = len(self.blades)
        self.grades = [grade(b) for b in self.blades]
        index = {b: i for i, b in enumerate(self.blades)}
        # product[i][k] = (output component, sign) of blade i times blade k.
        self.product = [[(index[a ^ b], reorder_sign(a, b)) for b in self.blades] for a in self.blades]
        self.paths = sorted({(self.grades[i], self.grades[r], self.grades[k])
                             for i in range(self.mv) for k in range(self.mv)
                             for r, _ in [self.product[i][k]]})
        self.path_index = {p: j for j, p in enumerate(self.paths)}
        # terms[c] = [(path, [(sign, i, k), ...]), ...]: output component c, grouped by path in
        # path order, pairs in (i, k) order.
        self.terms = []
        for c in range(self.mv):
            groups = {}
            for i in range(self.mv):
                for k in range(self.mv):
                    r, s = self.product[i][k]
                    if r == c:
                        p = self.path_index[(self.grades[i], self.grades[c], self.grades[k])]
                        groups.setdefault(p, []).append((s, i, k))
            self.terms.append(sorted(groups.items()))
        # The fcgp's (component, path) products in component-major order, and each component's
        # slice of them.
        self.fc_paths = [p for c in range(self.mv) for p, _ in self.terms[c]]
        self.fc_ranges, lo = [], 0
        for c in range(self.mv):
            self.fc_ranges.append((lo, lo + len(self.terms[c])))
            lo += len(self.terms[c])
        # Components of each grade: contiguous in both layouts.
        self.grade_ranges = []
        for g in range(dim + 1):
            comps = [c for c in range(self.mv) if self.grades[c] == g]
            assert comps == list(range(comps[0], comps[-1] + 1)), "grade components must be contiguous"
            self.grade_ranges.append((comps[0], comps[-1] + 1))
        self._fc_index = {}

    @property
    def n_weights(self):
        return len(self.paths)

    def fc_index(self, device):
        """The path of every fcgp product, as an index tensor on `device` (cached)."""
        key = str(device)
        if key not in self._fc_index:
            self._fc_index[key] = torch.tensor(self.fc_paths, dtype=torch.long, device=device)
        return self._fc_index[key]


ALGEBRAS = {d: Algebra(d) for d in (2, 3)}

# ---------------------------------------------------------------------------------------------
# The ops, as a hand-written torch implementation: straight-line tensor ops.


def gelu_gate(x):
    """g(x) = x * Phi(x0) on every component, Phi(s) = 0.5 (1 + erf(s / sqrt 2)) (erf form)."""
    phi = 0.5 * (1.0 + torch.erf(x[0] * INV_SQRT2))
    return x * phi


def signed_sum(xs, ys, pairs):
    s = None
    for sign, i, k in pairs:
        t = xs[i] * ys[k]
        if s is None:
            s = t if sign > 0 else -t
        else:
            s = s + t if sign > 0 else s - t
    return s


def grade_norm(alg, o):
    """Per batch row and grade: divide by r = sqrt((1/N) sum over features and the grade's
    components of o^2 + EPS)."""
    n = o.shape[-1]
    parts = []
    for lo, hi in alg.grade_ranges:
        og = o[lo:hi]
        r = torch.sqrt(og.square().sum(dim=(0, 2)) / n + EPS)
        parts.append(og / r[None, :, None])
    return torch.cat(parts)


def fused_gelu_sgp_norm(alg, x, y, weight, normalize):
    """x, y (MV, B, N); weight (N, W) -> (MV, B, N)."""
    xs, ys = gelu_gate(x).unbind(0), gelu_gate(y).unbind(0)
    outs = []
    for c in range(alg.mv):
        acc = None
        for p, pairs in alg.terms[c]:
            t = weight[:, p] * signed_sum(xs, ys, pairs)
            acc = t if acc is None else acc + t
        outs.append(acc)
    o = torch.stack(outs)
    return grade_norm(alg, o) if normalize else o


def fused_gelu_fcgp_norm(alg, x, y, weight, normalize):
    """x, y (MV, B, N); weight (W, N, N), W_p[n, m] -> (MV, B, N):
    o_c[b, m] = sum over paths of ± sum_n x_i[b, n] y_k[b, n] W_p[n, m]."""
    xs, ys = gelu_gate(x).unbind(0), gelu_gate(y).unbind(0)
    prods = [signed_sum(xs, ys, pairs) for c in range(alg.mv) for _, pairs in alg.terms[c]]
    mixed = torch.bmm(torch.stack(prods), weight.index_select(0, alg.fc_index(weight.device)))
    o = torch.stack([mixed[lo:hi].sum(0) for lo, hi in alg.fc_ranges])
    return grade_norm(alg, o) if normalize else o


# ---------------------------------------------------------------------------------------------
# References: float64, pair by pair from the blade table (no grouping, no precomputed lists).


def reference_sgp(alg, x, y, weight, normalize):
    x, y, weight = x.double(), y.double(), weight.double()
    xg, yg = gelu_gate(x), gelu_gate(y)
    o = torch.zeros_like(xg)
    for i in range(alg.mv):
        for k in range(alg.mv):
            r, s = alg.product[i][k]
            p = alg.path_index[(alg.grades[i], alg.grades[r], alg.grades[k])]
            o[r] += s * weight[:, p] * xg[i] * yg[k]
    return reference_norm(alg, o) if normalize else o


def reference_fcgp(alg, x, y, weight, normalize):
    x, y, weight = x.double(), y.double(), weight.double()
    xg, yg = gelu_gate(x), gelu_gate(y)
    o = torch.zeros_like(xg)
    for i in range(alg.mv):
        for k in range(alg.mv):
            r, s = alg.product[i][k]
            p = alg.path_index[(alg.grades[i], alg.grades[r], alg.grades[k])]
            o[r] += s * ((xg[i] * yg[k]) @ weight[p])
    return reference_norm(alg, o) if normalize else o


def reference_norm(alg, o):
    out = o.clone()
    n = o.shape[-1]
    for g in range(alg.dim + 1):
        comps = [c for c in range(alg.mv) if alg.grades[c] == g]
        ss = sum((o[c] ** 2).sum(dim=-1) for c in comps)
        r = torch.sqrt(ss / n + EPS)
        for c in comps:
            out[c] = o[c] / r[:, None]
    return out


def hand_sgp_2d(x, y, w, normalize):
    """The notes' four 2D formulas, literally (w: (N, 10))."""
    x, y = gelu_gate(x), gelu_gate(y)
    x0, x1, x2, x3 = x
    y0, y1, y2, y3 = y
    w = w.t()
    o0 = w[0] * x0 * y0 + w[3] * (x1 * y1 + x2 * y2) - w[7] * x3 * y3
    o1 = w[1] * x0 * y1 + w[4] * x1 * y0 - w[5] * x2 * y3 + w[8] * x3 * y2
    o2 = w[1] * x0 * y2 + w[4] * x2 * y0 + w[5] * x1 * y3 - w[8] * x3 * y1
    o3 = w[2] * x0 * y3 + w[6] * (x1 * y2 - x2 * y1) + w[9] * x3 * y0
    o = torch.stack([o0, o1, o2, o3])
    return reference_norm(ALGEBRAS[2], o) if normalize else o


# ---------------------------------------------------------------------------------------------
# Self-check.


def rel_err(got, want):
    """||got - want|| / ||want|| in float64; inf on NaN or a shape mismatch."""
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    if got.shape != want.shape or not torch.isfinite(got).all():
        return math.inf
    den = want.norm().item()
    num = (got - want).norm().item()
    return num / den if den > 0 else num


def inputs(alg, b, n, fc, device, gen, dtype=torch.float32):
    """Random x, y in [-2, 2), weights in [-1, 1) (scaled by 1/sqrt(N) for the fcgp), drawn on the
    generator's device (float64 on the CPU, float32 on a GPU) and moved to `device` as `dtype`."""
    gdev = gen.device
    gdt = torch.float64 if gdev.type == "cpu" else torch.float32

    def u(*shape, lo=-1.0, hi=1.0):
        t = torch.rand(*shape, generator=gen, device=gdev, dtype=gdt)
        return (t * (hi - lo) + lo).to(device=device, dtype=dtype)
    x = u(alg.mv, b, n, lo=-2.0, hi=2.0)
    y = u(alg.mv, b, n, lo=-2.0, hi=2.0)
    w = u(alg.n_weights, n, n) / math.sqrt(n) if fc else u(n, alg.n_weights)
    return x, y, w


class Checker:
    def __init__(self):
        self.failures = []
        self.count = 0

    def expect(self, ok, what):
        self.count += 1
        if not ok:
            self.failures.append(what)
            print(f"CHECK FAILED: {what}", file=sys.stderr)


def self_check(device, seed=1234):
    """Returns a summary dict; raises SystemExit(1) on any failure."""
    t0 = time.perf_counter()
    ck = Checker()
    gen = torch.Generator().manual_seed(seed)
    for dim, alg in ALGEBRAS.items():
        ck.expect(tuple(alg.paths) == NOTES_PATHS[dim], f"{dim}D paths {alg.paths} != the notes' order")
        ck.expect(len(alg.fc_paths) == NOTES_FC_TERMS[dim], f"{dim}D fcgp products {len(alg.fc_paths)}")
        # The blade table against the algebra's axioms, which fix it: generators square to +1
        # and anticommute, the product is associative, and each blade is the ascending
        # product of its generators (e1 e3 = +e13).
        gens = [alg.blades.index(1 << j) for j in range(dim)]
        for i in gens:
            for k in gens:
                want = (0, 1) if i == k else (alg.blades.index(alg.blades[i] ^ alg.blades[k]), -alg.product[k][i][1])
                ck.expect(alg.product[i][k] == want, f"{dim}D generators {i}, {k}: {alg.product[i][k]}")
        for c, b in enumerate(alg.blades):
            acc = (0, 1)
            for j in range(dim):
                if b >> j & 1:
                    r, s = alg.product[acc[0]][gens[j]]
                    acc = (r, acc[1] * s)
            ck.expect(acc == (c, 1), f"{dim}D blade {b:03b} is not the ascending product of its generators")
        assoc = all(
            (lambda ab, bc: (alg.product[ab[0]][c][0], ab[1] * alg.product[ab[0]][c][1])
             == (alg.product[a][bc[0]][0], bc[1] * alg.product[a][bc[0]][1]))(alg.product[a][b], alg.product[b][c])
            for a in range(alg.mv) for b in range(alg.mv) for c in range(alg.mv))
        ck.expect(assoc, f"{dim}D blade product is not associative")
        for b, n in ((1, 1), (3, 5), (7, 33), (16, 64), (5, 127)):
            for normalize in (False, True):
                x, y, w = inputs(alg, b, n, False, device, gen)
                e = rel_err(fused_gelu_sgp_norm(alg, x, y, w, normalize), reference_sgp(alg, x, y, w, normalize))
                ck.expect(e < 1e-5, f"{dim}D sgp B={b} N={n} norm={normalize}: rel err {e:.2e}")
                if dim == 2:
                    e = rel_err(hand_sgp_2d(x.double(), y.double(), w.double(), normalize),
                                reference_sgp(alg, x, y, w, normalize))
                    ck.expect(e < 1e-12, f"2D notes' formulas B={b} N={n} norm={normalize}: rel err {e:.2e}")
                x, y, w = inputs(alg, b, n, True, device, gen)
                e = rel_err(fused_gelu_fcgp_norm(alg, x, y, w, normalize), reference_fcgp(alg, x, y, w, normalize))
                ck.expect(e < 1e-5, f"{dim}D fcgp B={b} N={n} norm={normalize}: rel err {e:.2e}")
        # Gradients: finite differences in float64 on the CPU, then f32 on the device against f64.
        for fc, fn in ((False, fused_gelu_sgp_norm), (True, fused_gelu_fcgp_norm)):
            name = "fcgp" if fc else "sgp"
            for normalize in (False, True):
                x, y, w = inputs(alg, 2, 3, fc, "cpu", gen, torch.float64)
                args = [t.clone().requires_grad_() for t in (x, y, w)]
                try:
                    ok = torch.autograd.gradcheck(lambda a, b_, c: fn(alg, a, b_, c, normalize), args,
                                                  eps=1e-6, atol=1e-7, rtol=1e-5)
                except RuntimeError as e:
                    ok = False
                    print(e, file=sys.stderr)
                ck.expect(ok, f"{dim}D {name} norm={normalize}: gradcheck")
                x, y, w = inputs(alg, 6, 17, fc, device, gen)
                g = torch.rand(alg.mv, 6, 17, generator=gen, dtype=torch.float64) * 2 - 1
                grads = {}
                for dt in (torch.float32, torch.float64):
                    ts = [t.to(dt).clone().requires_grad_() for t in (x, y, w)]
                    out = fn(alg, *ts, normalize)
                    grads[dt] = torch.autograd.grad(out, ts, g.to(device=device, dtype=dt))
                for what, a, b in zip("xyw", grads[torch.float32], grads[torch.float64]):
                    e = rel_err(a, b)
                    ck.expect(e < 1e-5, f"{dim}D {name} norm={normalize}: f32 d{what} rel err {e:.2e}")
        # The notes' analytic gate gradient: dx0 = (Phi + x0 phi) g0 + phi sum_{c >= 1} x_c g_c,
        # dx_c = Phi g_c for c >= 1 (phi(s) = exp(-s^2/2) / sqrt(2 pi)).
        x = (torch.rand(alg.mv, 4, 9, generator=gen, dtype=torch.float64) * 4 - 2).requires_grad_()
        g = torch.rand(alg.mv, 4, 9, generator=gen, dtype=torch.float64) * 2 - 1
        (auto,) = torch.autograd.grad(gelu_gate(x), x, g)
        xd = x.detach()
        cdf = 0.5 * (1 + torch.erf(xd[0] * INV_SQRT2))
        pdf = torch.exp(-0.5 * xd[0] ** 2) / math.sqrt(2 * math.pi)
        want = cdf * g
        want[0] = (cdf + xd[0] * pdf) * g[0] + pdf * (xd[1:] * g[1:]).sum(0)
        e = rel_err(auto, want)
        ck.expect(e < 1e-12, f"{dim}D gate gradient (notes' formula, sum over c >= 1): rel err {e:.2e}")
    summary = {"checks": ck.count, "failed": len(ck.failures), "device": str(device),
               "seconds": round(time.perf_counter() - t0, 2)}
    print(f"self-check on {device}: {ck.count - len(ck.failures)}/{ck.count} passed "
          f"({summary['seconds']} s)")
    if ck.failures:
        raise SystemExit(1)
    return summary


# ---------------------------------------------------------------------------------------------
# Timing.


MIN_BYTES = ("f32, each input read once and each output written once. fwd: x, y, weight read, o written; "
             "fwdbwd: x, y, weight, grad read, o, dx, dy, dweight written; fcgp_fwd: x, y and the W "
             "N x N matrices read, o written")


def min_bytes(alg, op, b, n):
    """Fewest bytes the op must move (see MIN_BYTES)."""
    t = alg.mv * b * n
    if op == "fwd":
        return 4 * (3 * t + n * alg.n_weights)
    if op == "fwdbwd":
        return 4 * (6 * t + 2 * n * alg.n_weights)
    if op == "fcgp_fwd":
        return 4 * (3 * t + alg.n_weights * n * n)
    raise ValueError(op)


class Timer:
    """Median of event-timed calls after a warm-up (host clock on the CPU)."""

    def __init__(self, device, warmup, iters, target_s):
        self.cuda = device.type == "cuda"
        self.warmup, self.iters, self.target_s = warmup, iters, target_s

    def _once(self, fn, i):
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn(i)
            b.record()
            b.synchronize()
            return a.elapsed_time(b)
        t = time.perf_counter()
        fn(i)
        return (time.perf_counter() - t) * 1e3

    def run(self, fn):
        """fn(i) runs call i. Returns the list of times in ms: on CUDA the better (by median) of
        one event pair per call and back-to-back batches of 10 calls between one event pair
        (per call), so the host's launch overhead is not counted against the peer where the
        GPU work can hide it (the way a training loop runs)."""
        warm = [self._once(fn, i) for i in range(self.warmup)]
        iters = self.iters
        if iters is None:  # as many as fit the target, 10 to 100
            est = max(min(warm) if warm else 1.0, 1e-3)
            iters = int(min(100, max(10, self.target_s * 1e3 / est)))
        single = [self._once(fn, self.warmup + i) for i in range(iters)]
        if not self.cuda:
            return single
        k = 10
        batched = []
        for j in range(max(3, iters // k)):
            batched.append(self._once(lambda i: [fn(i * k + m) for m in range(k)], j) / k)
        return min(single, batched, key=statistics.median)


def row(dim, op, b, n, impl, times, nbytes, error=None):
    r = {"dim": dim, "op": op, "B": b, "N": n, "impl": impl, "median_ms": None, "min_ms": None, "max_ms": None,
         "samples": 0, "min_bytes": nbytes, "gbps": None}
    if times:
        med = statistics.median(times)
        r.update(median_ms=med, min_ms=min(times), max_ms=max(times), samples=len(times),
                 gbps=nbytes / (med * 1e-3) / 1e9)
    if error is not None:
        r["error"] = error
    return r


def short(e):
    text = f"{type(e).__name__}: {e}"
    return text if len(text) < 600 else text[:600] + " …"


class Sweep:
    def __init__(self, args, device):
        self.args, self.device = args, device
        self.timer = Timer(device, args.warmup, args.iters, args.target_s)
        self.rows, self.compile_log, self.compiled = [], [], {}
        self.l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20) \
            if device.type == "cuda" else 0
        self.bad = 0

    def sets_for(self, set_bytes):
        """Input sets to rotate through so one pass over them does not fit in L2."""
        if self.l2 == 0:
            return 1
        return int(min(16, max(1, math.ceil(2 * self.l2 / set_bytes))))

    def impl_fn(self, alg, op, impl):
        fc = op == "fcgp_fwd"
        base = fused_gelu_fcgp_norm if fc else fused_gelu_sgp_norm

        def f(x, y, w):
            return base(alg, x, y, w, True)
        if impl == "eager":
            return f
        if impl == "compile_cg":
            # What a user chasing launch overhead runs: static shapes, CUDA graphs.
            return torch.compile(f, mode="reduce-overhead", dynamic=False)
        if impl == "compile_max":
            # The strongest compile without CUDA graphs: static shapes, Inductor autotuning.
            return torch.compile(f, mode="max-autotune-no-cudagraphs", dynamic=False)
        return torch.compile(f, dynamic={"per-n": None, "per-shape": False, "dynamic": True}[self.args.compile_mode])

    def run_group(self, dim, op, n, bs):
        """Every B at one (dim, op, N). Compiles: per-n, one for the group (B dynamic); per-shape,
        one per B; dynamic, one per (dim, op), kept across groups (self.compiled)."""
        alg = ALGEBRAS[dim]
        fc = op == "fcgp_fwd"
        mode = self.args.compile_mode
        compiled = self.compiled.get((dim, op)) if mode == "dynamic" else None
        for b in bs:
            nbytes = min_bytes(alg, op, b, n)
            gen = torch.Generator(device=self.device).manual_seed(b * 7919 + n)
            set_bytes = 4 * (3 * alg.mv * b * n)
            nsets = self.sets_for(set_bytes)
            sets = [inputs(alg, b, n, fc, self.device, gen) for _ in range(nsets)]
            grad = inputs(alg, b, n, False, self.device, gen)[0] / 2
            alg.fc_index(self.device)
            if op == "fwdbwd":
                sets = [tuple(t.clone().requires_grad_() for t in s) for s in sets]
            # The float64 answer on the device, from the eager implementation on upcast inputs
            # (itself checked against the blade-table reference at start-up).
            ref_error = None
            try:
                ref_in = [t.detach().double().requires_grad_(op == "fwdbwd") for t in sets[0]]
                ref_fn = fused_gelu_fcgp_norm if fc else fused_gelu_sgp_norm
                ref_out = ref_fn(alg, *ref_in, True)
                ref = [ref_out] + (list(torch.autograd.grad(ref_out, ref_in, grad.double()))
                                   if op == "fwdbwd" else [])
                del ref_in, ref_out
            except Exception as e:  # noqa: BLE001 -- recorded in the rows, not fatal
                ref, ref_error = None, f"unchecked: no float64 result ({short(e)})"
            for impl in self.args.impls:
                if impl in ("compile_cg", "compile_max"):
                    # One compile (and CUDA-graph capture) per shape; warm-up calls record it.
                    torch._dynamo.reset()
                    fn = self.impl_fn(alg, op, impl)
                    t0 = time.perf_counter()
                    try:
                        for _ in range(3):
                            self.call(op, fn, sets[0], grad)
                        self.sync()
                        self.compile_log.append({"dim": dim, "op": op, "N": n, "B": b, "impl": impl,
                                                 "seconds": round(time.perf_counter() - t0, 2)})
                    except Exception as e:  # noqa: BLE001 -- recorded, not fatal
                        self.compile_log.append({"dim": dim, "op": op, "N": n, "B": b, "impl": impl, "error": short(e)})
                        self.emit(row(dim, op, b, n, impl, None, nbytes, "compile failed: see compile_s"))
                        continue
                elif impl == "compile":
                    if compiled is None or mode == "per-shape":
                        torch._dynamo.reset()
                        compiled = self.impl_fn(alg, op, impl)
                        self.compiled[(dim, op)] = compiled
                        if mode == "per-n":
                            mark = getattr(torch._dynamo, "maybe_mark_dynamic", torch._dynamo.mark_dynamic)
                            for s in sets:
                                for t in s[:2]:
                                    mark(t, 1)
                        t0 = time.perf_counter()
                        try:
                            self.call(op, compiled, sets[0], grad)
                            self.sync()
                            self.compile_log.append({"dim": dim, "op": op, "N": n, "B": b,
                                                     "seconds": round(time.perf_counter() - t0, 2)})
                        except Exception as e:  # noqa: BLE001 -- recorded, not fatal
                            self.compile_log.append({"dim": dim, "op": op, "N": n, "B": b, "error": short(e)})
                            compiled = False
                    if compiled is False:
                        self.emit(row(dim, op, b, n, impl, None, nbytes, "compile failed: see compile_s"))
                        continue
                    fn = compiled
                else:
                    fn = self.impl_fn(alg, op, impl)
                try:
                    t0 = time.perf_counter()
                    got = self.call(op, fn, sets[0], grad)
                    self.sync()
                    if impl == "compile" and time.perf_counter() - t0 > 1.0:  # a recompile, not a run
                        self.compile_log.append({"dim": dim, "op": op, "N": n, "B": b, "recompiled": True,
                                                 "seconds": round(time.perf_counter() - t0, 2)})
                    # f32 arithmetic lands far under these; the gradient of the weights and the
                    # fcgp sum over B or N in f32, so they get 1e-4.
                    tol = 1e-5 if op == "fwd" else 1e-4
                    errs = [rel_err(g, r) for g, r in zip(got, ref)] if ref is not None else [0.0]
                    error = ref_error
                    if max(errs) > tol:
                        error = f"mismatch: rel err {max(errs):.2e} > {tol:.0e} against the float64 result"
                        self.bad += 1
                    del got
                    times = self.timer.run(lambda i, fn=fn, sets=sets: self.call(op, fn, sets[i % nsets], grad))
                    self.emit(row(dim, op, b, n, impl, times, nbytes, error))
                except Exception as e:  # noqa: BLE001 -- recorded, not fatal
                    self.emit(row(dim, op, b, n, impl, None, nbytes, short(e)))
            del sets, ref
            self.time_copy(dim, op, b, n, nbytes)
            if self.device.type == "cuda":
                torch.cuda.empty_cache()

    def call(self, op, fn, s, grad):
        x, y, w = s
        if op == "fwdbwd":
            out = fn(x, y, w)
            return [out] + list(torch.autograd.grad(out, (x, y, w), grad))
        with torch.no_grad():
            return [fn(x, y, w)]

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def time_copy(self, dim, op, b, n, nbytes):
        elems = max(1, nbytes // 8)  # read + write = nbytes
        src = torch.empty(elems, device=self.device).uniform_(-1, 1)
        dst = torch.empty_like(src)
        times = self.timer.run(lambda i: dst.copy_(src))
        self.emit(row(dim, op, b, n, "copy", times, 8 * elems))

    def emit(self, r):
        self.rows.append(r)
        ms = "-" if r["median_ms"] is None else f"{r['median_ms']:9.3f} ms"
        gb = "-" if r["gbps"] is None else f"{r['gbps']:8.1f} GB/s"
        print(f"{r['dim']}D {r['op']:<9} B={r['B']:<5} N={r['N']:<5} {r['impl']:<8} {ms:>12} {gb:>13}"
              f"{'  ' + r['error'] if 'error' in r else ''}", flush=True)


def header(args, device, check):
    h = {"schema": SCHEMA, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
         "torch": torch.__version__, "device": str(device), "device_name": str(device)}
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        h.update(device_name=torch.cuda.get_device_name(device), cuda=torch.version.cuda,
                 sm_count=p.multi_processor_count, l2_bytes=getattr(p, "L2_cache_size", None))
    try:
        import triton
        h["triton"] = triton.__version__
    except ImportError:
        h["triton"] = None
    h.update({
        "dtype": "f32",
        "allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "eps": EPS,
        "norm": "per (b, grade): r = sqrt((1/N) * sum over n and the grade's components of o^2 + eps)",
        "min_bytes": MIN_BYTES,
        "timing": "CUDA events; warm-up then median; inputs rotated over ceil(2 L2 / input bytes) sets "
                  "(at most 16) when they fit in L2",
        "compile": "torch.compile default mode; " + COMPILE_MODES[args.compile_mode],
        "self_check": check,
        "argv": sys.argv[1:],
    })
    return h


def parse_sizes(text):
    out = []
    for part in text.split(","):
        b, n = part.lower().split("x")
        out.append((int(b), int(n)))
    return out


def summary(rows):
    by = {}
    for r in rows:
        by.setdefault((r["dim"], r["op"], r["B"], r["N"]), {})[r["impl"]] = r["median_ms"]
    print(f"\n{'op':<12} {'B':>5} {'N':>5} {'eager ms':>10} {'compile ms':>11} {'copy ms':>9} {'eager/comp':>10}")
    def f(v):
        return "-" if v is None else f"{v:.3f}"
    for (dim, op, b, n), t in by.items():
        e, c, k = t.get("eager"), t.get("compile"), t.get("copy")
        ratio = "-" if not (e and c) else f"{e / c:.2f}x"
        print(f"{dim}D {op:<9} {b:>5} {n:>5} {f(e):>10} {f(c):>11} {f(k):>9} {ratio:>10}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="JSON path (rewritten after every group, so a timeout keeps what ran)")
    ap.add_argument("--device", default=None, help="cuda (default where available) or cpu")
    ap.add_argument("--check", action="store_true", help="run the self-check only and exit")
    ap.add_argument("--no-check", action="store_true", help="skip the start-up self-check")
    ap.add_argument("--quick", action="store_true", help=f"tiny sizes {QUICK_SIZES}")
    ap.add_argument("--sizes", help="BxN list, e.g. 1024x128,8192x1024 (default: B 1024,4096,8192 x N 128,512,1024)")
    ap.add_argument("--dims", default="2,3")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--impls", default="eager,compile",
                    help="eager, compile (default mode), compile_cg (mode reduce-overhead: CUDA graphs, "
                         "static shapes), compile_max (mode max-autotune-no-cudagraphs, static shapes)")
    ap.add_argument("--compile-mode", choices=sorted(COMPILE_MODES), default="per-n",
                    help="; ".join(f"{k}: {v}" for k, v in COMPILE_MODES.items()))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=None, help="timed calls (default: ~target-s worth, 10..100)")
    ap.add_argument("--target-s", type=float, default=0.3, help="seconds of timed calls per row by default")
    ap.add_argument("--cache-dir", help="TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR (reuse compiles across runs)")
    args = ap.parse_args()
    if args.cache_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(args.cache_dir, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(args.cache_dir, "triton")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    args.impls = [i for i in args.impls.split(",") if i]
    bad_impl = set(args.impls) - {"eager", "compile", "compile_cg", "compile_max"}
    ops = [o for o in args.ops.split(",") if o]
    dims = [int(d) for d in args.dims.split(",") if d]
    if bad_impl or set(ops) - set(OPS) or set(dims) - {2, 3}:
        ap.error(f"impls are eager,compile,compile_cg,compile_max; ops {','.join(OPS)}; dims 2,3")

    check = None if args.no_check else self_check(device)
    if args.check:
        return 0
    if not args.out:
        ap.error("--out is required unless --check")
    if args.sizes:
        sizes = parse_sizes(args.sizes)
    elif args.quick:
        sizes = list(QUICK_SIZES)
    else:
        sizes = [(b, n) for n in DEFAULT_N for b in DEFAULT_B]
    # Group by N: one compile serves every B of a group.
    groups = {}
    for b, n in sizes:
        groups.setdefault(n, []).append(b)
    torch._dynamo.config.cache_size_limit = max(64, torch._dynamo.config.cache_size_limit)
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = max(64, torch._dynamo.config.recompile_limit)
    sweep = Sweep(args, device)
    doc = header(args, device, check)
    t0 = time.perf_counter()

    def write():
        doc["compile_s"] = sweep.compile_log
        doc["wall_s"] = round(time.perf_counter() - t0, 1)
        doc["rows"] = sweep.rows
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)

    for dim in dims:
        for op in ops:
            for n, bs in groups.items():
                sweep.run_group(dim, op, n, bs)
                write()
    write()
    summary(sweep.rows)
    total = sum(c.get("seconds", 0) for c in sweep.compile_log)
    print(f"wall {time.perf_counter() - t0:.1f} s, of which compiling {total:.1f} s; rows {len(sweep.rows)}; "
          f"mismatches {sweep.bad}")
    return 1 if sweep.bad else 0


if __name__ == "__main__":
    sys.exit(main())
