//! The worker process: the only place the tuner touches a device. It reads one request per
//! line on stdin and answers one JSON line on stdout: describe the machine, prepare a shape
//! (fresh random inputs, rotated buffer sets larger than the cache), then run, verify and
//! time candidates. A candidate that faults takes only this process down; the tuner records
//! it and starts a new worker.

use std::io::{BufRead, Write};

use ferrotune::ops;
use ferrotune::ops::gemm::variant_for;
use ferrotune::{Backend, BackendChoice, Buffer, DType, ElemConfig, ElemOp, Error, Scalar, Stream, View, bf16, f16};
use ferrotune_kernels::elementwise::ELEM_VARIANTS;
use ferrotune_kernels::gemm::tc::TILES;
use ferrotune_testkit::{Rng, check_against_reference, poison};
use rayon::prelude::*;

pub use crate::inject::{InjectKind, Injection, fake_ms, parse_injections};
pub(crate) use crate::inject::{injected, wrong_injected};
use crate::measure::{Repeat, Stats, time_on_stream};
use crate::protocol::{
    ConfigJson, DefaultJson, Description, ElemConfigJson, ElemShape, EvalOutcome, GemmDtype, GemmResourceJson, Request,
    ResourceJson, Response, Shape,
};
use crate::space::{KernelResources, Limits};
use crate::worker_clifford::{self, CliffordPrepared};
use crate::worker_gemm::{self, GemmBench};

/// The cache size assumed on the CPU backend (a large last-level cache).
pub(crate) const CPU_CACHE_BYTES: u64 = 64 << 20;

/// Rotated buffer sets for inputs of `set_bytes`: enough that consecutive timed runs never
/// find their data in a cache of `cache` bytes (2 to `max`, within `memory`).
pub(crate) fn rotation(set_bytes: u64, cache: u64, memory: u64, max: u64) -> usize {
    let want = (3 * cache).div_ceil(set_bytes.max(1)).clamp(2, max.max(2));
    want.min(memory / set_bytes.max(1)).max(1) as usize
}

/// One set of buffers (inputs and output) of a prepared shape.
struct Set<T: Scalar> {
    ins: Vec<Buffer<T>>,
    out: Buffer<T>,
}

pub(crate) struct Bench<T: Scalar> {
    shape: ElemShape,
    cols: usize,
    alpha: f32,
    sets: Vec<Set<T>>,
    host_in: Vec<Vec<T>>,
    out_init: Vec<T>,
    /// The first output that passed the f64 reference check: later candidates that match it
    /// bit for bit are verified without recomputing the reference.
    checked: Option<Vec<T>>,
}

pub(crate) enum Prepared {
    F32(Bench<f32>),
    F16(Bench<f16>),
    Bf16(Bench<bf16>),
    GemmF32(GemmBench<f32>),
    GemmF16(GemmBench<f16>),
    GemmBf16(GemmBench<bf16>),
    Clifford(CliffordPrepared),
}

/// The worker's state between requests.
pub struct Worker {
    pub(crate) backend: Option<(String, Backend)>,
    pub(crate) prepared: Option<Prepared>,
    pub(crate) inject: Result<Vec<Injection>, String>,
    pub(crate) fake_time: bool,
}

impl Default for Worker {
    fn default() -> Self {
        Worker::from_env()
    }
}

impl Worker {
    /// A worker configured by `FERROTUNE_TUNE_INJECT` and `FERROTUNE_TUNE_FAKE_TIME`.
    pub fn from_env() -> Worker {
        let inject = parse_injections(&std::env::var("FERROTUNE_TUNE_INJECT").unwrap_or_default());
        let fake_time = std::env::var("FERROTUNE_TUNE_FAKE_TIME").is_ok_and(|v| v == "1");
        Worker { backend: None, prepared: None, inject, fake_time }
    }

