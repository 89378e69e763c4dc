//! Search spaces: typed parameters with finite domains, declarative constraints between them,
//! and device-aware pruning (register-limited block size, shared memory, occupancy) before
//! anything is measured. Every pruned point is kept with its reason.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A tunable launch parameter. Elementwise uses the first four, GEMM the next five.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Param {
    /// Threads per block.
    Threads,
    /// Index of a compiled kernel variant (for elementwise: into `ELEM_VARIANTS`, i.e. vector
    /// width and unroll); only variants present in the PTX are in the domain.
    Variant,
    /// Persistent-grid cap (0 = one pass over the data).
    BlocksPerSm,
    /// Elements per rayon task (CPU backend).
    CpuChunk,
    /// Index of a compiled tensor-core GEMM tile (`gemm::tc::TILES`): block shape, warps,
    /// K per stage and stages come together, exactly as compiled into the PTX.
    Tile,
    /// Output rows per rayon task of the CPU GEMM.
    CpuRows,
    /// Slices K is split into (1 = off): f32 partial products in a workspace, then a reduce.
    SplitK,
    /// The GEMM kernel family: 0 the `mma.sync` tiles (`Tile`), 1 + i Hopper tile i
    /// (`gemm_sm90::TILES`; sm_90a only), then the small-M family (`gemv`).
    Path,
    /// Unaligned 16-bit GEMM operands: 0 run as given, 1 packed into an aligned copy first.
    Pack,
    /// Batch rows a block of a Clifford row kernel works on at once (its team is
    /// `Threads / RowsPerBlock` threads per row). The Clifford space also uses `Threads`,
    /// `Variant` (into the pass's compiled variants), `BlocksPerSm` and, on the CPU, `CpuRows`.
    RowsPerBlock,
    /// The Clifford backward's cluster form: 0 off, 1 a row shared by the fewest blocks of a
    /// thread-block cluster that cover it (`Threads` x the variant's features each; sm_90a).
    Cluster,
}

/// A parameter and the values it may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Domain {
    pub param: Param,
    pub values: Vec<u64>,
}

/// One point of a space: a value for every parameter, in the space's order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Point(pub Vec<(Param, u64)>);

impl Point {
    pub fn get(&self, p: Param) -> Option<u64> {
        self.0.iter().find(|(q, _)| *q == p).map(|(_, v)| *v)
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(p, v)| format!("{p:?}={v}")).collect();
        f.write_str(&parts.join(" "))
    }
}

/// The device limits pruning checks against (from the driver, via the worker).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub sm_count: u32,
    pub max_threads_per_block: u32,
    pub max_threads_per_sm: u32,
    pub max_blocks_per_sm: u32,
    pub registers_per_sm: u32,
    /// Shared memory per block without opting in (static allocations are limited to it).
    pub shared_per_block: u32,
    pub shared_per_sm: u32,
    /// Shared memory per block after opting in (dynamic allocations; 0: as `shared_per_block`).
    #[serde(default)]
    pub shared_per_block_optin: u32,
    /// Shared memory the driver reserves per resident block (1 KiB from sm_80 on).
    #[serde(default)]
    pub shared_reserved_per_block: u32,
}

impl Limits {
    /// The most shared memory one block can have (opt-in included).
    pub fn shared_optin(&self) -> u32 {
        self.shared_per_block_optin.max(self.shared_per_block)
    }
}

/// What one compiled kernel needs per launch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelResources {
    pub registers: u32,
    /// Static shared memory per block.
    pub shared_bytes: u32,
    /// Register-limited threads per block (from the driver, or derived from `registers`).
    pub max_threads: u32,
    /// Threads per block fixed by the kernel (GEMM tiles); 0: the config's `Threads` decide.
    #[serde(default)]
    pub block_threads: u32,
    /// Dynamic shared memory per block the kernel's launch needs (GEMM rings).
    #[serde(default)]
    pub dynamic_shared: u32,
    /// Local memory per thread (stack and register spills), from the driver.
    #[serde(default)]
    pub local_bytes: u32,
}

