//! Float64 reference of the Clifford layer ops, built from first principles: basis blades as
//! lists of basis vectors, their product by sorting the concatenated list (each swap flips the
//! sign) and cancelling equal neighbours (Cl(p,0): e_i e_i = +1), grade projection, and the
//! weighted sum over the path list in the order of the notes. Nothing here is taken from the
//! kernels' tables or from hand-expanded formulas.

/// Components of Cl(`dim`,0) in the layout order, as bitmasks of basis vectors
/// (`[1, e1, e2, e12]`, `[1, e1, e2, e3, e12, e13, e23, e123]`).
pub fn blades(dim: u32) -> Vec<u32> {
    match dim {
        2 => vec![0b00, 0b01, 0b10, 0b11],
        3 => vec![0b000, 0b001, 0b010, 0b100, 0b011, 0b101, 0b110, 0b111],
        _ => panic!("dimension {dim} not in the layer ops"),
    }
}

/// Grade of a blade: how many basis vectors it has.
pub fn grade(blade: u32) -> usize {
    blade.count_ones() as usize
}

/// The path list `(x grade, output grade, y grade)`, weight order, as in the notes.
pub fn paths(dim: u32) -> Vec<(usize, usize, usize)> {
    match dim {
        2 => vec![
            (0, 0, 0),
            (0, 1, 1),
            (0, 2, 2),
            (1, 0, 1),
            (1, 1, 0),
            (1, 1, 2),
            (1, 2, 1),
            (2, 0, 2),
            (2, 1, 1),
            (2, 2, 0),
        ],
        3 => vec![
            (0, 0, 0),
            (0, 1, 1),
            (0, 2, 2),
            (0, 3, 3),
            (1, 0, 1),
            (1, 1, 0),
            (1, 1, 2),
            (1, 2, 1),
            (1, 2, 3),
            (1, 3, 2),
            (2, 0, 2),
            (2, 1, 1),
            (2, 1, 3),
            (2, 2, 0),
            (2, 2, 2),
            (2, 3, 1),
            (3, 0, 3),
            (3, 1, 2),
            (3, 2, 1),
            (3, 3, 0),
        ],
        _ => panic!("dimension {dim} not in the layer ops"),
    }
}

/// Product of two basis blades: `(sign, blade)`. Writes both as ascending lists of basis
/// vectors, concatenates, bubble-sorts counting swaps, then removes equal adjacent pairs.
pub fn blade_product(a: u32, b: u32) -> (f64, u32) {
    let list = |m: u32| (0..32).filter(|i| m & (1 << i) != 0).collect::<Vec<u32>>();
    let mut v = list(a);
    v.extend(list(b));
    let mut swaps = 0;
    for i in 0..v.len() {
        for j in 0..v.len() - 1 - i {
            if v[j] > v[j + 1] {
                v.swap(j, j + 1);
                swaps += 1;
            }
        }
    }
    let mut out: Vec<u32> = Vec::new();
    for e in v {
        if out.last() == Some(&e) {
            out.pop(); // e e = +1 in Cl(p,0)
        } else {
            out.push(e);
        }
    }
    let sign = if swaps % 2 == 0 { 1.0 } else { -1.0 };
    (sign, out.iter().fold(0, |m, e| m | (1 << e)))
}

/// Index of `blade` in the layout order of Cl(`dim`,0).
pub fn index(dim: u32, blade: u32) -> usize {
    blades(dim).iter().position(|&b| b == blade).expect("a blade of the algebra")
}

/// `(sign, output component)` of every pair of components, from [`blade_product`], computed
/// once per dimension (the finite-difference tests call the forward thousands of times).
fn product_table(dim: u32) -> &'static [(f64, usize)] {
    static TABLES: [std::sync::OnceLock<Vec<(f64, usize)>>; 2] =
        [std::sync::OnceLock::new(), std::sync::OnceLock::new()];
    TABLES[dim as usize - 2].get_or_init(|| {
        let bl = blades(dim);
        bl.iter().flat_map(|&a| bl.iter().map(move |&b| blade_product(a, b))).map(|(s, m)| (s, index(dim, m))).collect()
    })
}

