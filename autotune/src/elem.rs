//! The elementwise family's search space and cost model. The GPU space is exactly the
//! compiled variants (`ELEM_VARIANTS`) x block sizes x grid policies, pruned by the device;
//! the CPU space is the rayon chunk. The model ranks candidates for the model-guided strategy.

use ferrotune::{DType, ElemConfig, ElemOp, ElemVariant};
use ferrotune_kernels::elementwise::ELEM_VARIANTS;

use crate::protocol::{Description, ElemShape as Shape};
use crate::space::{Constraint, Context, Domain, KernelResources, Param, Point, Pruned, Space, occupancy};

/// Block sizes tried on the GPU.
pub const THREADS: [u64; 6] = [64, 128, 256, 512, 768, 1024];
/// Persistent-grid caps tried on the GPU (0 = one pass over the data).
pub const BLOCKS_PER_SM: [u64; 7] = [0, 1, 2, 4, 8, 16, 32];
/// Least occupancy worth measuring.
pub const MIN_OCCUPANCY: f64 = 0.25;

/// The space of `shape` on the machine `d` describes, with `base` (the built-in config) giving
/// the values of the parameters this backend does not use.
pub fn space(d: &Description, shape: &Shape) -> Space {
    if d.limits.is_none() {
        // CPU: the chunk, from 1 Ki elements to the whole tensor (no larger: one task).
        let top = (shape.n.max(1) as u64).next_power_of_two().max(1 << 10);
        let values = (10..=24).map(|s| 1u64 << s).filter(|&c| c <= top).collect();
        return Space {
            domains: vec![Domain { param: Param::CpuChunk, values }],
            constraints: vec![Constraint::AtLeast { param: Param::CpuChunk, min: 1 }, Constraint::HostAccepts],
        };
    }
    let max_block = d.limits.map_or(1024, |l| u64::from(l.max_threads_per_block));
    Space {
        domains: vec![
            Domain { param: Param::Variant, values: (0..ELEM_VARIANTS.len() as u64).collect() },
            Domain { param: Param::Threads, values: THREADS.to_vec() },
            Domain { param: Param::BlocksPerSm, values: BLOCKS_PER_SM.to_vec() },
        ],
        constraints: vec![
            Constraint::MultipleOf { param: Param::Threads, of: 32 },
            Constraint::AtMost { param: Param::Threads, max: max_block.min(1024) },
            Constraint::RegisterLimit,
            // Elementwise kernels use no shared memory; the check is generic (GEMM needs it).
            Constraint::SharedMemory { dynamic_per_block: 0 },
            Constraint::ResidentGrid,
            Constraint::MinOccupancy { min: MIN_OCCUPANCY },
            Constraint::HostAccepts,
        ],
    }
}

/// The config a point stands for (parameters the point lacks keep `base`'s values).
pub fn to_config(p: &Point, base: ElemConfig) -> ElemConfig {
    let mut c = base;
    if let Some(v) = p.get(Param::Variant).and_then(|i| ELEM_VARIANTS.get(i as usize)) {
        c.variant = *v;
    }
    if let Some(t) = p.get(Param::Threads) {
        c.threads = t as u32;
    }
    if let Some(b) = p.get(Param::BlocksPerSm) {
        c.blocks_per_sm = b as u32;
    }
    if let Some(ch) = p.get(Param::CpuChunk) {
        c.cpu_chunk = ch as usize;
    }
    c
}

fn variant_of(p: &Point) -> Option<ElemVariant> {
    p.get(Param::Variant).and_then(|i| ELEM_VARIANTS.get(i as usize)).copied()
}

/// The candidates to measure and the pruned points, as configs.
pub fn candidates(d: &Description, shape: &Shape, base: ElemConfig) -> (Vec<ElemConfig>, Vec<Pruned>) {
    let res = |p: &Point| variant_of(p).and_then(|v| d.resources_of(shape.op, shape.dtype, v));
    let host = |p: &Point| to_config(p, base).validate(shape.op, None).map_err(|e| e.to_string());
    let ctx = Context { limits: d.limits, resources: &res, host: &host };
    let (keep, pruned) = space(d, shape).solve(&ctx);
    let mut out: Vec<ElemConfig> = Vec::with_capacity(keep.len());
    for c in keep.iter().map(|p| to_config(p, base)) {
        if !out.contains(&c) {
            out.push(c);
        }
    }
    (out, pruned)
}

/// Instructions per element besides memory access (a rough count of the f32 maths).
fn work_per_element(op: ElemOp, dtype: DType) -> f64 {
    let narrow = dtype != DType::F32;
    let gelu = |f32_cost: f64| if narrow { f32_cost * 0.5 } else { f32_cost };
    match op {
        ElemOp::Copy => 0.0,
        ElemOp::Scale | ElemOp::Relu | ElemOp::Add | ElemOp::Axpy => 1.0,
        ElemOp::BiasAdd => 3.0,
        ElemOp::GeluErf => gelu(30.0),
        ElemOp::GeluTanh => gelu(24.0),
        ElemOp::Chain(a) => {
            2.0 + match a.name() {
                "gelu_erf" => gelu(30.0),
                "gelu_tanh" => gelu(24.0),
                "relu" => 1.0,
                _ => 0.0,
            }
        }
    }
}