    fn backend(&mut self, name: &str) -> Result<Backend, String> {
        if let Some((n, b)) = &self.backend
            && (n == name || name == "auto")
        {
            return Ok(b.clone());
        }
        let choice: BackendChoice = name.parse()?;
        let b = Backend::new(choice).map_err(|e| format!("opening the {name} backend: {e}"))?;
        self.backend = Some((b.name().to_string(), b.clone()));
        Ok(b)
    }

    /// Serves one request. The second value is true when the worker must exit after
    /// answering (its CUDA context may be poisoned).
    pub fn handle(&mut self, req: Request) -> (Response, bool) {
        let err = |why: String| (Response::Error { why }, false);
        match req {
            Request::Describe { backend, ops, dtypes, gemm, clifford, resources_dir } => {
                if let Err(why) = &self.inject {
                    return err(format!("FERROTUNE_TUNE_INJECT: {why}"));
                }
                let shapes = gemm.iter().chain(&clifford).map(Shape::try_from).collect::<Result<Vec<_>, _>>();
                let shapes = match shapes {
                    Ok(g) => g,
                    Err(why) => return err(why),
                };
                let d = self.backend(&backend).and_then(|b| {
                    let mut d = describe(&b, &ops, &dtypes, &shapes, resources_dir.as_deref())?;
                    (d.clifford_defaults, d.clifford_resources) = worker_clifford::describe(&b, &shapes)?;
                    Ok(d)
                });
                match d {
                    Ok(d) => (Response::Description(Box::new(d)), false),
                    Err(why) => err(why),
                }
            }
            Request::Prepare { backend, shape, seed } => {
                let shape = match Shape::try_from(&shape) {
                    Ok(s) => s,
                    Err(why) => return err(why),
                };
                let b = match self.backend(&backend) {
                    Ok(b) => b,
                    Err(why) => return err(why),
                };
                self.prepared = None;
                let r = match shape {
                    Shape::Elem(e) => match e.dtype {
                        DType::F32 => prepare::<f32>(&b, e, seed).map(Prepared::F32),
                        DType::F16 => prepare::<f16>(&b, e, seed).map(Prepared::F16),
                        DType::Bf16 => prepare::<bf16>(&b, e, seed).map(Prepared::Bf16),
                    },
                    Shape::Gemm(g) => match g.dtype.dtype() {
                        DType::F32 => worker_gemm::prepare::<f32>(&b, g, seed).map(Prepared::GemmF32),
                        DType::F16 => worker_gemm::prepare::<f16>(&b, g, seed).map(Prepared::GemmF16),
                        DType::Bf16 => worker_gemm::prepare::<bf16>(&b, g, seed).map(Prepared::GemmBf16),
                    },
                    Shape::Clifford(c) => CliffordPrepared::prepare(&b, c, seed).map(Prepared::Clifford),
                };
                match r {
                    Ok(p) => {
                        let (sets, bytes) = match &p {
                            Prepared::F32(b) => b.footprint(),
                            Prepared::F16(b) => b.footprint(),
                            Prepared::Bf16(b) => b.footprint(),
                            Prepared::GemmF32(b) => b.footprint(),
                            Prepared::GemmF16(b) => b.footprint(),
                            Prepared::GemmBf16(b) => b.footprint(),
                            Prepared::Clifford(b) => b.footprint(),
                        };
                        self.prepared = Some(p);
                        (Response::Prepared { sets, bytes_per_set: bytes }, false)
                    }
                    Err(e) => (Response::Error { why: format!("preparing {}: {e}", shape.label()) }, is_fatal(&e)),
                }
            }
            Request::Eval { config, warmup, iters } => {
                let Some((_, backend)) = &self.backend else { return err("eval before prepare".into()) };
                let s = backend.stream();
                let inject = self.inject.clone().unwrap_or_default();
                let repeat = Repeat { warmup, iters };
                let fake = self.fake_time;
                let out = match (&mut self.prepared, config) {
                    (None, _) => return err("eval before prepare".into()),
                    (Some(Prepared::F32(b)), ConfigJson::Elem(c)) => b.eval(&s, c, repeat, &inject, fake),
                    (Some(Prepared::F16(b)), ConfigJson::Elem(c)) => b.eval(&s, c, repeat, &inject, fake),
                    (Some(Prepared::Bf16(b)), ConfigJson::Elem(c)) => b.eval(&s, c, repeat, &inject, fake),
                    (Some(Prepared::GemmF32(b)), ConfigJson::Gemm(c)) => b.eval(&s, c, repeat, &inject, fake),
                    (Some(Prepared::GemmF16(b)), ConfigJson::Gemm(c)) => b.eval(&s, c, repeat, &inject, fake),
                    (Some(Prepared::GemmBf16(b)), ConfigJson::Gemm(c)) => b.eval(&s, c, repeat, &inject, fake),
                    (Some(Prepared::Clifford(b)), ConfigJson::Clifford(c)) => b.eval(&s, c, repeat, &inject, fake),
                    (Some(_), c) => return err(format!("config {c} is not of the prepared shape's op family")),
                };
                let fatal = matches!(out, EvalOutcome::Failed { fatal: true, .. });
                (Response::Outcome(out), fatal)
            }
        }
    }
}

