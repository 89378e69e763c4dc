//! [`CliffordConfig`]: how the Clifford row kernels and the backward are launched, the
//! built-in heuristic, validation, and the space the tuner sweeps.

use ferrotune_kernels::clifford::{
    BWD_CLUSTER_VPT, BWD_VARIANTS, MAX_CLUSTER, PORTABLE_CLUSTER, RowVariant, fwd_variants,
};

use super::{Clifford, OP};
use crate::DType;
use crate::device::DeviceInfo;
use crate::error::{Error, Result};

/// Registers per thread of a Clifford kernel (ptxas for sm_90a at 33a56b5, the most of f32,
/// f16 and bf16 rounded up to 8, except the forward's 2D `v1_p4` and 3D `v1_p2`: f32's and
/// bf16's 128, f16's in [`registers_any_dtype`]): the forward / one-pass backward of
/// `variant`, or the two-pass backward (`vpt` = 0). A guide for the heuristic's blocks per SM;
/// launches are fitted to the compiled kernel's own limit at run time ([`CliffordConfig::fit`]).
fn registers(dim: u32, v: RowVariant, backward: bool) -> u32 {
    if backward && v.is_split() {
        // The split backward's feature kernel (its statistics kernel takes fewer).
        return if dim == 2 { 80 } else { 160 };
    }
    if backward && v.stream_w && v.vpt > 0 {
        // The one-pass backward with the weights and their gradient in shared memory.
        return match (dim, v.vec, v.vpt) {
            (2, false, 1) => BWD_SMEM_REGS[0],
            (2, false, 2) => BWD_SMEM_REGS[1],
            (2, false, _) => BWD_SMEM_REGS[2],
            (2, true, _) => BWD_SMEM_REGS[3],
            (_, false, 1) => BWD_SMEM_REGS[4],
            (_, false, 2) => BWD_SMEM_REGS[5],
            (_, false, _) => BWD_SMEM_REGS[6],
            (_, true, _) => BWD_SMEM_REGS[7],
        };
    }
    if v.stream_w {
        return match (dim, v.vec, v.vpt) {
            (2, false, 1) => 48,
            (2, false, 2) => 72,
            (2, false, _) => 128,
            (2, true, _) => 128,
            (_, false, 1) => 96,
            (_, false, 2) => 128,
            (_, false, _) => 248,
            (_, true, _) => 255,
        };
    }
    match (dim, backward, v.vec, v.vpt) {
        (2, false, false, 0) => 32,
        (2, false, false, 1) => 56,
        (2, false, false, 2) => 88,
        (2, false, true, 0) => 64,
        (2, false, false, 4) => 128,
        (2, false, _, _) => 160,
        (2, true, false, 0) => 80,
        (2, true, false, 1) => 80,
        (2, true, false, 2) => 128,
        (2, true, true, 0) => 128,
        (2, true, _, _) => 255,
        (_, false, false, 0) => 56,
        (_, false, false, 1) => 104,
        (_, false, true, 0) => 128,
        (_, false, false, 2) => 128,
        (_, false, _, _) => 255,
        (_, true, false, 0) => 168,
        (_, true, _, _) => 255,
    }
}

/// Registers of the `_p{n}s` backward entries: 2D v1_p1s, v1_p2s, v1_p4s, v4_p1s, then the
/// same for 3D — the caps of their launch bounds (`ferrotune_kernels::clifford::launch_bounds`).
const BWD_SMEM_REGS: [u32; 8] = [64, 128, 128, 128, 64, 128, 255, 255];

/// [`registers`] for every dtype: f16's kernels of the forward's 2D `v1_p4` and 3D `v1_p2`
/// need 153 and 156 (f32's and bf16's 128). The tuner's space offers only blocks that every
/// dtype's kernel fits; the heuristic takes f32's count (its f16 choice is fitted at run time).
fn registers_any_dtype(dim: u32, v: RowVariant, backward: bool) -> u32 {
    match (dim, backward, v.vec, v.vpt, v.stream_w) {
        (2, false, false, 4, false) | (3, false, false, 2, false) => 160,
        _ => registers(dim, v, backward),
    }
}