/// Predicted time (ms) of `cfg` on `shape`: a roofline of memory bandwidth and instruction
/// issue, with the bandwidth scaled by the bytes the resident threads keep in flight
/// (Little's law: about a microsecond of latency must be covered), plus launch overhead.
/// Only its ranking matters: the model-guided strategy measures candidates best-first.
pub fn predict_ms(d: &Description, shape: &Shape, cfg: &ElemConfig) -> f64 {
    let elem = shape.dtype.size_bytes();
    let bytes = shape.op.min_bytes(shape.n, elem, 0) as f64;
    let work = work_per_element(shape.op, shape.dtype);
    let Some(l) = d.limits else {
        // CPU: bandwidth-bound work split into tasks; per-task overhead and load imbalance.
        let threads = d.cpu_threads.max(1) as f64;
        let tasks = (shape.n as f64 / cfg.cpu_chunk as f64).ceil().max(1.0);
        let t_mem = bytes / (d.peak_gbps.max(1.0) * 1e9) + shape.n as f64 * work * 1e-9 / threads;
        let rounds = (tasks / threads).ceil();
        let imbalance = rounds * threads / tasks;
        return (t_mem * imbalance + tasks * 2e-6 / threads) * 1e3;
    };
    let res = d.resources_of(shape.op, shape.dtype, cfg.variant).unwrap_or(KernelResources {
        registers: 32,
        shared_bytes: 0,
        max_threads: 1024,
        ..KernelResources::default()
    });
    let lanes = if cfg.variant.vec16 { shape.dtype.lanes() } else { 1 } as f64;
    let per_block = f64::from(cfg.threads) * f64::from(cfg.variant.unroll) * lanes;
    let needed_blocks = (shape.n as f64 / per_block).ceil().max(1.0);
    let sms = f64::from(l.sm_count.max(1));
    let grid =
        if cfg.blocks_per_sm > 0 { needed_blocks.min(f64::from(cfg.blocks_per_sm) * sms) } else { needed_blocks };
    let occ = occupancy(&l, cfg.threads, &res, 0);
    let active_blocks = (grid / sms).ceil().min(f64::from(occ.blocks_per_sm.max(1)));
    let inputs = shape.op.inputs() as f64;
    let inflight =
        active_blocks * f64::from(cfg.threads) * f64::from(cfg.variant.unroll) * lanes * elem as f64 * inputs;
    let peak = d.peak_gbps.max(1.0) * 1e9;
    let needed = peak * 1.0e-6 / sms;
    let efficiency = (inflight / needed).clamp(0.05, 1.0);
    let t_mem = bytes / (peak * 0.9 * efficiency);
    // Issue: the maths plus address/memory instructions (per vector, or per element).
    let mem_instr = (inputs + 1.0) * 4.0 / lanes;
    let issue_rate = sms * 128.0 * d.clock_ghz.max(0.1) * 1e9;
    let t_issue = shape.n as f64 * (work + mem_instr) / issue_rate;
    // A one-pass grid pays for its last partial wave; a persistent one pays loop overhead.
    let wave = f64::from(occ.blocks_per_sm.max(1)) * sms;
    let waves = grid / wave;
    let tail = if cfg.blocks_per_sm == 0 && waves > 1.0 { waves.ceil() / waves } else { 1.0 };
    (t_mem.max(t_issue) * tail.min(1.25) + 3e-6) * 1e3
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::protocol::{DefaultJson, ResourceJson};
    use ferrotune_profile::Device;
    use proptest::prelude::*;

    pub(crate) fn gpu_description(regs: u32) -> Description {
        let mut resources = Vec::new();
        for op in ElemOp::ALL {
            for dt in DType::ALL {
                for v in ELEM_VARIANTS {
                    let r = regs + 8 * v.unroll;
                    let max_threads = (65536 / (r * 32).div_ceil(256) / 256 * 32 * 8).clamp(32, 1024);
                    resources.push(ResourceJson {
                        op: op.name().into(),
                        dtype: dt.name().into(),
                        vec16: v.vec16,
                        unroll: v.unroll,
                        resources: KernelResources { registers: r, shared_bytes: 0, max_threads, ..Default::default() },
                    });
                }
            }
        }
        Description {
            backend: "cuda".into(),
            device: Device {
                backend: "cuda".into(),
                name: "test".into(),
                arch: "sm_90".into(),
                sm_count: 132,
                driver: "13.0".into(),
            },
            builds: crate::protocol::build_keys().into_iter().map(|k| (k, "b".to_string())).collect(),
            limits: Some(crate::space::tests::h100()),
            cache_bytes: 50 << 20,
            peak_gbps: 3350.0,
            clock_ghz: 1.98,
            cpu_threads: 16,
            resources,
            gemm_resources: Vec::new(),
            clifford_resources: Vec::new(),
            defaults: vec![DefaultJson {
                op: "add".into(),
                dtype: "f32".into(),
                config: ElemConfig::heuristic(ElemOp::Add, DType::F32, None).into(),
            }],
            clifford_defaults: Vec::new(),
            resources_from: "test".into(),
        }
    }

    #[test]
    fn the_gpu_space_is_exactly_the_compiled_variants() {
        let d = gpu_description(20);
        let shape = Shape { op: ElemOp::Add, dtype: DType::F32, n: 1 << 24 };
        let base = ElemConfig::heuristic(shape.op, shape.dtype, None);
        let (cands, pruned) = candidates(&d, &shape, base);
        assert_eq!(cands.len() + pruned.len(), ELEM_VARIANTS.len() * THREADS.len() * BLOCKS_PER_SM.len());
        for v in ELEM_VARIANTS {
            assert!(cands.iter().any(|c| c.variant == v), "variant {v:?} has no candidate");
        }
        assert!(cands.iter().all(|c| ELEM_VARIANTS.contains(&c.variant)));
        assert!(!pruned.is_empty() && pruned.iter().all(|p| !p.reason.is_empty()));
    }

    #[test]
    fn the_model_prefers_vectors_and_enough_bytes_in_flight() {
        let d = gpu_description(20);
        let shape = Shape { op: ElemOp::Add, dtype: DType::F16, n: 1 << 26 };
        let base = ElemConfig::heuristic(shape.op, shape.dtype, None);
        let vec = ElemConfig { threads: 256, variant: ElemVariant { vec16: true, unroll: 2 }, ..base };
        let scalar = ElemConfig { variant: ElemVariant { vec16: false, unroll: 1 }, ..vec };
        let starved = ElemConfig { blocks_per_sm: 1, threads: 64, ..scalar };
        assert!(predict_ms(&d, &shape, &vec) < predict_ms(&d, &shape, &scalar));
        assert!(predict_ms(&d, &shape, &scalar) < predict_ms(&d, &shape, &starved));
    }

    proptest! {
        // Whatever the device limits and register counts, constraint solving only yields
        // configs the host accepts and the device can launch.
        #[test]
        fn solved_configs_are_always_valid(
            regs in 8u32..=255,
            max_block in prop::sample::select(vec![256u32, 512, 1024]),
            per_sm in prop::sample::select(vec![1024u32, 1536, 2048]),
            blocks in 8u32..=32,
            n in 1usize..1 << 28,
            op_i in 0usize..ElemOp::ALL.len(),
        ) {
            let mut d = gpu_description(regs);
            let l = d.limits.as_mut().unwrap();
            l.max_threads_per_block = max_block;
            l.max_threads_per_sm = per_sm;
            l.max_blocks_per_sm = blocks;
            let limits = *l;
            let shape = Shape { op: ElemOp::ALL[op_i], dtype: DType::F32, n };
            let base = ElemConfig::heuristic(shape.op, shape.dtype, None);
            let (cands, _) = candidates(&d, &shape, base);
            for c in cands {
                let info = ferrotune::DeviceInfo {
                    ordinal: 0, name: "t".into(), compute_capability: (9, 0), sm_count: 132, global_mem_bytes: 0,
                    l2_bytes: 0, shared_mem_per_block: 0, shared_mem_per_block_optin: 0, shared_mem_per_sm: 0,
                    max_threads_per_block: max_block, max_threads_per_sm: per_sm, registers_per_sm: 65536,
                    clock_khz: 0, memory_clock_khz: 0, memory_bus_bits: 0, driver_version: 13000,
                };
                prop_assert!(c.validate(shape.op, Some(&info)).is_ok(), "{c:?}");
                let r = d.resources_of(shape.op, shape.dtype, c.variant).unwrap();
                prop_assert!(c.threads <= r.max_threads);
                let occ = occupancy(&limits, c.threads, &r, 0);
                prop_assert!(c.blocks_per_sm <= occ.blocks_per_sm);
                prop_assert!(occ.fraction >= MIN_OCCUPANCY);
            }
        }

        #[test]
        fn cpu_chunks_are_valid(n in 1usize..1 << 26) {
            let mut d = gpu_description(20);
            d.limits = None;
            let shape = Shape { op: ElemOp::Relu, dtype: DType::Bf16, n };
            let base = ElemConfig::heuristic(shape.op, shape.dtype, None);
            let (cands, _) = candidates(&d, &shape, base);
            prop_assert!(!cands.is_empty());
            for c in cands {
                prop_assert!(c.validate(shape.op, None).is_ok());
                prop_assert!(c.cpu_chunk <= n.next_power_of_two().max(1024));
            }
        }
    }
}