/// Runs the worker on `input`/`output` until end of input or a fatal failure. Returns the
/// process exit code.
pub fn serve(input: impl BufRead, mut output: impl Write) -> i32 {
    let mut w = Worker::from_env();
    for line in input.lines() {
        let Ok(line) = line else { return 2 };
        if line.trim().is_empty() {
            continue;
        }
        let (resp, fatal) = match serde_json::from_str::<Request>(&line) {
            Ok(req) => w.handle(req),
            Err(e) => (Response::Error { why: format!("bad request: {e}") }, false),
        };
        let text = serde_json::to_string(&resp).unwrap_or_else(|e| format!("{{\"kind\":\"error\",\"why\":\"{e}\"}}"));
        if writeln!(output, "{text}").and_then(|_| output.flush()).is_err() {
            return 2;
        }
        if fatal {
            return 3;
        }
    }
    0
}

pub(crate) fn is_fatal(e: &Error) -> bool {
    matches!(e, Error::Driver { .. })
}

/// Resident blocks per SM by compute capability (CUDA's occupancy tables).
fn max_blocks_per_sm(cc: (i32, i32)) -> u32 {
    match cc {
        (8, 6) | (8, 7) => 16,
        (8, 9) => 24,
        (7, 5) => 16,
        _ => 32,
    }
}

#[derive(serde::Deserialize)]
struct PtxasEntry {
    name: String,
    registers: u32,
    shared_bytes: u32,
}