/// Threads one SM can hold of a kernel with `regs` registers (65,536 registers, 2,048
/// threads), in whole warps.
fn threads_for(regs: u32) -> u32 {
    (65536 / (regs.div_ceil(8) * 8 * 32) * 32).min(2048)
}

/// Threads one SM can hold of that kernel.
fn sm_threads(dim: u32, v: RowVariant, backward: bool) -> u32 {
    threads_for(registers(dim, v, backward))
}

/// Most threads one block can have with `sm` threads an SM: a power of two.
fn pow2_block(sm: u32) -> u32 {
    1 << (31 - sm.min(1024).leading_zeros())
}

/// Most threads one block of that kernel can have (f32's registers).
fn block_limit(dim: u32, v: RowVariant, backward: bool) -> u32 {
    pow2_block(sm_threads(dim, v, backward))
}

/// How the row kernels (forward, FCGP assembly) and the backward are launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CliffordConfig {
    /// Threads per block: a power of two in 32..=1024.
    pub threads: u32,
    /// Batch rows a block works on at once (the batch block): a power of two dividing
    /// `threads`; each row gets a team of `threads / rows_per_block` threads covering its N
    /// features.
    pub rows_per_block: u32,
    /// Accesses of 4 features or 1, and how many a thread keeps in registers per row (0: two
    /// passes). A compiled variant (`ROW_VARIANTS`, `FWD_STREAM_VARIANTS`); the backward uses only `vec`.
    pub variant: RowVariant,
    /// 0: one block per group of rows. k > 0: at most k blocks per SM, each looping over rows.
    pub blocks_per_sm: u32,
    /// Batch rows per rayon task on the CPU backend.
    pub cpu_rows: usize,
    /// Blocks of a thread-block cluster sharing one row (the backward's cluster form,
    /// `ft_clifford_bwd_*_v1_p{n}c`, sm_90a; [`BWD_CLUSTER_VPT`]); 1 everywhere else.
    pub cluster: u32,
}

impl CliffordConfig {
    /// The built-in choice for the forward of `p`: the first of [`Self::forward_candidates`]
    /// whose team fits in one block of its variant (register counts: ptxas's for sm_90, see
    /// `registers`; a launch that finds fewer threads allowed takes the next candidate,
    /// [`super::fused_gelu_sgp_norm`]).
    pub fn heuristic(p: &Clifford, dtype: DType, device: Option<&DeviceInfo>) -> CliffordConfig {
        let max_threads = device.map_or(1024, |d| d.max_threads_per_block);
        Self::forward_candidates(p, dtype, device)
            .into_iter()
            .find(|c| c.team() <= block_limit(p.dim, c.variant, false).min(max_threads))
            .expect("the two-pass candidate always fits")
    }

    /// The built-in choice for the FCGP's norm pass (`ft_clifford_fcgp_asm_*`), which reads
    /// the GEMM results and holds no weights: a row in registers, 4-feature accesses where N
    /// allows (`v4_p1`, a team of N / 4; else 2 or 4 features a thread), one block per group
    /// of rows (no cap per SM: nothing to keep across rows). ncu on the H100 had the forward's
    /// config (two blocks per SM, one feature an access) at about half of copy bandwidth here.
    pub fn assemble_heuristic(p: &Clifford, device: Option<&DeviceInfo>) -> CliffordConfig {
        let max_threads = device.map_or(1024, |d| d.max_threads_per_block);
        let n = p.n.max(1);
        let vec = n.is_multiple_of(4) && n / 4 <= 256;
        let (variant, team) = match [1u32, 2, 4].into_iter().find(|&v| n.div_ceil(v as usize) <= 256) {
            _ if vec => (RowVariant { vec: true, vpt: 1, stream_w: false }, (n / 4).next_power_of_two()),
            Some(vpt) => {
                (RowVariant { vec: false, vpt, stream_w: false }, n.div_ceil(vpt as usize).next_power_of_two())
            }
            None => return Self::heuristic(p, DType::F32, device),
        };
        let threads = (team as u32).max(256).min(max_threads.max(team as u32));
        CliffordConfig {
            threads,
            rows_per_block: threads / team as u32,
            variant,
            blocks_per_sm: 0,
            cpu_rows: (4096 / n).max(1),
            cluster: 1,
        }
    }

