//! Unit tests of `gemv.rs`: the K permutation against an emulation of the ISA's fragment layout,
//! the funnel shift, the plans and their coverage of every row and k at every width, the entry
//! names, the register and shared-memory budget of each variant.

extern crate std;
use super::*;
use std::vec::Vec;

#[test]
fn chunk_k_is_a_bijection_onto_the_chunk() {
    let mut seen = [false; CHUNK];
    for t in 0..4 {
        for j in 0..2 {
            for hi in 0..2 {
                for h in 0..2 {
                    let k = chunk_k(t, j, hi, h);
                    assert!(!seen[k], "k {k} fed twice");
                    seen[k] = true;
                }
            }
        }
    }
    assert!(seen.iter().all(|&s| s));
}

/// Emulates `mma.m16n8k16` from the PTX ISA's fragment layout (independently of
/// `a_fragment`/`b_fragment`) on the fragments the kernel builds from 16-byte vectors, and
/// checks the two `mma`s of a chunk give the exact 16 x 8 product over its 32 k.
#[test]
fn fragments_from_vectors_give_the_chunk_product() {
    // Small integers: exact in 16 bits (as f16 bit patterns are not needed, store as u16
    // "values" directly) and in f64 sums.
    let w = |r: usize, k: usize| ((r * 7 + k * 3) % 11) as u16;
    let x = |m: usize, k: usize| ((m * 5 + k * 13) % 9) as u16;
    let pair = |lo: u16, hi: u16| lo as u32 | (hi as u32) << 16;
    let vec8 = |f: &dyn Fn(usize) -> u16, k0: usize| [0, 1, 2, 3].map(|i| pair(f(k0 + 2 * i), f(k0 + 2 * i + 1)));
    let mut c = [[0i64; 8]; 16];
    for j in 0..2 {
        let mut a = [[0i64; 16]; 16];
        let mut b = [[0i64; 8]; 16];
        for l in 0..32 {
            let (g, t) = (l / 4, l % 4);
            let lo = vec8(&|k| w(g, k), 8 * t);
            let hi = vec8(&|k| w(g + 8, k), 8 * t);
            let xv = vec8(&|k| x(g, k), 8 * t);
            let fa = a_fragment(lo, hi, j);
            let fb = b_fragment(xv, j);
            let halves = |v: u32| [(v & 0xffff) as i64, (v >> 16) as i64];
            // ISA: a0 (g, 2t..), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..).
            for (r, (row, col)) in
                [(g, 2 * t), (g + 8, 2 * t), (g, 2 * t + 8), (g + 8, 2 * t + 8)].into_iter().enumerate()
            {
                let [p, q] = halves(fa[r]);
                a[row][col] = p;
                a[row][col + 1] = q;
            }
            // ISA: b0 (k 2t.., n g), b1 (k 2t+8.., n g).
            for (r, k) in [2 * t, 2 * t + 8].into_iter().enumerate() {
                let [p, q] = halves(fb[r]);
                b[k][g] = p;
                b[k + 1][g] = q;
            }
        }
        for (i, row) in c.iter_mut().enumerate() {
            for (n, v) in row.iter_mut().enumerate() {
                *v += (0..16).map(|s| a[i][s] * b[s][n]).sum::<i64>();
            }
        }
    }
    for (i, row) in c.iter().enumerate() {
        for (n, &v) in row.iter().enumerate() {
            let want: i64 = (0..CHUNK).map(|k| w(i, k) as i64 * x(n, k) as i64).sum();
            assert_eq!(v, want, "row {i} col {n}");
        }
    }
}

#[test]
fn funnel_extracts_any_8_element_window() {
    let elems: Vec<u16> = (0..16).map(|i| 100 + i as u16).collect();
    let word = |i: usize| elems[2 * i] as u32 | (elems[2 * i + 1] as u32) << 16;
    let (lo, hi) = ([word(0), word(1), word(2), word(3)], [word(4), word(5), word(6), word(7)]);
    for s in 0..8 {
        let got = funnel(lo, hi, s);
        for e in 0..8 {
            let v = (got[e / 2] >> (16 * (e % 2))) as u16;
            assert_eq!(v, elems[s + e], "s {s} element {e}");
        }
    }
}

