//! The Clifford SGP layer's search space and cost model (forward and backward). The GPU space
//! is the pass's compiled variants (vector width, features kept per thread, streamed weights)
//! x block sizes x rows per block (so the team per row) x grid policies, pruned by the
//! compiled kernels' register limits, the resident grid and the host's own checks
//! (`CliffordConfig::validate` / `validate_backward`, e.g. a team that does not cover N);
//! the CPU space is the rows per rayon task. The model ranks candidates for the model-guided
//! strategy.

use ferrotune::DeviceInfo;
use ferrotune::ops::clifford::{CliffordConfig, CliffordVariant, backward_entry, backward_entry_of, row_entry};
use ferrotune::tuned::CliffordPass;
use ferrotune_kernels::clifford::{
    BWD_CLUSTER_VPT, BWD_SPLIT, BWD_VARIANTS, CliffordKernel, bwd_cluster_entry_name, fwd_variants,
};

use crate::protocol::{CliffordShape as Shape, Description};
use crate::space::{Constraint, Context, Domain, KernelResources, Limits, Param, Point, Pruned, Space, occupancy};

/// Block sizes tried on the GPU.
pub const THREADS: [u64; 5] = [64, 128, 256, 512, 1024];
/// Rows per block tried on the GPU (the team per row is `threads / rows`).
pub const ROWS_PER_BLOCK: [u64; 7] = [1, 2, 4, 8, 16, 32, 64];
/// Persistent-grid caps tried on the GPU (0 = one block per group of rows).
pub const BLOCKS_PER_SM: [u64; 5] = [0, 1, 2, 4, 8];

/// The compiled variants of a pass, in the order the `Variant` parameter indexes them: the
/// forward's row variants; for the backward the two-pass kernels (`vpt` = 0, 4-feature
/// accesses or one), the one-pass ones ([`BWD_VARIANTS`]) and the split form ([`BWD_SPLIT`]).
pub fn variants(pass: CliffordPass) -> Vec<CliffordVariant> {
    match pass {
        CliffordPass::Forward => fwd_variants().collect(),
        CliffordPass::Backward => [true, false]
            .map(|vec| CliffordVariant { vec, vpt: 0, stream_w: false })
            .into_iter()
            .chain(BWD_VARIANTS)
            .chain(BWD_SPLIT)
            .collect(),
    }
}

/// The kernel entry point a config of `shape` launches (what its resources are looked up by).
pub fn entry(shape: &Shape, v: CliffordVariant) -> String {
    match shape.pass {
        CliffordPass::Forward => row_entry(CliffordKernel::Forward, shape.problem.dim, shape.dtype, v),
        CliffordPass::Backward => backward_entry(shape.problem.dim, shape.dtype, v),
    }
}

/// [`entry`] of a whole config: the cluster form's own entry where `cfg.cluster > 1`.
pub fn entry_of(shape: &Shape, cfg: &CliffordConfig) -> String {
    match shape.pass {
        CliffordPass::Forward => entry(shape, cfg.variant),
        CliffordPass::Backward => backward_entry_of(shape.problem.dim, shape.dtype, cfg),
    }
}

/// The backward's cluster-form entries for `shape` (one per `BWD_CLUSTER_VPT`; none for the
/// forward), whose resources the worker describes where its module has them.
pub fn cluster_entries(shape: &Shape) -> Vec<String> {
    if shape.pass != CliffordPass::Backward {
        return Vec::new();
    }
    BWD_CLUSTER_VPT
        .iter()
        .map(|&vpt| bwd_cluster_entry_name(shape.problem.dim, shape.dtype, vpt).as_str().to_string())
        .collect()
}

/// Whether the machine `d` describes runs the backward's cluster form for `shape`: its module
/// has the cluster entries (the sm_90a build, loaded on compute capability 9.0).
pub fn has_clusters(d: &Description, shape: &Shape) -> bool {
    cluster_entries(shape).iter().any(|e| d.clifford_resources_of(e).is_some())
}

