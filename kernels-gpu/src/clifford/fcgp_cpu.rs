//! The CPU backend's row loops of the FCGP forward: the per-path products in the grouped
//! layout of [`prod_at`] and the norm of the GEMM results, in lane blocks as the other CPU row
//! loops (`cpu.rs`, whose widening, lane and row helpers they share).
#![allow(clippy::needless_range_loop)]

use super::cpu::{BLOCKS_PER_SUM, LANES, blocked_at, fold_lanes, lane, store_lanes, widen_block, write_row};
use super::{Algebra, MAX_C, MAX_G, accumulate_grades, each_product, gate, path_products, prod_at};
use crate::element::Element;
use crate::elementwise::{PortableWiden, Widen};

/// CPU path of the FCGP products for whole rows: `x[c]`, `y[c]` hold component `c` of the
/// same rows (`rows * n` each); `prod[c]` holds component `c`'s product rows of the same batch
/// rows in the grouped layout (`rows * np * ld`, [`prod_at`]; the padding is zeroed).
#[inline(always)]
pub fn fcgp_products_rows<A: Algebra, T: Element, V: Widen<T>>(
    conv: V,
    x: &[&[T]],
    y: &[&[T]],
    prod: &mut [&mut [T]],
    n: usize,
    ld: usize,
) {
    let rows = x[0].len().checked_div(n).unwrap_or(0);
    let (mut xs, mut ys) = ([[0.0f32; LANES]; MAX_C], [[0.0f32; LANES]; MAX_C]);
    let mut pb = [[0.0f32; LANES]; 44];
    for r in 0..rows {
        for f0 in (0..n).step_by(LANES) {
            let m = LANES.min(n - f0);
            widen_block(conv, x, A::C, r * n + f0, m, &mut xs);
            widen_block(conv, y, A::C, r * n + f0, m, &mut ys);
            for l in 0..LANES {
                let (mut xg, mut yg) = (lane(&xs, A::C, l), lane(&ys, A::C, l));
                gate::<A>(&mut xg);
                gate::<A>(&mut yg);
                let pr = path_products::<A>(&xg, &yg);
                for s in 0..A::TOTAL {
                    pb[s][l] = pr[s];
                }
            }
            each_product::<A>(|s, p, c| {
                let at = prod_at::<A>(p, c, r, f0, ld);
                store_lanes(conv, &pb[s], &mut prod[c][at..at + m]);
            });
        }
        each_product::<A>(|_, p, c| {
            let at = prod_at::<A>(p, c, r, n, ld);
            prod[c][at..at + ld - n].fill(T::from_f32(0.0));
        });
    }
}

/// CPU path of the FCGP norm for whole rows: `d[c]` are the GEMM results (component `c`'s
/// un-normalised output, f32, rows of `ld`) of the rows `out[c]` (rows of `n`) receives.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn fcgp_assemble_rows<A: Algebra, T: Element, V: Widen<T>>(
    conv: V,
    d: &[&[f32]],
    out: &mut [&mut [T]],
    n: usize,
    ld: usize,
    normalize: bool,
    scratch: &mut [f32],
) {
    let rows = out[0].len().checked_div(n).unwrap_or(0);
    let mut ob = [[0.0f32; LANES]; MAX_C];
    let mut acc = [[0.0f32; LANES]; MAX_G];
    for r in 0..rows {
        let mut ss = [0.0f32; MAX_G];
        for (b, f0) in (0..n).step_by(LANES).enumerate() {
            let m = LANES.min(n - f0);
            widen_block(PortableWiden, d, A::C, r * ld + f0, m, &mut ob);
            for l in 0..LANES {
                let o = lane(&ob, A::C, l);
                let mut sq = [0.0f32; MAX_G];
                accumulate_grades::<A>(&o, &mut sq);
                for g in 0..A::G {
                    acc[g][l] += sq[g];
                }
            }
            for c in 0..A::C {
                let at = blocked_at(A::C, c, f0);
                scratch[at..at + LANES].copy_from_slice(&ob[c]);
            }
            if (b + 1) % BLOCKS_PER_SUM == 0 || f0 + LANES >= n {
                fold_lanes::<A>(&mut acc, &mut ss);
            }
        }
        write_row::<A, T, V>(conv, scratch, out, (r, n), normalize.then_some(&ss), None);
    }
}