    /// The forward configs in the heuristic's order of preference, each with the team that
    /// covers N: first (the sweep's winners) the fewest features per thread whose team of at
    /// most 256 covers N; then a row kept in registers with one feature per thread and the weights in
    /// registers (`v1_p1`); the same with the weights re-read per row from L1 (`v1_p1s`: 10 or
    /// 20 registers fewer, so teams up to 1024 fit); then 2 and 4 features per thread with
    /// streamed weights (`v1_p2s`, `v1_p4s`: teams of N/2, N/4); last the two-pass form (any N,
    /// `v1_p0`, teams of 256, a block per row). Blocks of at least 256 threads, as many resident per SM as the registers
    /// allow, looping over the rows (each thread prefetches its next row).
    ///
    /// 16-bit inputs put [`Self::half_candidates`] first.
    pub fn forward_candidates(p: &Clifford, dtype: DType, device: Option<&DeviceInfo>) -> Vec<CliffordConfig> {
        let max_threads = device.map_or(1024, |d| d.max_threads_per_block);
        let mut out = Vec::new();
        if dtype.size_bytes() == 2 {
            out.extend(Self::half_candidates(p, max_threads));
        }
        // 3D rows of 513 to 1,024 features: two features a thread in a team of 512, one block
        // per SM (H200 sweep, bench/results/clifgate-f898a67117cd/run4, B4096 N777: f32
        // 0.0856 ms, bf16 0.0755, against 0.1033 and 0.0864 for four features in teams of
        // 256, whose 3D kernel needs 230-255 registers). f16's kernel (156 registers) does not
        // fit 512 threads: it takes the next candidate.
        let n = p.n.max(1);
        if p.dim == 3 && n > 512 && n.div_ceil(2) <= 512 {
            let variant = RowVariant { vec: false, vpt: 2, stream_w: false };
            out.push(Self::resident(p, variant, 512, false, max_threads));
        }
        // Refit from the H100 sweep (bench/results/clifford-run2/): the fastest forward at
        // B4096 N 512 and 777, 2D and 3D, was a team of 256 (128) threads per row, one row per
        // block, each thread keeping 2 or 4 features (0.82-0.90x of copy vs 0.40-0.63x for a
        // team of N with one feature each): so the fewest features per thread (1, 2, 4) whose
        // team of at most 256 covers N, weights kept in registers (the H200 sweep of run 4: 2D
        // N777 kept 0.0474 ms against streamed 0.0479 in f32, 0.0400 against 0.0439 in bf16).
        if let Some(vpt) = [1u32, 2, 4].into_iter().find(|&v| n.div_ceil(v as usize) <= 256) {
            let variant = RowVariant { vec: false, vpt, stream_w: false };
            let team = p.n.max(1).div_ceil(vpt as usize).next_power_of_two() as u32;
            out.push(Self::resident(p, variant, team, false, max_threads));
        }
        for (vpt, stream_w) in [(1u32, false), (1, true), (2, true), (4, true)] {
            let variant = RowVariant { vec: false, vpt, stream_w };
            let team = p.n.max(1).div_ceil(vpt as usize).next_power_of_two().min(1 << 20) as u32;
            if team <= max_threads {
                out.push(Self::resident(p, variant, team, false, max_threads));
            }
        }
        // The two-pass form: one feature an access, a team of 256 in a block of its own, as many
        // blocks as rows (the fastest two-pass config of all four f32 sweep points of
        // bench/results/clifgate-f898a67117cd/run1, 0.8x of the best one-pass there; the
        // previous choice, four features an access in teams of 512, ran 3D B3000 N1536 at
        // 0.26x of copy).
        let v = RowVariant { vec: false, vpt: 0, stream_w: false };
        let team = 256u32.min(block_limit(p.dim, v, false)).min(max_threads);
        out.push(CliffordConfig {
            threads: team,
            rows_per_block: 1,
            variant: v,
            blocks_per_sm: 0,
            cpu_rows: (4096 / p.n.max(1)).max(1),
            cluster: 1,
        });
        out
    }