fn describe(
    b: &Backend,
    ops: &[String],
    dtypes: &[String],
    gemm: &[Shape],
    resources_dir: Option<&str>,
) -> Result<Description, String> {
    let s = b.stream();
    let (device, machine_builds) = ferrotune::tuned::machine(&s).map_err(|e| e.to_string())?;
    let builds =
        crate::protocol::build_keys().into_iter().map(|k| (machine_builds.of(&k), k)).map(|(b, k)| (k, b)).collect();
    let ops: Vec<ElemOp> = ops.iter().filter_map(|o| ElemOp::from_name(o)).collect();
    let dtypes: Vec<DType> = DType::ALL.into_iter().filter(|d| dtypes.iter().any(|x| x == d.name())).collect();
    let mut defaults = Vec::new();
    for &op in &ops {
        for &dt in &dtypes {
            let config = ElemConfig::heuristic(op, dt, b.device()).into();
            defaults.push(DefaultJson { op: op.name().into(), dtype: dt.name().into(), config });
        }
    }
    let cpu_threads = match b {
        Backend::Cpu(c) => c.threads(),
        Backend::Cuda(_) => rayon::current_num_threads(),
    };
    let Some(info) = b.device() else {
        return Ok(Description {
            backend: "cpu".into(),
            device,
            builds,
            limits: None,
            cache_bytes: CPU_CACHE_BYTES,
            peak_gbps: 20.0,
            clock_ghz: 3.0,
            cpu_threads,
            resources: Vec::new(),
            gemm_resources: Vec::new(),
            clifford_resources: Vec::new(),
            defaults,
            clifford_defaults: Vec::new(),
            resources_from: "not applicable (CPU)".into(),
        });
    };
    let Backend::Cuda(gpu) = b else { return Err("a device without a CUDA backend".into()) };
    let arch = gpu.ptx_arch().map_err(|e| e.to_string())?;
    // Register counts from ptxas's report when `cargo xtask ptx` wrote one beside the PTX;
    // the limit itself always comes from the driver.
    let report: Vec<PtxasEntry> = resources_dir
        .map(|d| std::path::Path::new(d).join(format!("ferrotune_kernels.{arch}.resources.json")))
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let mut resources = Vec::new();
    for &op in &ops {
        for &dt in &dtypes {
            for v in ELEM_VARIANTS {
                let max_threads =
                    ops::elementwise::max_threads(&s, op, dt, v).map_err(|e| e.to_string())?.unwrap_or(1024);
                let name = ops::elementwise::entry_name(op, dt, v);
                let (registers, shared_bytes) = report
                    .iter()
                    .find(|e| e.name == name)
                    .map(|e| (e.registers, e.shared_bytes))
                    // Without the report: the most registers that still allow `max_threads`.
                    .unwrap_or((info.registers_per_sm / max_threads.max(1), 0));
                resources.push(ResourceJson {
                    op: op.name().into(),
                    dtype: dt.name().into(),
                    vec16: v.vec16,
                    unroll: v.unroll,
                    resources: KernelResources { registers, shared_bytes, max_threads, ..Default::default() },
                });
            }
        }
    }
    // Every tile that can run each GEMM shape: registers, the register-limited block size and
    // local memory from the driver; static shared memory from the ptxas report.
    let mut gemm_resources: Vec<GemmResourceJson> = Vec::new();
    for shape in gemm {
        let Shape::Gemm(g) = shape else { continue };
        let dt = g.dtype.dtype();
        // Each tile with the shape's own output, and with the f32 output split-K's partial
        // products use (for 16-bit inputs only tile 0 has one).
        let variants = (0..TILES.len()).flat_map(|tile| {
            [dt, DType::F32].map(|out| variant_for(&g.gemm().tile(tile), dt, out, 256, 256).ok()).into_iter().flatten()
        });
        // The Hopper tiles (sm_90a module only; absent elsewhere, which prunes their points).
        let hopper = ferrotune_kernels::gemm_sm90::Sm90Variant::all()
            .filter(|v| v.dtype == dt && v.out_dtype() == dt)
            .map(|v| (v.entry_name().as_str().to_string(), v.tile().threads(), v.tile().smem_bytes()));
        // The tiles on the packed copy of unaligned operands (all aligned).
        let packed = ferrotune::ops::pack::packed_gemm(&g.gemm(), dt, [256, 256]);
        let packed = (0..TILES.len()).filter_map(move |tile| variant_for(&packed.tile(tile), dt, dt, 256, 256).ok());
        // The exact-f32 tiles (`GemmDtype::F32` shapes only).
        let ffma = if g.dtype == GemmDtype::F32 { crate::gemm_ffma::variants(g) } else { Vec::new() };
        let tiles = variants
            .chain(packed)
            .chain(ffma)
            .map(|v| (v.entry_name().as_str().to_string(), v.block().2, v.smem_bytes()));
        // The small-M entries of the shape's row group (both load forms: packing changes it).
        let small_m = ferrotune_kernels::gemv::m_groups_for(g.m).filter(|_| dt != DType::F32).into_iter().flat_map(
            move |groups| {
                let widths = ferrotune_kernels::gemv::WIDTHS.into_iter();
                widths.flat_map(move |w| [true, false].map(move |vec| (vec, w))).filter_map(move |(vec, w)| {
                    let name = ferrotune_kernels::gemv::entry_name(dt, dt, groups, vec, w)?.to_string();
                    Some((name, ferrotune_kernels::gemv::THREADS, ferrotune_kernels::gemv::smem_bytes(groups, w)))
                })
            },
        );
        for (name, threads, smem) in tiles.chain(hopper).chain(small_m) {
            if gemm_resources.iter().any(|r| r.kernel == name) {
                continue;
            }
            let Some(f) = ferrotune::module::function_resources(&s, &name).map_err(|e| e.to_string())? else {
                continue;
            };
            let shared_bytes = report.iter().find(|e| e.name == name).map_or(0, |e| e.shared_bytes);
            let resources = KernelResources {
                registers: f.registers,
                shared_bytes,
                max_threads: f.max_threads,
                block_threads: threads,
                dynamic_shared: smem as u32,
                local_bytes: f.local_bytes,
            };
            gemm_resources.push(GemmResourceJson { kernel: name, resources });
        }
    }
    Ok(Description {
        backend: "cuda".into(),
        device,
        builds,
        limits: Some(Limits {
            sm_count: info.sm_count,
            max_threads_per_block: info.max_threads_per_block,
            max_threads_per_sm: info.max_threads_per_sm,
            max_blocks_per_sm: max_blocks_per_sm(info.compute_capability),
            registers_per_sm: info.registers_per_sm,
            shared_per_block: info.shared_mem_per_block,
            shared_per_sm: info.shared_mem_per_sm,
            shared_per_block_optin: info.shared_mem_per_block_optin,
            // The driver keeps 1 KiB of every resident block's shared memory from sm_80 on.
            shared_reserved_per_block: if info.compute_capability.0 >= 8 { 1024 } else { 0 },
        }),
        cache_bytes: u64::from(info.l2_bytes),
        peak_gbps: info.theoretical_bandwidth() / 1e9,
        clock_ghz: f64::from(info.clock_khz) / 1e6,
        cpu_threads,
        resources,
        gemm_resources,
        clifford_resources: Vec::new(),
        defaults,
        clifford_defaults: Vec::new(),
        resources_from: if report.is_empty() {
            "driver (max threads); registers estimated".into()
        } else {
            "driver (max threads) + ptxas report (registers)".into()
        },
    })
}