/// The (unweighted) geometric product of two multivectors.
pub fn gp(dim: u32, x: &[f64], y: &[f64]) -> Vec<f64> {
    let c = blades(dim).len();
    let table = product_table(dim);
    let mut o = vec![0.0; c];
    for i in 0..c {
        for k in 0..c {
            let (s, m) = table[i * c + k];
            o[m] += s * x[i] * y[k];
        }
    }
    o
}

/// The grade-`g` part of a multivector.
pub fn grade_part(dim: u32, x: &[f64], g: usize) -> Vec<f64> {
    blades(dim).iter().zip(x).map(|(&b, &v)| if grade(b) == g { v } else { 0.0 }).collect()
}

/// `sum over paths p of w_p <x_i y_k>_g`, and the same sum of absolute values of every term
/// (the scale rounding errors grow with).
pub fn weighted_product(dim: u32, x: &[f64], y: &[f64], w: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let c = blades(dim).len();
    let (mut o, mut mag) = (vec![0.0; c], vec![0.0; c]);
    for (p, &(gi, go, gk)) in paths(dim).iter().enumerate() {
        let part = grade_part(dim, &gp(dim, &grade_part(dim, x, gi), &grade_part(dim, y, gk)), go);
        let abs = grade_part(dim, &gp_abs(dim, &grade_part(dim, x, gi), &grade_part(dim, y, gk)), go);
        for j in 0..c {
            o[j] += w[p] * part[j];
            mag[j] += (w[p] * abs[j]).abs();
        }
    }
    (o, mag)
}

/// `gp` with every term's absolute value.
fn gp_abs(dim: u32, x: &[f64], y: &[f64]) -> Vec<f64> {
    let c = blades(dim).len();
    let table = product_table(dim);
    let mut o = vec![0.0; c];
    for i in 0..c {
        for k in 0..c {
            o[table[i * c + k].1] += (x[i] * y[k]).abs();
        }
    }
    o
}

/// Standard normal CDF (the erfc form keeps the lower tail accurate).
pub fn phi_cdf(s: f64) -> f64 {
    0.5 * libm::erfc(-s / std::f64::consts::SQRT_2)
}

/// The gate `x Phi(x0)`.
pub fn gate(x: &[f64]) -> Vec<f64> {
    let s = phi_cdf(x[0]);
    x.iter().map(|v| v * s).collect()
}

/// Component `c` of feature `f` of row `r` in a `(C, B, N)` tensor.
fn at(b: usize, n: usize, c: usize, r: usize, f: usize) -> usize {
    (c * b + r) * n + f
}

/// The gathered multivector of (row, feature).
fn gather(dim: u32, t: &[f64], b: usize, n: usize, r: usize, f: usize) -> Vec<f64> {
    (0..blades(dim).len()).map(|c| t[at(b, n, c, r, f)]).collect()
}

/// The reference forward: the output `(C, B, N)` and, per element, the scale of its rounding
/// error (the sum of |terms|, through the norm when there is one).
#[allow(clippy::too_many_arguments)]
pub fn sgp_forward(
    dim: u32,
    b: usize,
    n: usize,
    x: &[f64],
    y: &[f64],
    w: &[f64],
    normalize: bool,
) -> (Vec<f64>, Vec<f64>) {
    let nw = paths(dim).len();
    let raw = |r: usize, f: usize| {
        let (xg, yg) = (gate(&gather(dim, x, b, n, r, f)), gate(&gather(dim, y, b, n, r, f)));
        weighted_product(dim, &xg, &yg, &w[f * nw..(f + 1) * nw])
    };
    finish(dim, b, n, normalize, raw)
}