    /// The forward's first choice for f16 and bf16, from the H200 `fwd_sweep` in bf16
    /// (bench/results/clifgate-f898a67117cd/run4, B4096; first found in
    /// bench/results/clifroof-5bda29ff586e/run4): their elements cost the f32 kernel's
    /// instructions for half the bytes, so what wins is more work per instruction. N % 4 == 0
    /// (teams up to 256): four features an access (`v4_p1`, weights kept, blocks of one row,
    /// 4 blocks per SM in 2D, 2 in 3D): 2D N512 0.0226 ms, 3D 0.0403. Otherwise the f32 order
    /// (run 4: 2D N777 `v1_p4` 0.0400 ms, 3D `v1_p2` in teams of 512 0.0755, against 0.0527
    /// and 0.0993 for the two-pass form this took before).
    fn half_candidates(p: &Clifford, max_threads: u32) -> Vec<CliffordConfig> {
        let n = p.n.max(1);
        let cpu_rows = (4096 / n).max(1);
        let mut out = Vec::new();
        if n.is_multiple_of(4) && n / 4 <= 256 {
            let team = (n / 4).next_power_of_two() as u32;
            let variant = RowVariant { vec: true, vpt: 1, stream_w: false };
            let threads = team.max(32);
            if threads <= max_threads.min(block_limit(p.dim, variant, false)) {
                let blocks_per_sm = if p.dim == 2 { 4 } else { 2 };
                out.push(CliffordConfig { threads, rows_per_block: 1, variant, blocks_per_sm, cpu_rows, cluster: 1 });
            }
        }
        out
    }

    /// A config for `variant` with `team` threads per row: blocks of at least 256 threads
    /// (at most the variant's register limit) and as many blocks per SM as its registers allow.
    fn resident(p: &Clifford, variant: RowVariant, team: u32, backward: bool, max_threads: u32) -> CliffordConfig {
        let limit = block_limit(p.dim, variant, backward).min(max_threads).max(team);
        let threads = team.max(256).min(limit);
        let per_sm = (sm_threads(p.dim, variant, backward) / threads).max(1);
        CliffordConfig {
            threads,
            rows_per_block: threads / team,
            variant,
            blocks_per_sm: per_sm,
            cpu_rows: (4096 / p.n.max(1)).max(1),
            cluster: 1,
        }
    }

    /// The built-in choice for the backward, refit from the H100 sweep
    /// (bench/results/clifford-run3/, B4096 N 512/777/1024) and the H200 sweeps of the split
    /// form (bench/results/clifsplit-85019bae3894/, runs 2-3): the one-pass kernel keeping a
    /// row and its weights in registers, two features per thread (teams of up to 256, 512 in
    /// 2D), else four (2D, teams of up to 256); 3D rows past 512 features and every longer row
    /// take the split form ([`CliffordConfig::split_backward`]: at 3D B4096 N 1024 0.436 ms
    /// fwd+bwd against 0.549 for the two-pass form, N 777 0.389 against 0.469 for four
    /// features a thread). 16-bit 2D rows of 512 features or more take four-feature accesses
    /// where they fill a team exactly (N / 4 a power of two up to 256: bf16 N 1024 0.153 ms
    /// against 0.177 for two features a thread), else the split form (N 640, 777, 1536: 3-6%
    /// ahead of the best one-pass config). As many blocks per SM as the registers allow loop
    /// over the rows; each team's weight gradient stays in registers. The `_p{n}s` kernels
    /// and the two-pass ones are left to the tuner's space.
    ///
    /// On a GPU with thread-block clusters (compute capability 9.0, the sm_90a build), f32 rows
    /// that would take the split form take the cluster form instead where at most
    /// [`PORTABLE_CLUSTER`] blocks cover them ([`CliffordConfig::cluster_backward`]).
    pub fn backward_heuristic(p: &Clifford, dtype: DType, device: Option<&DeviceInfo>) -> CliffordConfig {
        let c = Self::backward_heuristic_unclustered(p, dtype, device);
        let clusters = device.is_some_and(|d| d.compute_capability == (9, 0));
        if clusters && c.variant.is_split() && dtype == DType::F32 {
            return Self::cluster_backward(p).unwrap_or(c);
        }
        c
    }