/// Tensors read besides the output (in-place ops read the output too).
fn separate_inputs(op: ElemOp) -> usize {
    match op {
        ElemOp::Add => 2,
        ElemOp::Chain(_) => 3,
        _ => 1,
    }
}

fn prepare<T: Scalar>(b: &Backend, shape: ElemShape, seed: u64) -> ferrotune::Result<Bench<T>> {
    let s = b.stream();
    let n = shape.n;
    // bias_add: rows of the largest power-of-two divisor of n, at most 4096 columns.
    let cols = if shape.op == ElemOp::BiasAdd { 1usize << n.trailing_zeros().min(12) } else { 0 };
    let mut rng = Rng::new(seed);
    let host_in: Vec<Vec<T>> = (0..separate_inputs(shape.op))
        .map(|i| if shape.op == ElemOp::BiasAdd && i == 0 { rng.vec(cols, -2.0, 2.0) } else { rng.vec(n, -4.0, 4.0) })
        .collect();
    let out_init: Vec<T> = rng.vec(n, -4.0, 4.0);
    // Enough copies that consecutive timed runs never find their data in the cache.
    let elem = T::DTYPE.size_bytes() as u64;
    let set_bytes = (host_in.iter().map(|v| v.len() as u64).sum::<u64>() + n as u64) * elem;
    let cache = b.device().map_or(CPU_CACHE_BYTES, |d| u64::from(d.l2_bytes));
    let mem_cap = b.device().map_or(4u64 << 30, |d| d.global_mem_bytes as u64 / 4);
    let sets_n = rotation(set_bytes, cache, mem_cap, 32);
    let mut sets = Vec::with_capacity(sets_n);
    for _ in 0..sets_n {
        let ins = host_in.iter().map(|h| Buffer::from_slice(&s, h)).collect::<ferrotune::Result<Vec<_>>>()?;
        sets.push(Set { ins, out: Buffer::from_slice(&s, &out_init)? });
    }
    s.synchronize()?;
    Ok(Bench { shape, cols, alpha: 0.5, sets, host_in, out_init, checked: None })
}

