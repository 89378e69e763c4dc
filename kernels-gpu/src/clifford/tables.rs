//! The algebra tables of Cl(2,0) and Cl(3,0), built at compile time from basis-blade bitmasks
//! (signs from counting swaps), and the algebras as types ([`Algebra`]: `Cl2`, `Cl3`), so that
//! kernels are compiled once per algebra with the tables folded to constants.

use super::{MAX_C, MAX_G, MAX_W};

/// One non-zero product of basis blades: `o[c] += (neg ? -1 : 1) w[p] x[i] y[k]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Term {
    pub i: usize,
    pub k: usize,
    pub c: usize,
    pub neg: bool,
    pub p: usize,
}

/// Everything the kernels need to know about one algebra.
#[derive(Debug)]
pub struct Tables {
    pub dim: u32,
    /// Components (2^dim).
    pub c: usize,
    /// Weights per feature (= paths).
    pub w: usize,
    /// Grades (dim + 1).
    pub g: usize,
    /// Basis blade of each component, as a bitmask of basis vectors (e13 = 0b101).
    pub blades: [u8; MAX_C],
    pub grade: [usize; MAX_C],
    /// Position of each component among the components of its grade.
    pub slot: [usize; MAX_C],
    /// `(x grade, output grade, y grade)` of each weight.
    pub paths: [(usize, usize, usize); MAX_W],
    /// Components of each path's output grade.
    pub cdim: [usize; MAX_W],
    /// Components of all earlier paths (FCGP: where a path's products start).
    pub offset: [usize; MAX_W],
    /// Sum of `cdim` (the signed per-path products of FCGP: 14 in 2D, 44 in 3D).
    pub total: usize,
    /// FCGP: paths per output grade.
    pub np: [usize; MAX_G],
    /// FCGP: position of each path among the paths of its output grade.
    pub qpos: [usize; MAX_W],
    /// FCGP: the paths grouped by output grade (grade 0's first, path order within a grade):
    /// the order of the weight matrices in the grouped copy the GEMMs read.
    pub gorder: [usize; MAX_W],
    /// FCGP: where each component's product rows start, in planes of `B * N` elements (the
    /// components before it, each counted `np` of its grade times).
    pub cstart: [usize; MAX_C],
    /// The `c * c` products, in (i, k) order.
    pub terms: [Term; MAX_C * MAX_C],
    /// `(path, component)` of each signed per-path product `offset[p] + slot[c]` (the inverse
    /// of that index; `total` entries used, sized for `for_terms!`'s constant indices).
    pub pc: [(usize, usize); MAX_C * MAX_C],
}

const fn popcount(m: u8) -> usize {
    m.count_ones() as usize
}

/// Sign of the product of basis blades `a b` in Cl(p,0): the parity of the swaps that sort
/// the concatenated vector lists (each vector of `a` passes the smaller vectors of `b`); equal
/// vectors then square to +1.
const fn blade_sign(a: u8, b: u8) -> bool {
    let mut swaps = 0;
    let mut x = a >> 1;
    while x != 0 {
        swaps += popcount(x & b);
        x >>= 1;
    }
    swaps % 2 == 1
}

const fn tables(dim: u32, blades: [u8; MAX_C], paths: [(usize, usize, usize); MAX_W]) -> Tables {
    let c = 1usize << dim;
    let g = dim as usize + 1;
    let w = match dim {
        2 => 10,
        _ => 20,
    };
    let mut grade = [0usize; MAX_C];
    let mut slot = [0usize; MAX_C];
    let mut per_grade = [0usize; MAX_G];
    let mut j = 0;
    while j < c {
        grade[j] = popcount(blades[j]);
        slot[j] = per_grade[grade[j]];
        per_grade[grade[j]] += 1;
        j += 1;
    }
    let mut cdim = [0usize; MAX_W];
    let mut offset = [0usize; MAX_W];
    let mut total = 0;
    let mut p = 0;
    while p < w {
        cdim[p] = per_grade[paths[p].1];
        offset[p] = total;
        total += cdim[p];
        p += 1;
    }
    let zero = Term { i: 0, k: 0, c: 0, neg: false, p: 0 };
    let mut terms = [zero; MAX_C * MAX_C];
    let mut t = 0;
    let mut i = 0;
    while i < c {
        let mut k = 0;
        while k < c {
            let m = blades[i] ^ blades[k];
            let mut oc = 0;
            while blades[oc] != m {
                oc += 1;
            }
            let key = (grade[i], grade[oc], grade[k]);
            let mut p = 0;
            while !(paths[p].0 == key.0 && paths[p].1 == key.1 && paths[p].2 == key.2) {
                p += 1;
            }
            terms[t] = Term { i, k, c: oc, neg: blade_sign(blades[i], blades[k]), p };
            t += 1;
            k += 1;
        }
        i += 1;
    }
    let mut pc = [(0usize, 0usize); MAX_C * MAX_C];
    let mut p = 0;
    while p < w {
        let mut cc = 0;
        while cc < c {
            if grade[cc] == paths[p].1 {
                pc[offset[p] + slot[cc]] = (p, cc);
            }
            cc += 1;
        }
        p += 1;
    }
    let (np, qpos, gorder, cstart) = grouped(c, g, w, &grade, &paths);
    Tables { dim, c, w, g, blades, grade, slot, paths, cdim, offset, total, np, qpos, gorder, cstart, terms, pc }
}