    /// The backward's cluster form for `p`, where at most [`PORTABLE_CLUSTER`] blocks cover N:
    /// two features a thread in the smallest of 64 (N up to 1,024), 128 (up to 2,048) or 256
    /// threads (up to 4,096) whose portable clusters cover the row: small blocks fill the row's
    /// slots closely (N777: 7 x 128 = 896) and share an SM, so one block's cluster barrier
    /// overlaps another's work; 64- and 128-thread blocks as many an SM as 2,048 threads make
    /// (the launch caps that at what the registers hold), 256-thread blocks two. H100, f32
    /// fwd+bwd (bench/results/clifcluster-small-c096212bcf37/): 3D B4096 N777 0.447 ms against
    /// 0.460 for the rule before, B3000 N1536 0.682 against 0.801, 2D B3000 N1536 0.278 against
    /// 0.373; within 2.4% of the best cluster point on the 6 f32 rows swept. bf16 lost to the
    /// split form in every 3D row (bench/results/clifcluster-146f60779b9e/), so 16-bit rows
    /// keep it.
    pub fn cluster_backward(p: &Clifford) -> Option<CliffordConfig> {
        let n = p.n.max(1);
        let portable = PORTABLE_CLUSTER as usize;
        let threads = [64usize, 128, 256].into_iter().find(|&t| n.div_ceil(2 * t) <= portable)?;
        let blocks_per_sm = if threads == 256 { 2 } else { (2048 / threads) as u32 };
        Some(CliffordConfig {
            threads: threads as u32,
            rows_per_block: 1,
            variant: RowVariant { vec: false, vpt: 2, stream_w: false },
            blocks_per_sm,
            cpu_rows: (4096 / n).max(1),
            cluster: n.div_ceil(2 * threads).max(2) as u32,
        })
    }

    /// [`CliffordConfig::backward_heuristic`] without the cluster form (any GPU).
    pub(super) fn backward_heuristic_unclustered(
        p: &Clifford,
        dtype: DType,
        device: Option<&DeviceInfo>,
    ) -> CliffordConfig {
        let max_threads = device.map_or(1024, |d| d.max_threads_per_block);
        if dtype != DType::F32 && p.dim == 2 && p.n >= 512 {
            let team = p.n / 4;
            let v4 = RowVariant { vec: true, vpt: 1, stream_w: false };
            if p.n.is_multiple_of(4) && team.is_power_of_two() && team <= 256 {
                return Self::resident(p, v4, team as u32, true, max_threads);
            }
            return Self::split_backward(p);
        }
        for vpt in [2u32, 4] {
            // 3D rows past 512 features: the four-feature one-pass kernel spills (255
            // registers); the split form takes them.
            if p.dim == 3 && vpt == 4 {
                break;
            }
            let variant = RowVariant { vec: false, vpt, stream_w: false };
            let team = p.n.max(1).div_ceil(vpt as usize).next_power_of_two();
            let cap = if p.dim == 2 && vpt == 2 { 512 } else { 256 };
            if team <= cap.min(block_limit(p.dim, variant, true).min(max_threads)) as usize {
                return Self::resident(p, variant, team as u32, true, max_threads);
            }
        }
        Self::split_backward(p)
    }

    /// The split backward's config for `p` ([`ferrotune_kernels::clifford::BWD_SPLIT`]):
    /// feature tiles of 64 threads, as many blocks as 2,048 threads an SM would hold (the chunk
    /// rule, `split_grid`): the H200 sweep's best at 3D B4096 N 777 and 1024 (0.388 and 0.436
    /// ms fwd+bwd; 128 or 256 threads and 2-8 blocks per SM 1-10% slower,
    /// bench/results/clifsplit-*/run2).
    pub fn split_backward(p: &Clifford) -> CliffordConfig {
        CliffordConfig { cpu_rows: (4096 / p.n.max(1)).max(1), ..Self::split(64, 0) }
    }

    /// A split-backward config: feature tiles of `threads`, `blocks_per_sm` for the chunk rule
    /// (0: as many as 2,048 threads an SM), one CPU row per task.
    pub fn split(threads: u32, blocks_per_sm: u32) -> CliffordConfig {
        CliffordConfig {
            threads,
            rows_per_block: 1,
            variant: RowVariant { vec: false, vpt: 0, stream_w: true },
            blocks_per_sm,
            cpu_rows: 1,
            cluster: 1,
        }
    }