impl KernelResources {
    /// Threads per block of `p` with this kernel: fixed by the kernel, or the point's.
    pub fn threads(&self, p: &Point) -> Option<u64> {
        if self.block_threads > 0 { Some(u64::from(self.block_threads)) } else { p.get(Param::Threads) }
    }
}

/// A declarative constraint between parameters (and the device).
#[derive(Clone, Debug, PartialEq)]
pub enum Constraint {
    MultipleOf {
        param: Param,
        of: u64,
    },
    AtMost {
        param: Param,
        max: u64,
    },
    AtLeast {
        param: Param,
        min: u64,
    },
    /// Threads per block within the kernel's register-limited maximum.
    RegisterLimit,
    /// Static, the kernel's dynamic and `dynamic_per_block` more bytes of shared memory within
    /// the per-block limit (the opt-in limit when any of it is dynamic).
    SharedMemory {
        dynamic_per_block: u64,
    },
    /// At least `min` blocks resident per SM (registers, shared memory and threads allowing).
    MinResidentBlocks {
        min: u32,
    },
    /// The host library accepts the point's config for this shape (e.g. GEMM tiles other than
    /// 0 need 16-byte aligned operands): the reason is the host's own error.
    HostAccepts,
    /// A persistent grid (`BlocksPerSm` > 0) no larger than the blocks that can be resident
    /// at once: a larger one only adds a second, partial wave.
    ResidentGrid,
    /// Estimated occupancy (resident threads / max threads per SM) at least `min`.
    MinOccupancy {
        min: f64,
    },
}

/// What constraints look at besides the point: device limits, the resources of the kernel a
/// point selects (`None` on the CPU backend, where device checks do not apply) and the host's
/// validation of the config.
pub struct Context<'a> {
    pub limits: Option<Limits>,
    pub resources: &'a dyn Fn(&Point) -> Option<KernelResources>,
    pub host: &'a dyn Fn(&Point) -> Result<(), String>,
}

/// A point that will not be measured, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Pruned {
    pub point: Point,
    pub reason: String,
}

/// Resident blocks per SM and the resulting occupancy, and which resource limits them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Occupancy {
    pub blocks_per_sm: u32,
    pub fraction: f64,
    pub limiter: &'static str,
}

/// The occupancy calculator's estimate: registers are allocated per warp in units of 256,
/// shared memory per block; the tightest of threads, blocks, registers and shared memory wins.
pub fn occupancy(l: &Limits, threads: u32, r: &KernelResources, dynamic_shared: u64) -> Occupancy {
    let threads = threads.max(1);
    let warps = threads.div_ceil(32);
    let regs_per_warp = (r.registers.max(1) * 32).div_ceil(256) * 256;
    let by_regs = l.registers_per_sm / (regs_per_warp * warps).max(1);
    let by_threads = l.max_threads_per_sm / threads;
    let shared = u64::from(r.shared_bytes) + dynamic_shared + u64::from(l.shared_reserved_per_block);
    let by_shared =
        u64::from(l.shared_per_sm).checked_div(shared).map_or(u32::MAX, |b| b.min(u64::from(u32::MAX)) as u32);
    let options = [
        (by_threads, "threads per SM"),
        (l.max_blocks_per_sm, "blocks per SM"),
        (by_regs, "registers"),
        (by_shared, "shared memory"),
    ];
    let (blocks, limiter) = options.into_iter().min_by_key(|(b, _)| *b).unwrap_or((0, "threads per SM"));
    Occupancy {
        blocks_per_sm: blocks,
        fraction: f64::from(blocks * threads) / f64::from(l.max_threads_per_sm.max(1)),
        limiter,
    }
}

/// Parameters, their domains and the constraints every measured point satisfies.
#[derive(Clone, Debug, PartialEq)]
pub struct Space {
    pub domains: Vec<Domain>,
    pub constraints: Vec<Constraint>,
}

impl Space {
    /// Number of points before constraints.
    pub fn size(&self) -> usize {
        self.domains.iter().map(|d| d.values.len()).product()
    }