/// Norm over the features of each row and grade, applied to `raw(row, feature)`.
fn finish(
    dim: u32,
    b: usize,
    n: usize,
    normalize: bool,
    raw: impl Fn(usize, usize) -> (Vec<f64>, Vec<f64>),
) -> (Vec<f64>, Vec<f64>) {
    let bl = blades(dim);
    let c = bl.len();
    let (mut out, mut scale) = (vec![0.0; c * b * n], vec![0.0; c * b * n]);
    for r in 0..b {
        let row: Vec<_> = (0..n).map(|f| raw(r, f)).collect();
        let mut inv = vec![1.0; dim as usize + 1];
        if normalize {
            for (g, iv) in inv.iter_mut().enumerate() {
                let ss: f64 = row
                    .iter()
                    .map(|(o, _)| (0..c).filter(|&j| grade(bl[j]) == g).map(|j| o[j] * o[j]).sum::<f64>())
                    .sum();
                *iv = 1.0 / (ss / n as f64 + 1e-6).sqrt();
            }
        }
        for (f, (o, m)) in row.iter().enumerate() {
            for j in 0..c {
                let g = grade(bl[j]);
                out[at(b, n, j, r, f)] = o[j] * inv[g];
                scale[at(b, n, j, r, f)] = m[j] * inv[g];
            }
        }
    }
    (out, scale)
}

/// The reference FCGP forward: `o_c[b, m] = sum_p sum_n <gate(x)_i gate(y)_k>_g[b, n] W_p[n, m]`
/// with `w` `(W, N, N)`, then the same norm.
#[allow(clippy::too_many_arguments)]
pub fn fcgp_forward(
    dim: u32,
    b: usize,
    n: usize,
    x: &[f64],
    y: &[f64],
    w: &[f64],
    normalize: bool,
) -> (Vec<f64>, Vec<f64>) {
    let c = blades(dim).len();
    let ps = paths(dim);
    // Per (row, input feature, path) the unweighted path product, and its |terms|.
    let mut parts = vec![vec![(vec![0.0; c], vec![0.0; c]); ps.len()]; b * n];
    for r in 0..b {
        for f in 0..n {
            let (xg, yg) = (gate(&gather(dim, x, b, n, r, f)), gate(&gather(dim, y, b, n, r, f)));
            for (p, &(gi, go, gk)) in ps.iter().enumerate() {
                let (xi, yk) = (grade_part(dim, &xg, gi), grade_part(dim, &yg, gk));
                parts[r * n + f][p] =
                    (grade_part(dim, &gp(dim, &xi, &yk), go), grade_part(dim, &gp_abs(dim, &xi, &yk), go));
            }
        }
    }
    let raw = |r: usize, m: usize| {
        let (mut o, mut mag) = (vec![0.0; c], vec![0.0; c]);
        for p in 0..ps.len() {
            for f in 0..n {
                let wv = w[(p * n + f) * n + m];
                let (v, a) = &parts[r * n + f][p];
                for j in 0..c {
                    o[j] += wv * v[j];
                    mag[j] += (wv * a[j]).abs();
                }
            }
        }
        (o, mag)
    };
    finish(dim, b, n, normalize, raw)
}

/// Gradients of `loss(x, y, w)` with respect to each of its three arguments by central
/// differences with step `h` (one vector per argument), for the gradient tests.
pub fn central_differences(args: [&[f64]; 3], h: f64, loss: impl Fn(&[f64], &[f64], &[f64]) -> f64) -> [Vec<f64>; 3] {
    let grad = |which: usize| -> Vec<f64> {
        (0..args[which].len())
            .map(|i| {
                let at = |d: f64| {
                    let mut a = [args[0].to_vec(), args[1].to_vec(), args[2].to_vec()];
                    a[which][i] += d;
                    loss(&a[0], &a[1], &a[2])
                };
                (at(h) - at(-h)) / (2.0 * h)
            })
            .collect()
    };
    [grad(0), grad(1), grad(2)]
}