/// The device as the host's config checks see it, from the limits the worker reported.
pub fn device_info(l: &Limits) -> DeviceInfo {
    DeviceInfo {
        ordinal: 0,
        name: "described".into(),
        compute_capability: (0, 0),
        sm_count: l.sm_count,
        global_mem_bytes: 0,
        l2_bytes: 0,
        shared_mem_per_block: l.shared_per_block,
        shared_mem_per_block_optin: l.shared_optin(),
        shared_mem_per_sm: l.shared_per_sm,
        max_threads_per_block: l.max_threads_per_block,
        max_threads_per_sm: l.max_threads_per_sm,
        registers_per_sm: l.registers_per_sm,
        clock_khz: 0,
        memory_clock_khz: 0,
        memory_bus_bits: 0,
        driver_version: 0,
    }
}

/// The space of `shape` on the machine `d` describes.
pub fn space(d: &Description, shape: &Shape) -> Space {
    let Some(l) = d.limits else {
        // CPU: rows per task, from 1 to the whole batch (no more: one task).
        let top = (shape.problem.b.max(1) as u64).next_power_of_two();
        let values = (0..=20).map(|s| 1u64 << s).filter(|&r| r <= top).collect();
        return Space {
            domains: vec![Domain { param: Param::CpuRows, values }],
            constraints: vec![Constraint::AtLeast { param: Param::CpuRows, min: 1 }, Constraint::HostAccepts],
        };
    };
    let mut domains = vec![
        Domain { param: Param::Variant, values: (0..variants(shape.pass).len() as u64).collect() },
        Domain { param: Param::Threads, values: THREADS.to_vec() },
        Domain { param: Param::RowsPerBlock, values: ROWS_PER_BLOCK.to_vec() },
        Domain { param: Param::BlocksPerSm, values: BLOCKS_PER_SM.to_vec() },
    ];
    if has_clusters(d, shape) {
        domains.push(Domain { param: Param::Cluster, values: vec![0, 1] });
    }
    Space {
        domains,
        constraints: vec![
            Constraint::AtMost { param: Param::Threads, max: u64::from(l.max_threads_per_block.min(1024)) },
            Constraint::RegisterLimit,
            Constraint::ResidentGrid,
            Constraint::HostAccepts,
        ],
    }
}

/// The config a point stands for on rows of `n` features (parameters the point lacks keep
/// `base`'s values; a point with a variant has no cluster unless its `Cluster` is 1: then the
/// fewest blocks that cover the row).
pub fn to_config(pass: CliffordPass, n: usize, p: &Point, base: CliffordConfig) -> CliffordConfig {
    let mut c = base;
    if let Some(v) = p.get(Param::Variant).and_then(|i| variants(pass).get(i as usize).copied()) {
        c.variant = v;
        // The space's variants run without clusters (a cluster base, the H100's built-in
        // backward for long f32 rows, is measured as the base itself).
        c.cluster = 1;
    }
    if let Some(t) = p.get(Param::Threads) {
        c.threads = t as u32;
    }
    if let Some(r) = p.get(Param::RowsPerBlock) {
        c.rows_per_block = r as u32;
    }
    if let Some(b) = p.get(Param::BlocksPerSm) {
        c.blocks_per_sm = b as u32;
    }
    if let Some(r) = p.get(Param::CpuRows) {
        c.cpu_rows = r as usize;
    }
    if p.get(Param::Cluster) == Some(1) {
        let per_block = c.threads.max(1) as usize * c.variant.vpt.max(1) as usize;
        c.cluster = n.max(1).div_ceil(per_block).max(2).min(u32::MAX as usize) as u32;
    }
    c
}

