//! The compiled launch variants of the Clifford row kernels (vector width, features per
//! thread, weights streamed or kept) and the entry-point names built from them, shared by the
//! PTX entries (`entry/clifford*.rs`) and the host's launch code.

use crate::element::DType;

/// A compiled variant of the row kernels (forward, backward and FCGP assembly): `vec` = four
/// consecutive features per access (16 bytes of f32, 8 of f16/bf16; needs N % 4 == 0 and
/// aligned pointers), `vpt` = accesses per thread per row kept in registers (the forward and
/// backward keep the same features, and their weights, for every row), 0 = two passes
/// (statistics first, then recompute and write: any N). `stream_w` (forward,
/// [`FWD_STREAM_VARIANTS`]; the backward's meaning is in [`BWD_VARIANTS`]): the weights are not kept in registers but re-read for every row
/// (they stay in L1/L2: N W floats shared by every block of an SM), which frees 10 (2D) or 20
/// (3D) registers per feature, so larger teams fit in a block and a row stays in registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowVariant {
    pub vec: bool,
    pub vpt: u32,
    pub stream_w: bool,
}

impl RowVariant {
    /// Features per access.
    pub const fn lanes(self) -> usize {
        if self.vec { 4 } else { 1 }
    }

    /// The same variant with its weights kept in registers (the FCGP assembly has no weights).
    pub const fn keeping_w(self) -> RowVariant {
        RowVariant { stream_w: false, ..self }
    }

    /// `v4_p1`, `v1_p0`, ...
    pub fn suffix(self) -> (&'static str, u32) {
        (if self.vec { "v4" } else { "v1" }, self.vpt)
    }

    /// Whether this backward variant is the split form ([`BWD_SPLIT`]; `vec` is not
    /// compiled for it).
    pub const fn is_split(self) -> bool {
        self.vpt == 0 && self.stream_w
    }

    /// Most features one row can have with `team` threads per row (None: any).
    pub fn max_features(self, team: usize) -> Option<usize> {
        (self.vpt > 0).then(|| team * self.vpt as usize * self.lanes())
    }
}

/// Every row variant compiled into the PTX (see `entry/clifford.rs`, `each_row_variant!`).
pub const ROW_VARIANTS: [RowVariant; 6] = [
    RowVariant { vec: true, vpt: 1, stream_w: false },
    RowVariant { vec: true, vpt: 0, stream_w: false },
    RowVariant { vec: false, vpt: 1, stream_w: false },
    RowVariant { vec: false, vpt: 2, stream_w: false },
    RowVariant { vec: false, vpt: 4, stream_w: false },
    RowVariant { vec: false, vpt: 0, stream_w: false },
];

/// The forward-only variants whose weights are re-read per row (`stream_w`; see `RowVariant`):
/// `ft_clifford_fwd_d{2,3}_{dt}_{v}_p{n}s` (`entry/clifford_fwd.rs`, `each_stream_variant!`).
pub const FWD_STREAM_VARIANTS: [RowVariant; 4] = [
    RowVariant { vec: false, vpt: 1, stream_w: true },
    RowVariant { vec: false, vpt: 2, stream_w: true },
    RowVariant { vec: false, vpt: 4, stream_w: true },
    RowVariant { vec: true, vpt: 1, stream_w: true },
];

/// Every forward variant: [`ROW_VARIANTS`] and [`FWD_STREAM_VARIANTS`].
pub fn fwd_variants() -> impl Iterator<Item = RowVariant> {
    ROW_VARIANTS.into_iter().chain(FWD_STREAM_VARIANTS)
}

/// The backward variants that keep a row in registers (`entry/clifford_bwd.rs`,
/// `ft_clifford_bwd_d{2,3}_{dt}_{v}_p{n}`, with `stream_w` `..._p{n}s`: the weights and each
/// team's weight gradient in shared memory instead of registers); a backward config with
/// `vpt` = 0 runs the two-pass kernels (`ft_clifford_bwd_d{2,3}_{dt}_{v4|v1}[_g]`) instead.
pub const BWD_VARIANTS: [RowVariant; 8] = [
    RowVariant { vec: true, vpt: 1, stream_w: false },
    RowVariant { vec: false, vpt: 1, stream_w: false },
    RowVariant { vec: false, vpt: 2, stream_w: false },
    RowVariant { vec: false, vpt: 4, stream_w: false },
    RowVariant { vec: true, vpt: 1, stream_w: true },
    RowVariant { vec: false, vpt: 1, stream_w: true },
    RowVariant { vec: false, vpt: 2, stream_w: true },
    RowVariant { vec: false, vpt: 4, stream_w: true },
];

/// The split backward (`entry/clifford_bwd_split.rs`): a config with `vpt` = 0 and
/// `stream_w` runs `ft_clifford_bwd_stats_d{2,3}_{dt}` (the norm's per-row coefficients; only
/// with the norm), then `ft_clifford_bwd_feat_d{2,3}_{dt}` (one feature per thread for a chunk
/// of rows: the config's `threads` features per block). One-feature accesses only: 4-feature
/// statistics were slower at every point of the H200 sweep (3D B4096 N1024 0.529 against 0.436
/// ms fwd+bwd, bench/results/clifsplit-*/run2).
pub const BWD_SPLIT: [RowVariant; 1] = [RowVariant { vec: false, vpt: 0, stream_w: true }];

/// f32 per row of the split backward's norm coefficients (`inv` at `0..G`, `k` at
/// `MAX_G..MAX_G + G`).
pub const SPLIT_COEFS: usize = 2 * super::MAX_G;