    /// `self` with its threads per block lowered to what the compiled kernel allows
    /// (`kernel_max`, from its registers), keeping the team; None when even one team does not
    /// fit.
    pub fn fit(mut self, kernel_max: u32) -> Option<CliffordConfig> {
        let team = self.team();
        if team > kernel_max {
            return None;
        }
        while self.threads > kernel_max {
            self.threads /= 2;
        }
        self.rows_per_block = self.threads / team;
        Some(self)
    }

    /// The config's two-pass form for the backward kernels: they keep nothing in registers
    /// across a row (any team size covers the row), and their register use (up to 250 per
    /// thread in 3D) allows at most 256 threads per block.
    pub fn backward_form(mut self) -> CliffordConfig {
        self.variant.vpt = 0;
        self.variant.stream_w = false;
        let team = self.team().min(256);
        self.threads = self.threads.min(256).max(team);
        self.rows_per_block = self.threads / team;
        self
    }

    /// Shared memory of the `_p{n}s` one-pass backward (`stream_w`): the scratch, the f32
    /// weights and one f32 weight-gradient area per team (`W * N` floats each).
    pub fn one_pass_smem(&self, p: &Clifford) -> Result<usize> {
        let areas = 1 + self.rows_per_block.max(1) as usize;
        p.sgp_weights_len()?
            .checked_mul(4 * areas)
            .and_then(|b| b.checked_add(super::SCRATCH_BYTES))
            .ok_or(Error::InvalidConfig { op: OP, why: format!("N = {} is too large for the backward", p.n) })
    }

    /// Threads per row.
    pub fn team(&self) -> u32 {
        self.threads / self.rows_per_block.max(1)
    }