/// The candidates to measure (deduplicated, in space order; `base` first when it is valid, so
/// the built-in config is always among them) and the pruned points, as configs.
pub fn candidates(d: &Description, shape: &Shape, base: CliffordConfig) -> (Vec<CliffordConfig>, Vec<Pruned>) {
    let vars = variants(shape.pass);
    let info = d.limits.as_ref().map(device_info);
    let n = shape.problem.n;
    let res = |p: &Point| {
        p.get(Param::Variant).and_then(|i| vars.get(i as usize))?;
        d.clifford_resources_of(&entry_of(shape, &to_config(shape.pass, n, p, base)))
    };
    let host = |p: &Point| {
        let c = to_config(shape.pass, n, p, base);
        shape.pass.validate(&c, &shape.problem, info.as_ref()).map_err(|e| e.to_string())
    };
    let ctx = Context { limits: d.limits, resources: &res, host: &host };
    let (keep, pruned) = space(d, shape).solve(&ctx);
    let mut out: Vec<CliffordConfig> = Vec::with_capacity(keep.len() + 1);
    if shape.pass.validate(&base, &shape.problem, info.as_ref()).is_ok() {
        out.push(base);
    }
    for c in keep.iter().map(|p| to_config(shape.pass, n, p, base)) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    (out, pruned)
}

/// f32 instructions per feature of one row (the product over the algebra's paths, the gates,
/// the norm): a rough count; the backward does about three times the forward's.
fn work_per_feature(shape: &Shape) -> f64 {
    let fwd = if shape.problem.dim == 2 { 80.0 } else { 240.0 };
    match shape.pass {
        CliffordPass::Forward => fwd,
        CliffordPass::Backward => 3.0 * fwd,
    }
}