/// `check_against_reference` over chunks in parallel (chunks are whole bias rows).
fn check_parallel<T: Scalar>(op: ElemOp, alpha: f32, inputs: &[&[T]], got: &[T], cols: usize) -> Result<(), String> {
    let chunk = cols * (1usize << 16).div_ceil(cols);
    let n = got.len();
    let bad = (0..n.div_ceil(chunk)).into_par_iter().find_map_first(|c| {
        let r = c * chunk..((c + 1) * chunk).min(n);
        let part: Vec<&[T]> = inputs.iter().map(|x| if x.len() == n { &x[r.clone()] } else { *x }).collect();
        check_against_reference(op, alpha, &part, &got[r.clone()]).err().map(|e| format!("chunk at {}: {e}", r.start))
    });
    bad.map_or(Ok(()), Err)
}

impl<T: Scalar> Bench<T> {
    fn footprint(&self) -> (usize, u64) {
        let elem = T::DTYPE.size_bytes() as u64;
        let per = (self.host_in.iter().map(|v| v.len() as u64).sum::<u64>() + self.shape.n as u64) * elem;
        (self.sets.len(), per)
    }

    fn run(&mut self, s: &Stream, cfg: &ElemConfig, set: usize) -> ferrotune::Result<()> {
        let k = set % self.sets.len();
        let set = &mut self.sets[k];
        let views: Vec<View<'_, T>> = set.ins.iter().map(|b| b.all()).collect();
        let refs: Vec<&View<'_, T>> = views.iter().collect();
        ops::run_elementwise(s, self.shape.op, cfg, &refs, &mut set.out.all_mut(), self.alpha)
    }