/// The split backward's entry points `(statistics, features)` for `dim` and `dtype`.
pub fn split_entry_names(dim: u32, dtype: DType) -> (crate::gemm::EntryName, crate::gemm::EntryName) {
    let d = if dim == 2 { "2_" } else { "3_" };
    let mut s = crate::gemm::EntryName::new();
    s.push("ft_clifford_bwd_stats_d");
    s.push(d);
    s.push(dtype.name());
    let mut f = crate::gemm::EntryName::new();
    f.push("ft_clifford_bwd_feat_d");
    f.push(d);
    f.push(dtype.name());
    (s, f)
}

/// Launch bounds `(threads per block, blocks per SM)` of the shared-memory one-pass backward
/// entries (`..._p{n}s`) for the PTX build (`None` for other names): a cap on ptxas's
/// registers so that the team of a 1,024-feature row fits one block — one feature per thread:
/// 1,024 threads (64 registers); two: 512 (128); four: 256 threads, two blocks per SM in 2D
/// (128), one in 3D (its row alone takes 96 registers). Without them ptxas spent 128-255.
pub fn launch_bounds(entry: &str) -> Option<(u32, u32)> {
    let rest = entry.strip_prefix("ft_clifford_bwd_d")?;
    if !rest.ends_with('s') {
        return None;
    }
    let d2 = rest.starts_with('2');
    if rest.ends_with("_v1_p1s") {
        Some((1024, 1))
    } else if rest.ends_with("_v1_p2s") {
        Some((512, 1))
    } else if rest.ends_with("_v1_p4s") || rest.ends_with("_v4_p1s") {
        Some((256, if d2 { 2 } else { 1 }))
    } else {
        None
    }
}

/// The entry point of the one-pass backward `v` (`vpt` > 0): `ft_clifford_bwd_d{dim}_{dt}_{v4|v1}_p{n}[s]`.
pub fn bwd_entry_name(dim: u32, dtype: DType, v: RowVariant) -> crate::gemm::EntryName {
    let mut n = crate::gemm::EntryName::new();
    n.push(if dim == 2 { "ft_clifford_bwd_d2_" } else { "ft_clifford_bwd_d3_" });
    n.push(dtype.name());
    n.push(if v.vec { "_v4_p" } else { "_v1_p" });
    n.push(["0", "1", "2", "3", "4"][(v.vpt as usize).min(4)]);
    if v.stream_w {
        n.push("s");
    }
    n
}

/// Accesses per thread (one feature each) of the compiled cluster backward entries
/// (`entry/clifford_bwd_cluster.rs`, sm_90a builds only): `ft_clifford_bwd_d{2,3}_{dt}_v1_p{n}c`,
/// a row shared by the blocks of a thread-block cluster.
pub const BWD_CLUSTER_VPT: [u32; 2] = [1, 2];

/// Most blocks in a cluster of the cluster backward: the H100's non-portable cluster size
/// (clusters past [`PORTABLE_CLUSTER`] blocks need the function's opt-in, which the launch
/// sets, and a device that has them: `cuOccupancyMaxActiveClusters` says 0 where not).
pub const MAX_CLUSTER: u32 = 16;

/// The cluster size every device with clusters runs without an opt-in.
pub const PORTABLE_CLUSTER: u32 = 8;

/// Bytes of one block's slot of row sums in the cluster backward (`2 * MAX_G` f32); the
/// kernel's dynamic shared memory is the team-sum scratch and two slots.
pub const CLUSTER_SLOT_BYTES: u32 = (2 * super::MAX_G * 4) as u32;

/// The entry point of the cluster backward with `vpt` accesses a thread:
/// `ft_clifford_bwd_d{dim}_{dt}_v1_p{vpt}c`.
pub fn bwd_cluster_entry_name(dim: u32, dtype: DType, vpt: u32) -> crate::gemm::EntryName {
    let mut n = bwd_entry_name(dim, dtype, RowVariant { vec: false, vpt, stream_w: false });
    n.push("c");
    n
}

/// The ops of this family, as named in entry points and bench rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CliffordKernel {
    /// `ft_clifford_fwd_d{2,3}_{dt}_{v}_p{n}`: gate, product, norm.
    Forward,
    /// `ft_clifford_bwd_d{2,3}_{dt}_{v4|v1}`: dx, dy and per-block dw partials.
    Backward,
    /// `ft_clifford_dw_reduce_{dt}`: sums the dw partials.
    DwReduce,
    /// `ft_clifford_fcgp_prod_d{2,3}_{dt}`: the signed per-path products.
    FcgpProducts,
    /// `ft_clifford_fcgp_asm_d{2,3}_{dt}_{v}_p{n}`: assembly of the GEMM results and norm.
    FcgpAssemble,
}

/// Entry-point name of a row kernel (forward or FCGP assembly) without allocation.
pub fn row_entry_name(kernel: CliffordKernel, dim: u32, dtype: DType, v: RowVariant) -> crate::gemm::EntryName {
    let mut n = crate::gemm::EntryName::new();
    n.push(match kernel {
        CliffordKernel::FcgpAssemble => "ft_clifford_fcgp_asm_d",
        _ => "ft_clifford_fwd_d",
    });
    n.push(if dim == 2 { "2_" } else { "3_" });
    n.push(dtype.name());
    n.push(if v.vec { "_v4_p" } else { "_v1_p" });
    n.push(["0", "1", "2", "3", "4"][(v.vpt as usize).min(4)]);
    if v.stream_w && matches!(kernel, CliffordKernel::Forward) {
        n.push("s");
    }
    n
}