#[test]
fn plans_cover_k_with_whole_chunks() {
    for k in [0, 1, 7, 31, 32, 33, 64, 777, 4096, 4099, 65536] {
        for req in [0, 1, 2, 3, 7, 64, 100] {
            let p = SmallMPlan::new(100, k, req);
            assert!(p.kslice.is_multiple_of(CHUNK) && p.kslice > 0);
            assert!(p.ksplit >= 1 && p.ksplit <= MAX_KSPLIT.max(1));
            assert!(p.ksplit * p.kslice >= k, "k {k} req {req}: {p:?}");
            assert!((p.ksplit - 1) * p.kslice < k.max(1), "empty last slice: k {k} req {req}: {p:?}");
        }
    }
}

#[test]
fn heuristic_splits_only_when_slabs_are_few() {
    assert_eq!(SmallMPlan::heuristic_ksplit(4096, 4096, 132, 1, 2), 1);
    let s = SmallMPlan::heuristic_ksplit(1024, 4096, 132, 1, 2);
    assert!(s > 1 && 64 * s <= 2 * 132 && 64 * (s + 1) > 2 * 132, "{s}");
    assert_eq!(SmallMPlan::heuristic_ksplit(1023, 777, 132, 1, 2), 4, "25 chunks: 4 slices of 7");
    assert_eq!(SmallMPlan::heuristic_ksplit(2000, 3001, 132, 1, 2), 2, "125 slabs: 2 slices");
    assert_eq!(SmallMPlan::heuristic_ksplit(16, 64, 132, 1, 2), 1, "K too short to split");
    // One block per SM (the widest variants): half the slices, still one wave.
    assert_eq!(SmallMPlan::heuristic_ksplit(4096, 4096, 132, 2, 1), 1, "128 blocks of 2 slabs");
    assert_eq!(SmallMPlan::heuristic_ksplit(2048, 4096, 132, 2, 1), 2, "64 blocks, one per SM: 2 slices");
}

/// Blocks of any width, interleaved or not: every row of a block's slabs starts at the same
/// 16-byte offset when interleaved (whatever the base and leading dimension), every row
/// belongs to exactly one (block, slab, column), and walking each slice's chunks in the
/// block's frame visits every k of the row exactly once.
#[test]
fn blocks_cover_every_row_and_k_once_and_interleaved_ones_share_one_shift() {
    for (n, k, ld, base) in [
        (1usize, 4099usize, 4099usize, 256usize),
        (129, 777, 777, 258),
        (300, 33, 40, 2),
        (17, 5, 9, 14),
        (40, 4095, 4095, 6),
        (1000, 64, 64, 0),
    ] {
        for inter in [true, false] {
            for width in WIDTHS {
                for req in [1, 3, 64] {
                    let p = SmallMPlan::with_rows(n, k, req, inter, width);
                    assert!(!inter || p.slabs.is_multiple_of(INTERLEAVE));
                    let mut rows = std::vec![0u32; n];
                    let mut ks = std::vec![0u32; k * n];
                    for block in 0..p.slabs {
                        let row_of = |r: usize, nl: usize| slab_row(block_slab(block, r, width, inter), nl, inter);
                        let s = if inter { row_shift(base, row_of(0, 0), ld) } else { 0 };
                        for r in 0..width {
                            for nl in 0..SLAB {
                                let row = row_of(r, nl);
                                if row >= n {
                                    continue;
                                }
                                if inter {
                                    assert_eq!(row_shift(base, row, ld), s, "n {n} ld {ld} block {block} slab {r}");
                                }
                                rows[row] += 1;
                                for ksl in 0..p.ksplit {
                                    let kb0 = ksl * p.kslice;
                                    let kb1 = (kb0 + p.kslice).min(k + s);
                                    let mut f = kb0;
                                    while f < kb1 {
                                        for e in 0..8 {
                                            if f + e >= s && f + e - s < kb1 - s && f + e - s < k {
                                                ks[row * k + f + e - s] += 1;
                                            }
                                        }
                                        f += 8;
                                    }
                                }
                            }
                        }
                    }
                    assert!(rows.iter().all(|&c| c == 1), "n {n} width {width} inter {inter}: {rows:?}");
                    assert!(ks.iter().all(|&c| c == 1), "n {n} k {k} req {req} width {width} inter {inter}");
                }
            }
        }
    }
}