/// Predicted time (ms) of `cfg` on `shape`. GPU: a roofline of memory and instruction issue,
/// the issue rate scaled by the share of a team's threads that hold features (a team larger
/// than N / features-per-thread idles), memory by the bytes the resident threads keep in
/// flight, the two-pass form reading each row twice, plus launch overhead. CPU: the work split
/// into tasks of `cpu_rows` rows. Only its ranking matters.
pub fn predict_ms(d: &Description, shape: &Shape, cfg: &CliffordConfig) -> f64 {
    let p = &shape.problem;
    let features = (p.b * p.n) as f64;
    let work = features * work_per_feature(shape);
    let bytes = shape.min_bytes();
    let Some(l) = d.limits else {
        let threads = d.cpu_threads.max(1) as f64;
        let tasks = (p.b as f64 / cfg.cpu_rows.max(1) as f64).ceil().max(1.0);
        let rounds = (tasks / threads).ceil();
        let imbalance = rounds * threads / tasks.max(1.0);
        let t = (work * 0.5e-9 / threads.min(tasks)).max(bytes / (d.peak_gbps.max(1.0) * 1e9));
        return (t * imbalance.max(1.0) + tasks * 5e-6 / threads) * 1e3;
    };
    let v = cfg.variant;
    let res = d.clifford_resources_of(&entry_of(shape, cfg)).unwrap_or(KernelResources {
        registers: 128,
        max_threads: 512,
        ..KernelResources::default()
    });
    let lanes = if v.vec { 4.0 } else { 1.0 };
    // A cluster's blocks share one row: its team is all of their threads.
    let team = f64::from(cfg.team().max(1)) * f64::from(cfg.cluster.max(1));
    let per_pass = team * lanes * f64::from(v.vpt.max(1));
    let passes = (p.n as f64 / per_pass).ceil().max(1.0);
    let busy = p.n as f64 / (passes * per_pass);
    let sms = f64::from(l.sm_count.max(1));
    let blocks = (p.b as f64 / f64::from(cfg.rows_per_block.max(1))).ceil().max(1.0);
    let grid = if cfg.blocks_per_sm > 0 { blocks.min(f64::from(cfg.blocks_per_sm) * sms) } else { blocks };
    let occ = occupancy(&l, cfg.threads, &res, 0);
    let active = (grid / sms).ceil().min(f64::from(occ.blocks_per_sm.max(1)));
    let issue_rate = sms * 128.0 * d.clock_ghz.max(0.1) * 1e9 * busy * occ.fraction.clamp(0.125, 1.0).sqrt();
    let t_issue = work / issue_rate;
    // Loads in flight: the threads of a team that hold features, each its accesses of a row.
    let inflight =
        active * f64::from(cfg.threads) * busy * lanes * f64::from(v.vpt.max(1)) * shape.dtype.size_bytes() as f64;
    let peak = d.peak_gbps.max(1.0) * 1e9;
    let efficiency = (inflight / (peak * 1.0e-6 / sms)).clamp(0.05, 1.0);
    let reread = if v.vpt == 0 { 5.0 / 3.0 } else { 1.0 };
    let t_mem = bytes * reread / (peak * 0.9 * efficiency);
    (t_mem.max(t_issue) + 4e-6) * 1e3
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::GemmResourceJson;
    use ferrotune::DType;
    use ferrotune::ops::clifford::Clifford;
    use proptest::prelude::*;

    /// An H100-like description with the Clifford kernels' register-limited block sizes
    /// (`regs` per thread for every entry).
    fn gpu(shape: &Shape, regs: u32) -> Description {
        let mut d = crate::elem::tests::gpu_description(20);
        let max_threads = (65536 / (regs.div_ceil(8) * 8 * 32) * 32).min(1024);
        d.clifford_resources = variants(shape.pass)
            .into_iter()
            .map(|v| GemmResourceJson {
                kernel: entry(shape, v),
                resources: KernelResources { registers: regs, max_threads, ..Default::default() },
            })
            .collect();
        d
    }

    fn base_of(s: &Shape) -> CliffordConfig {
        match s.pass {
            CliffordPass::Forward => CliffordConfig::heuristic(&s.problem, s.dtype, None),
            CliffordPass::Backward => CliffordConfig::backward_heuristic(&s.problem, s.dtype, None),
        }
    }

    fn shape(pass: CliffordPass, dim: u32, b: usize, n: usize) -> Shape {
        Shape { pass, dtype: DType::F32, problem: Clifford::new(dim, b, n, true) }
    }

    #[test]
    fn the_gpu_space_covers_every_compiled_variant_and_prunes_with_reasons() {
        for pass in CliffordPass::ALL {
            let s = shape(pass, 3, 4096, 512);
            let d = gpu(&s, 64);
            let base = base_of(&s);
            let (cands, pruned) = candidates(&d, &s, base);
            let points = variants(pass).len() * THREADS.len() * ROWS_PER_BLOCK.len() * BLOCKS_PER_SM.len();
            assert!(cands.len() + pruned.len() >= points, "{pass}: every point is measured or pruned");
            for v in variants(pass) {
                // A team of 512 one-feature threads or fewer covers N = 512 with any variant.
                assert!(cands.iter().any(|c| c.variant == v), "{pass}: variant {v:?} has no candidate");
            }
            let info = device_info(&d.limits.unwrap());
            for c in &cands {
                assert!(pass.validate(c, &s.problem, Some(&info)).is_ok(), "{pass}: {c:?}");
                assert!(c.threads <= 1024);
            }
            assert!(pruned.iter().any(|p| p.reason.contains("cover")), "{pass}: a team too small for N is pruned");
            assert!(pruned.iter().all(|p| !p.reason.is_empty()));
        }
    }

    #[test]
    fn a_cluster_base_is_measured_beside_the_unclustered_space() {
        // The H100's built-in backward for 3D f32 N 777 is the cluster form; the space's
        // points are the unclustered variants.
        let s = shape(CliffordPass::Backward, 3, 4096, 777);
        let d = gpu(&s, 64);
        let base = CliffordConfig::cluster_backward(&s.problem).expect("two blocks cover 777");
        let (cands, _) = candidates(&d, &s, base);
        assert_eq!(cands[0], base);
        assert!(cands.len() > 10, "{} candidates", cands.len());
        assert!(cands[1..].iter().all(|c| c.cluster == 1), "{cands:?}");
        assert!(cands.iter().any(|c| c.variant.is_split()));
    }

    #[test]
    fn the_cluster_form_is_in_the_space_where_the_module_has_it() {
        let s = shape(CliffordPass::Backward, 3, 4096, 777);
        let mut d = gpu(&s, 64);
        let base = CliffordConfig::cluster_backward(&s.problem).expect("two blocks cover 777");
        assert!(!has_clusters(&d, &s), "no cluster entries described");
        // The sm_90a module's cluster entries (237 registers: 256 threads a block at most).
        for vpt in ferrotune_kernels::clifford::BWD_CLUSTER_VPT {
            let c = CliffordConfig { variant: CliffordVariant { vec: false, vpt, stream_w: false }, ..base };
            let resources = KernelResources { registers: 237, max_threads: 256, ..Default::default() };
            d.clifford_resources.push(GemmResourceJson { kernel: entry_of(&s, &c), resources });
        }
        assert!(has_clusters(&d, &s));
        let (cands, pruned) = candidates(&d, &s, base);
        let clustered: Vec<_> = cands.iter().filter(|c| c.cluster > 1).collect();
        assert!(clustered.len() >= 4, "{clustered:?}");
        let info = device_info(&d.limits.unwrap());
        for c in &clustered {
            // The fewest blocks covering the row, within the cluster entries' register limit.
            let per_block = (c.threads * c.variant.vpt) as usize;
            assert_eq!(c.cluster as usize, 777usize.div_ceil(per_block).max(2), "{c:?}");
            assert!(c.threads <= 256 && c.rows_per_block == 1, "{c:?}");
            assert!(c.validate_backward(&s.problem, Some(&info)).is_ok(), "{c:?}");
        }
        assert!(clustered.iter().any(|c| c.threads == 64 && c.cluster == 7), "64 x 2 in 7 blocks");
        assert!(pruned.iter().any(|p| p.reason.contains("clusters")), "cluster points the host refuses");
        // The unclustered points are still there.
        assert!(cands.iter().any(|c| c.cluster == 1 && c.variant.is_split()));
    }

    #[test]
    fn register_limits_prune_large_blocks() {
        let s = shape(CliffordPass::Forward, 2, 1024, 128);
        let d = gpu(&s, 200);
        let base = CliffordConfig::heuristic(&s.problem, s.dtype, None);
        let (cands, pruned) = candidates(&d, &s, base);
        let limit = d.clifford_resources[0].resources.max_threads;
        assert!(cands.iter().skip(1).all(|c| c.threads <= limit), "only the base may exceed the estimate");
        assert!(pruned.iter().any(|p| p.reason.contains("registers per thread")));
    }

    #[test]
    fn the_model_prefers_teams_that_cover_n_without_idling() {
        let s = shape(CliffordPass::Forward, 3, 4096, 256);
        let d = gpu(&s, 64);
        let v = CliffordVariant { vec: false, vpt: 1, stream_w: false };
        let fit =
            CliffordConfig { threads: 256, rows_per_block: 1, variant: v, blocks_per_sm: 0, cpu_rows: 1, cluster: 1 };
        let idle = CliffordConfig { threads: 1024, ..fit };
        assert!(predict_ms(&d, &s, &fit) < predict_ms(&d, &s, &idle));
    }

    proptest! {
        // Whatever the problem, the CPU space yields only configs the host accepts, the base
        // (the built-in config) among them.
        #[test]
        fn cpu_candidates_are_valid(dim in 2u32..=3, b in 1usize..5000, n in 1usize..2000, bwd: bool) {
            let pass = if bwd { CliffordPass::Backward } else { CliffordPass::Forward };
            let s = shape(pass, dim, b, n);
            let mut d = crate::elem::tests::gpu_description(20);
            d.limits = None;
            let base = base_of(&s);
            let (cands, _) = candidates(&d, &s, base);
            prop_assert!(!cands.is_empty());
            prop_assert_eq!(cands[0], base);
            for (i, c) in cands.iter().enumerate() {
                prop_assert!(pass.validate(c, &s.problem, None).is_ok());
                // The space's rows per task stop at the whole batch (the base may have more).
                prop_assert!(i == 0 || c.cpu_rows <= b.next_power_of_two());
            }
        }
    }
}
