//! Tests of the CPU row loops (`clifford/cpu.rs`): the lane sums, and the streamed forward
//! against the direct one.
extern crate std;

use std::vec::Vec;

use half::bf16;

use super::*;
use crate::arch::Portable;
use crate::elementwise::PortableWiden;

type A = super::super::Cl3;

#[test]
fn lane_sum_adds_every_lane() {
    // Integers below 2^24: every order of summation is exact, so any lane left out or
    // counted twice shows.
    let mut v = [0.0f32; LANES];
    for (l, x) in v.iter_mut().enumerate() {
        *x = (l * l + 3) as f32;
    }
    let want: f32 = (0..LANES).map(|l| (l * l + 3) as f32).sum();
    assert_eq!(lane_sum(&v), want);
    let mut acc = [v; MAX_G];
    let mut sums = [1.0f32; MAX_G];
    fold_lanes::<A>(&mut acc, &mut sums);
    assert_eq!(sums, [want + 1.0; MAX_G]);
    assert!(acc.iter().all(|a| a.iter().all(|&x| x == 0.0)));
}

/// `C` planes of `rows * n` deterministic values, shifted by `k`.
fn planes<T: Element>(len: usize, k: usize) -> Vec<Vec<T>> {
    let val = |i: usize, c: usize| T::from_f32(((i * 37 + (c + k) * 11) % 23) as f32 / 7.0 - 1.5);
    (0..A::C).map(|c| (0..len).map(|i| val(i + k, c)).collect()).collect()
}

fn views<T>(p: &[Vec<T>]) -> Vec<&[T]> {
    p.iter().map(|v| &v[..]).collect()
}

fn bits<T: Element>(p: &[Vec<T>]) -> Vec<u32> {
    p.iter().flatten().map(|v| v.to_f32().to_bits()).collect()
}

/// Weights of `n` features as [`weights_by_path`] lays them out.
fn weights<T: Element>(n: usize) -> Vec<f32> {
    let w: Vec<T> = (0..n * A::W).map(|i| T::from_f32(((i * 13) % 17) as f32 / 9.0 - 0.8)).collect();
    let mut wt = std::vec![0.0f32; A::W * padded(n)];
    weights_by_path::<A, T>(&w, n, &mut wt);
    wt
}

/// Rows that do and do not fill whole lane blocks and cache lines.
const SHAPES: [(usize, usize); 5] = [(1, 3), (63, 2), (64, 3), (777, 3), (1024, 2)];

/// The forward through the row staging and streaming stores writes the same bits as the one
/// that stores its blocks directly, in f32 and bf16.
#[test]
fn streamed_forward_equals_the_direct_one() {
    fn run<T: Element>(n: usize, rows: usize) {
        let (x, y, wt) = (planes::<T>(rows * n, 0), planes::<T>(rows * n, 5), weights::<T>(n));
        let mut outs = [0, 1].map(|_| std::vec![std::vec![T::from_f32(f32::NAN); rows * n]; A::C]);
        for (k, out) in outs.iter_mut().enumerate() {
            let mut o: Vec<&mut [T]> = out.iter_mut().map(|v| &mut v[..]).collect();
            let mut scratch = std::vec![0.0f32; A::C * padded(n)];
            let mut stage = std::vec![T::from_f32(0.0); n];
            let stage = (k == 1).then_some(&mut stage[..]);
            let (xs, ys) = (views(&x), views(&y));
            fwd_rows::<A, T, _, _>(Portable, PortableWiden, &xs, &ys, &wt, &mut o, n, true, &mut scratch, stage);
        }
        assert_eq!(bits(&outs[0]), bits(&outs[1]), "n {n}, rows {rows}");
        assert!(outs[1].iter().flatten().all(|v| v.to_f32().is_finite()));
    }
    for (n, rows) in SHAPES {
        run::<f32>(n, rows);
        run::<bf16>(n, rows);
    }
}