#[test]
fn widths_keep_loads_and_reduction_inside_the_budget() {
    for g in M_GROUPS {
        for w in WIDTHS.into_iter().filter(|&w| width_compiled(g, w)) {
            let u = unroll(g, w);
            assert!((1..=4).contains(&u));
            // Loaded vectors plus accumulators stay under the registers a thread gets.
            let regs = u * (8 * w + 4 * g) + 4 * g * w;
            let cap = 65536 / (THREADS as usize * blocks_per_sm(g, w) as usize);
            assert!(regs + 24 <= cap, "g {g} w {w}: {regs} of {cap}");
            // Two blocks fit the SM's shared memory where the variant asks for two.
            assert!(smem_bytes(g, w) * blocks_per_sm(g, w) as usize <= 227 * 1024, "g {g} w {w}");
        }
    }
    assert_eq!([unroll(1, 1), unroll(2, 1), unroll(4, 1), unroll(8, 1)], [4, 4, 2, 1]);
    assert_eq!(heuristic_width(1, 4096, 4096), 1);
    assert_eq!(heuristic_width(4, 8192, 8192), 1);
    assert_eq!(heuristic_width(8, 8191, 4099), 2);
    assert_eq!(heuristic_width(8, 1023, 777), 1, "a small weight: one slab");
    for g in M_GROUPS {
        for n in [1, 100, 4096, 1 << 20] {
            assert!(width_compiled(g, heuristic_width(g, n, 4096)), "g {g} n {n}");
        }
    }
}

#[test]
fn names_match_their_variant() {
    let mut all = Vec::new();
    for d in [DType::Bf16, DType::F16] {
        for o in [d, DType::F32] {
            for g in M_GROUPS {
                for v in [true, false] {
                    for w in WIDTHS {
                        let Some(n) = entry_name(d, o, g, v, w) else {
                            assert!((!v && w > 1) || !width_compiled(g, w), "{d:?} {o:?} g {g} w {w}");
                            continue;
                        };
                        let tail = if w > 1 { std::format!("_w{w}") } else { std::string::String::new() };
                        let vs = if v { "v" } else { "s" };
                        let want = std::format!("ft_gemv_{}_{}_g{g}_{vs}{tail}", d.name(), o.name());
                        assert_eq!(n, want);
                        assert_eq!(variant_of(n), Some((g, w)));
                        all.push(n);
                    }
                }
            }
        }
    }
    assert_eq!(all.len(), NAMES.len());
    assert_eq!(entry_name(DType::F32, DType::F32, 1, true, 1), None);
    assert_eq!(entry_name(DType::Bf16, DType::F16, 1, true, 1), None);
    assert_eq!(launch_bounds("ft_gemv_bf16_bf16_g8_v_w2"), Some((THREADS, 1)));
    assert_eq!(launch_bounds("ft_gemv_bf16_bf16_g4_v"), Some((THREADS, 2)));
    assert_eq!(launch_bounds("ft_gemv_bf16_bf16_g1_v_w4"), Some((THREADS, 2)));
    assert_eq!(entry_name(DType::Bf16, DType::Bf16, 8, true, 4), None);
    assert_eq!(launch_bounds("ft_gemm_x"), None);
}

#[test]
fn workspace_counts_counters_and_partials() {
    let p = SmallMPlan::new(1000, 4096, 4);
    assert_eq!(p.workspace_bytes(3, 1000, 2), Some(p.counter_bytes(2) + 4 * 3 * 1000 * 2 * p.ksplit));
    assert_eq!(SmallMPlan::new(1000, 4096, 1).workspace_bytes(3, 1000, 1), Some(0));
    assert_eq!(p.workspace_bytes(usize::MAX, 2, 1), None);
}