    /// Every point of the space, in order (the last parameter varies fastest).
    pub fn points(&self) -> Vec<Point> {
        let mut out = vec![Point(Vec::new())];
        for d in &self.domains {
            out = out
                .into_iter()
                .flat_map(|p| {
                    d.values.iter().map(move |v| {
                        let mut q = p.clone();
                        q.0.push((d.param, *v));
                        q
                    })
                })
                .collect();
        }
        out
    }

    /// Checks one point; the reason names the first violated constraint.
    pub fn check(&self, p: &Point, ctx: &Context<'_>) -> Result<(), String> {
        for c in &self.constraints {
            check_one(c, p, ctx)?;
        }
        Ok(())
    }

    /// Splits the space into the points to measure and the pruned ones (with reasons).
    pub fn solve(&self, ctx: &Context<'_>) -> (Vec<Point>, Vec<Pruned>) {
        let (mut keep, mut pruned) = (Vec::new(), Vec::new());
        for p in self.points() {
            match self.check(&p, ctx) {
                Ok(()) => keep.push(p),
                Err(reason) => pruned.push(Pruned { point: p, reason }),
            }
        }
        (keep, pruned)
    }
}

fn check_one(c: &Constraint, p: &Point, ctx: &Context<'_>) -> Result<(), String> {
    let val = |q: Param| p.get(q);
    match *c {
        Constraint::MultipleOf { param, of } => match val(param) {
            Some(v) if of == 0 || !v.is_multiple_of(of) || v == 0 => {
                Err(format!("{param:?} {v} is not a positive multiple of {of}"))
            }
            _ => Ok(()),
        },
        Constraint::AtMost { param, max } => match val(param) {
            Some(v) if v > max => Err(format!("{param:?} {v} > {max}")),
            _ => Ok(()),
        },
        Constraint::AtLeast { param, min } => match val(param) {
            Some(v) if v < min => Err(format!("{param:?} {v} < {min}")),
            _ => Ok(()),
        },
        Constraint::RegisterLimit => {
            let Some(r) = (ctx.resources)(p) else { return Ok(()) };
            let Some(t) = r.threads(p) else { return Ok(()) };
            if t > u64::from(r.max_threads) {
                return Err(format!(
                    "Threads {t} > {} (the kernel uses {} registers per thread)",
                    r.max_threads, r.registers
                ));
            }
            Ok(())
        }
        Constraint::SharedMemory { dynamic_per_block } => {
            let (Some(l), Some(r)) = (ctx.limits, (ctx.resources)(p)) else { return Ok(()) };
            let dynamic = u64::from(r.dynamic_shared) + dynamic_per_block;
            let need = u64::from(r.shared_bytes) + dynamic;
            let (limit, which) =
                if dynamic > 0 { (l.shared_optin(), "opt-in limit") } else { (l.shared_per_block, "limit") };
            if need > u64::from(limit) || u64::from(r.shared_bytes) > u64::from(l.shared_per_block) {
                return Err(format!("shared memory {need} B per block > device {which} {limit} B"));
            }
            Ok(())
        }
        Constraint::MinResidentBlocks { min } => {
            let (Some(l), Some(r)) = (ctx.limits, (ctx.resources)(p)) else { return Ok(()) };
            let Some(t) = r.threads(p) else { return Ok(()) };
            let occ = occupancy(&l, t as u32, &r, u64::from(r.dynamic_shared));
            if occ.blocks_per_sm < min {
                return Err(format!(
                    "{} resident blocks of {t} threads per SM < {min} (limited by {}: {} registers, {} B of shared memory)",
                    occ.blocks_per_sm,
                    occ.limiter,
                    r.registers,
                    r.shared_bytes + r.dynamic_shared
                ));
            }
            Ok(())
        }
        Constraint::HostAccepts => (ctx.host)(p),
        Constraint::ResidentGrid => {
            let (Some(l), Some(r), Some(b)) = (ctx.limits, (ctx.resources)(p), val(Param::BlocksPerSm)) else {
                return Ok(());
            };
            let Some(t) = r.threads(p) else { return Ok(()) };
            let occ = occupancy(&l, t as u32, &r, u64::from(r.dynamic_shared));
            if b > u64::from(occ.blocks_per_sm) {
                return Err(format!(
                    "BlocksPerSm {b} > {} resident blocks of {t} threads (limited by {})",
                    occ.blocks_per_sm, occ.limiter
                ));
            }
            Ok(())
        }
        Constraint::MinOccupancy { min } => {
            let (Some(l), Some(r)) = (ctx.limits, (ctx.resources)(p)) else { return Ok(()) };
            let Some(t) = r.threads(p) else { return Ok(()) };
            let occ = occupancy(&l, t as u32, &r, u64::from(r.dynamic_shared));
            if occ.fraction < min {
                return Err(format!(
                    "occupancy {:.0}% < {:.0}% (limited by {})",
                    occ.fraction * 100.0,
                    min * 100.0,
                    occ.limiter
                ));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn h100() -> Limits {
        Limits {
            sm_count: 132,
            max_threads_per_block: 1024,
            max_threads_per_sm: 2048,
            max_blocks_per_sm: 32,
            registers_per_sm: 65536,
            shared_per_block: 49152,
            shared_per_sm: 233472,
            shared_per_block_optin: 232448,
            shared_reserved_per_block: 1024,
        }
    }

    #[test]
    fn occupancy_matches_the_calculator() {
        let r = |registers| KernelResources { registers, shared_bytes: 0, max_threads: 1024, ..Default::default() };
        let o = occupancy(&h100(), 256, &r(32), 0);
        assert_eq!((o.blocks_per_sm, o.fraction), (8, 1.0));
        let o = occupancy(&h100(), 1024, &r(40), 0);
        assert_eq!(o.blocks_per_sm, 1, "40 regs x 1024 threads: only one block fits");
        assert_eq!(o.limiter, "registers");
        let o = occupancy(&h100(), 64, &r(16), 0);
        assert_eq!((o.blocks_per_sm, o.limiter), (32, "threads per SM"));
        let big = KernelResources { registers: 16, shared_bytes: 48 * 1024, max_threads: 1024, ..Default::default() };
        let o = occupancy(&h100(), 128, &big, 0);
        assert_eq!((o.blocks_per_sm, o.limiter), (4, "shared memory"));
        // A GEMM ring of 80 KiB: two blocks (the driver's 1 KiB per block included).
        let o = occupancy(&h100(), 256, &KernelResources { registers: 128, ..big }, 81920 - 48 * 1024);
        assert_eq!(o.blocks_per_sm, 2);
    }

    #[test]
    fn solve_prunes_with_reasons() {
        let space = Space {
            domains: vec![
                Domain { param: Param::Threads, values: vec![96, 100, 512, 1024] },
                Domain { param: Param::BlocksPerSm, values: vec![0, 4] },
            ],
            constraints: vec![
                Constraint::MultipleOf { param: Param::Threads, of: 32 },
                Constraint::RegisterLimit,
                Constraint::ResidentGrid,
            ],
        };
        let res = |_: &Point| {
            Some(KernelResources { registers: 64, shared_bytes: 0, max_threads: 1024, ..Default::default() })
        };
        let ctx = Context { limits: Some(h100()), resources: &res, host: &|_| Ok(()) };
        let (keep, pruned) = space.solve(&ctx);
        assert_eq!(space.size(), 8);
        assert_eq!(keep.len() + pruned.len(), 8);
        assert!(pruned.iter().any(|p| p.reason.contains("not a positive multiple of 32")));
        // 64 regs x 1024 threads = the whole register file: one block, so a cap of 4 is pruned.
        assert!(pruned.iter().any(|p| p.point.get(Param::Threads) == Some(1024) && p.reason.contains("registers")));
        assert!(keep.contains(&Point(vec![(Param::Threads, 1024), (Param::BlocksPerSm, 0)])));
    }
}