    /// Checks the config against the compiled variants, the device and the problem.
    pub fn validate(&self, p: &Clifford, device: Option<&DeviceInfo>) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidConfig { op: OP, why });
        let max_threads = device.map_or(1024, |d| d.max_threads_per_block);
        if !self.threads.is_power_of_two() || self.threads < 32 || self.threads > max_threads {
            return bad(format!("threads per block {} must be a power of two in 32..={max_threads}", self.threads));
        }
        if !self.rows_per_block.is_power_of_two() || self.rows_per_block > self.threads {
            return bad(format!("rows per block {} must be a power of two up to threads", self.rows_per_block));
        }
        if !fwd_variants().any(|v| v == self.variant) {
            return bad(format!(
                "variant {:?} is not compiled into the PTX (see ROW_VARIANTS, FWD_STREAM_VARIANTS)",
                self.variant
            ));
        }
        if self.variant.vec && !p.n.is_multiple_of(4) {
            return bad(format!("4-feature accesses need N % 4 == 0, N is {}", p.n));
        }
        if let Some(max) = self.variant.max_features(self.team() as usize)
            && p.n > max
        {
            return bad(format!(
                "{} threads per row keeping {} accesses of {} cover {max} features, N is {}",
                self.team(),
                self.variant.vpt,
                self.variant.lanes(),
                p.n
            ));
        }
        if self.cpu_rows == 0 {
            return bad("cpu_rows must be at least 1".into());
        }
        if self.cluster != 1 {
            return bad(format!(
                "cluster {}: clusters are for the backward's cluster form only; the forward and the FCGP take 1",
                self.cluster
            ));
        }
        Ok(())
    }

    /// Checks a backward config: `vpt` = 0 the two-pass kernels (any N), else a compiled
    /// one-pass variant ([`BWD_VARIANTS`]) whose team covers N.
    pub fn validate_backward(&self, p: &Clifford, device: Option<&DeviceInfo>) -> Result<()> {
        let mut two_pass = *self;
        two_pass.variant.vpt = 0;
        two_pass.variant.stream_w = false;
        two_pass.cluster = 1;
        two_pass.validate(p, device)?;
        if self.cluster != 1 {
            return self.validate_cluster(p, device);
        }
        if self.variant.vpt > 0
            && self.variant.stream_w
            && let Some(d) = device
        {
            let need = self.one_pass_smem(p)?;
            if need > d.shared_mem_per_block_optin as usize {
                return Err(Error::InvalidConfig {
                    op: OP,
                    why: format!(
                        "backward {:?}: the weights and {} weight-gradient areas of N = {} need {need} bytes of \
                         shared memory, the device allows {}",
                        self.variant, self.rows_per_block, p.n, d.shared_mem_per_block_optin
                    ),
                });
            }
        }
        if self.variant.is_split() && self.variant.vec {
            return Err(Error::InvalidConfig {
                op: OP,
                why: "the split backward is compiled for one-feature accesses only (vec = false)".into(),
            });
        }
        if self.variant.is_split() && self.rows_per_block != 1 {
            return Err(Error::InvalidConfig {
                op: OP,
                why: format!(
                    "the split backward gives each thread one feature ({} per block): rows per block must be 1, \
                     not {}",
                    self.threads, self.rows_per_block
                ),
            });
        }
        if self.variant.vpt > 0 {
            if !BWD_VARIANTS.contains(&self.variant) {
                return Err(Error::InvalidConfig {
                    op: OP,
                    why: format!("backward variant {:?} is not compiled into the PTX (see BWD_VARIANTS)", self.variant),
                });
            }
            if let Some(max) = self.variant.max_features(self.team() as usize)
                && p.n > max
            {
                return Err(Error::InvalidConfig {
                    op: OP,
                    why: format!(
                        "backward: {} threads per row keeping {} accesses of {} cover {max} features, N is {}",
                        self.team(),
                        self.variant.vpt,
                        self.variant.lanes(),
                        p.n
                    ),
                });
            }
        }
        Ok(())
    }

    /// Checks a config of the backward's cluster form (`cluster` > 1): a compiled variant
    /// (one feature an access, [`BWD_CLUSTER_VPT`] kept in registers), one row per block, at
    /// most [`MAX_CLUSTER`] blocks covering N, a device with clusters.
    fn validate_cluster(&self, p: &Clifford, device: Option<&DeviceInfo>) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidConfig { op: OP, why: format!("backward in clusters: {why}") });
        let v = self.variant;
        if self.cluster == 0 || self.cluster > MAX_CLUSTER {
            return bad(format!("cluster {} must be in 1..={MAX_CLUSTER}", self.cluster));
        }
        if v.vec || v.stream_w || !BWD_CLUSTER_VPT.contains(&v.vpt) {
            return bad(format!(
                "variant {v:?} is not compiled; the cluster form keeps one-feature accesses in registers, \
                 {BWD_CLUSTER_VPT:?} a thread (vec = false, stream_w = false)"
            ));
        }
        if self.rows_per_block != 1 {
            return bad(format!(
                "a block holds part of one row: rows per block must be 1, not {}",
                self.rows_per_block
            ));
        }
        let cover = self.cluster as usize * self.threads as usize * v.vpt as usize;
        if p.n > cover {
            return bad(format!(
                "{} blocks of {} threads keeping {} features each cover {cover} features, N is {}",
                self.cluster, self.threads, v.vpt, p.n
            ));
        }
        // (0, 0): a device described by its limits only (the tuner's), whose launch checks the
        // loaded module instead.
        if let Some(d) = device
            && d.compute_capability != (0, 0)
            && d.compute_capability.0 < 9
        {
            return bad(format!(
                "thread-block clusters need compute capability 9.0 (the sm_90a build); this device is {}.{}",
                d.compute_capability.0, d.compute_capability.1
            ));
        }
        Ok(())
    }

    /// Every config the tuner may try for `p` on the GPU: compiled variants x block sizes x
    /// batch blocks x grid policies, keeping those that cover N and whose blocks the
    /// variant's registers allow for every dtype ([`registers_any_dtype`]).
    pub fn gpu_space(p: &Clifford) -> Vec<CliffordConfig> {
        let mut v = Vec::new();
        for variant in fwd_variants() {
            let limit = pow2_block(threads_for(registers_any_dtype(p.dim, variant, false)));
            for threads in [64, 128, 256, 512, 1024].into_iter().filter(|&t| t <= limit) {
                let mut rows = 1;
                while rows <= threads {
                    for blocks_per_sm in [0, 2, 4, 8] {
                        let c = CliffordConfig {
                            threads,
                            rows_per_block: rows,
                            variant,
                            blocks_per_sm,
                            cpu_rows: 16,
                            cluster: 1,
                        };
                        if c.validate(p, None).is_ok() {
                            v.push(c);
                        }
                    }
                    rows *= 2;
                }
            }
        }
        v
    }
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