/// The FCGP's grouping of paths by output grade: `(np, qpos, gorder, cstart)` of [`Tables`].
#[allow(clippy::type_complexity)]
const fn grouped(
    c: usize,
    g: usize,
    w: usize,
    grade: &[usize; MAX_C],
    paths: &[(usize, usize, usize); MAX_W],
) -> ([usize; MAX_G], [usize; MAX_W], [usize; MAX_W], [usize; MAX_C]) {
    let mut np = [0usize; MAX_G];
    let mut qpos = [0usize; MAX_W];
    let mut gorder = [0usize; MAX_W];
    let mut at = 0;
    let mut j = 0;
    while j < g {
        let mut p = 0;
        while p < w {
            if paths[p].1 == j {
                qpos[p] = np[j];
                np[j] += 1;
                gorder[at] = p;
                at += 1;
            }
            p += 1;
        }
        j += 1;
    }
    let mut cstart = [0usize; MAX_C];
    let mut k = 1;
    while k < c {
        cstart[k] = cstart[k - 1] + np[grade[k - 1]];
        k += 1;
    }
    (np, qpos, gorder, cstart)
}

const PATHS_2D: [(usize, usize, usize); MAX_W] = {
    let mut p = [(0, 0, 0); MAX_W];
    let list =
        [(0, 0, 0), (0, 1, 1), (0, 2, 2), (1, 0, 1), (1, 1, 0), (1, 1, 2), (1, 2, 1), (2, 0, 2), (2, 1, 1), (2, 2, 0)];
    let mut j = 0;
    while j < list.len() {
        p[j] = list[j];
        j += 1;
    }
    p
};

/// Cl(2,0): `[1, e1, e2, e12]`.
pub static CL2: Tables = CL2_TABLES;
/// Cl(3,0): `[1, e1, e2, e3, e12, e13, e23, e123]`.
pub static CL3: Tables = CL3_TABLES;

// The tables as constants: `Algebra::T` points at these, so every crate that compiles the
// maths (the host's monomorphised CPU loops included, not only this crate's PTX entries) sees
// their values and folds the term loops to constants; a reference to the `static` was opaque
// outside this crate, and the CPU loops then indexed arrays in memory and did not vectorise.
const CL2_TABLES: Tables = tables(2, [0b00, 0b01, 0b10, 0b11, 0, 0, 0, 0], PATHS_2D);
const CL3_TABLES: Tables = tables(
    3,
    [0b000, 0b001, 0b010, 0b100, 0b011, 0b101, 0b110, 0b111],
    [
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
);

/// An algebra as a type, so that kernels are compiled once per algebra with its tables folded.
/// The counts are associated constants (not read from the tables) so that every loop over
/// components, weights or grades has a trip count known before LLVM decides what to unroll;
/// the arrays then stay in registers.
pub trait Algebra: Copy + Send + Sync + 'static {
    const T: &'static Tables;
    const C: usize;
    const W: usize;
    const G: usize;
    const TOTAL: usize;
}

#[derive(Clone, Copy, Debug)]
pub struct Cl2;
impl Algebra for Cl2 {
    const T: &'static Tables = &CL2_TABLES;
    const C: usize = 4;
    const W: usize = 10;
    const G: usize = 3;
    const TOTAL: usize = 14;
}

#[derive(Clone, Copy, Debug)]
pub struct Cl3;
impl Algebra for Cl3 {
    const T: &'static Tables = &CL3_TABLES;
    const C: usize = 8;
    const W: usize = 20;
    const G: usize = 4;
    const TOTAL: usize = 44;
}

/// The tables of Cl(`dim`,0), for `dim` 2 or 3.
pub fn tables_of(dim: u32) -> Option<&'static Tables> {
    match dim {
        2 => Some(&CL2),
        3 => Some(&CL3),
        _ => None,
    }
}