    fn eval(&mut self, s: &Stream, c: ElemConfigJson, repeat: Repeat, inject: &[Injection], fake: bool) -> EvalOutcome {
        let failed = |e: Error| EvalOutcome::Failed { why: e.to_string(), fatal: is_fatal(&e) };
        let (shape, config) = (Shape::Elem(self.shape), ConfigJson::Elem(c));
        if let Some(o) = injected(s, inject, &shape, &config) {
            return o;
        }
        let cfg: ElemConfig = c.into();
        // Verification run on fresh output contents: poison where the op overwrites the
        // output (an element never written then fails), the initial values where it updates.
        let in_place = matches!(self.shape.op, ElemOp::Axpy | ElemOp::BiasAdd);
        let init = if in_place { self.out_init.clone() } else { vec![poison::<T>(); self.shape.n] };
        if let Err(e) = self.sets[0].out.copy_from(s, &init) {
            return failed(e);
        }
        if let Err(e) = self.run(s, &cfg, 0) {
            return failed(e);
        }
        let mut got = match self.sets[0].out.to_vec(s) {
            Ok(v) => v,
            Err(e) => return failed(e),
        };
        if wrong_injected(inject, &shape, &config) && !got.is_empty() {
            let i = got.len() / 2;
            got[i] = T::from_f32(got[i].to_f32() + 1000.0);
        }
        let verified = match &self.checked {
            Some(r)
                if r.len() == got.len()
                    && r.iter().zip(&got).all(|(a, b)| a.to_f32().to_bits() == b.to_f32().to_bits()) =>
            {
                "bit-identical to a reference-checked output".to_string()
            }
            _ => {
                let ref_in: Vec<&[T]> = match self.shape.op {
                    ElemOp::Axpy => vec![&self.host_in[0], &self.out_init],
                    ElemOp::BiasAdd => vec![&self.out_init, &self.host_in[0]],
                    _ => self.host_in.iter().map(|v| v.as_slice()).collect(),
                };
                if let Err(why) = check_parallel(self.shape.op, self.alpha, &ref_in, &got, self.cols.max(1)) {
                    return EvalOutcome::Invalid { why };
                }
                if self.checked.is_none() {
                    self.checked = Some(got);
                }
                "within tolerance of the f64 reference".to_string()
            }
        };
        let stats = match time_on_stream(s, repeat, |i| self.run(s, &cfg, i)) {
            Ok(st) => st,
            Err(e) => return failed(e),
        };
        let stats = if fake {
            let t = fake_ms(&config);
            Stats { median_ms: t, min_ms: t, max_ms: t, mad_ms: 0.0, samples: stats.samples }
        } else {
            stats
        };
        EvalOutcome::Ok { stats, verified, kernel: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injections_parse_and_match() {
        let inj = parse_injections("fault@threads=256,vec16=true; wrong@cpu_chunk=4096;hang").unwrap();
        assert_eq!(inj.len(), 3);
        assert_eq!(inj[0].kind, InjectKind::Fault);
        assert!(inj[2].matches.is_empty());
        let shape = Shape::elem(ElemOp::Add, DType::F32, 10);
        let mut c: ElemConfigJson = ElemConfig::heuristic(ElemOp::Add, DType::F32, None).into();
        c.threads = 256;
        assert!(inj[0].applies(&shape, &ConfigJson::Elem(c)));
        c.vec16 = false;
        assert!(!inj[0].applies(&shape, &ConfigJson::Elem(c)));
        // GEMM keys match GEMM configs only.
        let g = parse_injections("wrong@tile=3,dtype=bf16").unwrap();
        let gs = Shape::Gemm(crate::gemm::tests::shape(crate::protocol::GemmDtype::Bf16, 64, 64, 64));
        let gc = |tile| {
            ConfigJson::Gemm(crate::protocol::GemmConfigJson {
                tile,
                cpu_rows: 16,
                split_k: 1,
                path: Default::default(),
                pack: None,
            })
        };
        assert!(g[0].applies(&gs, &gc(3)));
        assert!(!g[0].applies(&gs, &gc(2)));
        assert!(!g[0].applies(&shape, &ConfigJson::Elem(c)), "no tile in an elementwise config");
        assert!(parse_injections("explode@threads=1").is_err());
        assert!(parse_injections("fault@colour=red").is_err());
        assert!(parse_injections("fault@threads").is_err());
        assert_eq!(parse_injections("").unwrap(), vec![]);
    }

    #[test]
    fn a_cpu_worker_verifies_and_times_in_process() {
        let mut w = Worker { backend: None, prepared: None, inject: Ok(vec![]), fake_time: false };
        let describe = Request::Describe {
            backend: "cpu".into(),
            ops: vec!["add".into()],
            dtypes: vec!["f16".into()],
            gemm: vec![],
            clifford: vec![],
            resources_dir: None,
        };
        let (Response::Description(d), false) = w.handle(describe) else { panic!("describe failed") };
        assert_eq!(d.backend, "cpu");
        assert_eq!(d.defaults.len(), 1);
        let shape = (&Shape::elem(ElemOp::Add, DType::F16, 5000)).into();
        let prep = Request::Prepare { backend: "cpu".into(), shape, seed: 3 };
        let (Response::Prepared { sets, .. }, _) = w.handle(prep) else { panic!("prepare failed") };
        assert!(sets >= 2, "buffers are rotated");
        let mut c = d.defaults[0].config;
        c.cpu_chunk = 1024;
        let config = ConfigJson::Elem(c);
        for _ in 0..2 {
            let (Response::Outcome(EvalOutcome::Ok { stats, .. }), false) =
                w.handle(Request::Eval { config, warmup: 1, iters: 3 })
            else {
                panic!("eval failed")
            };
            assert_eq!(stats.samples, 3);
        }
        w.inject = parse_injections("wrong@cpu_chunk=1024");
        let (Response::Outcome(out), _) = w.handle(Request::Eval { config, warmup: 1, iters: 3 }) else { panic!() };
        assert!(matches!(out, EvalOutcome::Invalid { ref why } if why.contains("element 2500")), "{out:?}");
    }
}
