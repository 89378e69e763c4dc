//! The worker's Clifford bench (the SGP forward or backward): fresh random inputs (rotated
//! copies, so consecutive timed runs do not find them in L2), the reference outputs computed
//! once on the CPU backend with the built-in config (the CPU op is itself checked against the
//! float64 reference in tests/clifford.rs), then per candidate: a run into poisoned outputs,
//! every element compared with the reference, and event-timed repetitions. Also what the
//! worker reports about the Clifford kernels (resources, built-in configs).

use ferrotune::ops::clifford::{self as cl, Clifford, CliffordConfig};
use ferrotune::tuned::CliffordPass;
use ferrotune::{Backend, Buffer, DType, Error, Scalar, Stream, bf16, f16};
use ferrotune_testkit::{Rng, Tolerance, cpu_backend, poison};
use rayon::prelude::*;

use crate::clifford::{cluster_entries, entry, variants};
use crate::measure::{Repeat, Stats, time_on_stream};
use crate::protocol::{
    CliffordConfigJson, CliffordDefaultJson, CliffordShape, ConfigJson, EvalOutcome, GemmResourceJson, Shape,
};
use crate::space::KernelResources;
use crate::worker::{CPU_CACHE_BYTES, Injection, fake_ms, injected, is_fatal, rotation, wrong_injected};

/// One rotated copy of a problem's tensors: inputs x, y, w (and the output's gradient for the
/// backward), outputs `out` or dx, dy, dw.
struct Set<T: Scalar> {
    ins: Vec<Buffer<T>>,
    outs: Vec<Buffer<T>>,
}

/// A prepared Clifford shape in the worker.
pub(crate) struct CliffordBench<T: Scalar> {
    shape: CliffordShape,
    sets: Vec<Set<T>>,
    workspace: Buffer<f32>,
    /// The reference outputs (forward: out; backward: dx, dy, dw), widened to f32.
    want: Vec<Vec<f32>>,
}

/// A prepared Clifford shape of any dtype.
pub(crate) enum CliffordPrepared {
    F32(CliffordBench<f32>),
    F16(CliffordBench<f16>),
    Bf16(CliffordBench<bf16>),
}

impl CliffordPrepared {
    pub(crate) fn prepare(b: &Backend, shape: CliffordShape, seed: u64) -> ferrotune::Result<CliffordPrepared> {
        Ok(match shape.dtype {
            DType::F32 => CliffordPrepared::F32(prepare(b, shape, seed)?),
            DType::F16 => CliffordPrepared::F16(prepare(b, shape, seed)?),
            DType::Bf16 => CliffordPrepared::Bf16(prepare(b, shape, seed)?),
        })
    }

    pub(crate) fn footprint(&self) -> (usize, u64) {
        match self {
            CliffordPrepared::F32(b) => b.footprint(),
            CliffordPrepared::F16(b) => b.footprint(),
            CliffordPrepared::Bf16(b) => b.footprint(),
        }
    }

    pub(crate) fn eval(
        &mut self,
        s: &Stream,
        c: CliffordConfigJson,
        repeat: Repeat,
        inject: &[Injection],
        fake: bool,
    ) -> EvalOutcome {
        match self {
            CliffordPrepared::F32(b) => b.eval(s, c, repeat, inject, fake),
            CliffordPrepared::F16(b) => b.eval(s, c, repeat, inject, fake),
            CliffordPrepared::Bf16(b) => b.eval(s, c, repeat, inject, fake),
        }
    }
}

/// The built-in config of `shape` on this stream: what the op runs untuned.
fn builtin(s: &Stream, shape: &CliffordShape) -> ferrotune::Result<CliffordConfig> {
    let p = &shape.problem;
    match (shape.pass, shape.dtype) {
        (CliffordPass::Forward, DType::F32) => cl::forward_config::<f32>(s, p),
        (CliffordPass::Forward, DType::F16) => cl::forward_config::<f16>(s, p),
        (CliffordPass::Forward, DType::Bf16) => cl::forward_config::<bf16>(s, p),
        (CliffordPass::Backward, DType::F32) => cl::backward_config::<f32>(s, p),
        (CliffordPass::Backward, DType::F16) => cl::backward_config::<f16>(s, p),
        (CliffordPass::Backward, DType::Bf16) => cl::backward_config::<bf16>(s, p),
    }
}

/// The built-in configs of the Clifford `shapes` and, on the GPU, the launch resources of
/// every kernel their passes may run (registers and the register-limited block size from
/// the driver).
pub(crate) fn describe(
    b: &Backend,
    shapes: &[Shape],
) -> Result<(Vec<CliffordDefaultJson>, Vec<GemmResourceJson>), String> {
    let s = b.stream();
    let (mut defaults, mut resources) = (Vec::new(), Vec::<GemmResourceJson>::new());
    for shape in shapes {
        let Shape::Clifford(c) = shape else { continue };
        let config = builtin(&s, c).map_err(|e| format!("the built-in config of {}: {e}", c.label()))?;
        defaults.push(CliffordDefaultJson { shape: c.label(), config: config.into() });
        if b.device().is_none() {
            continue;
        }
        // Every variant's entry, and the backward's cluster entries where the module has them.
        let names = variants(c.pass).into_iter().map(|v| entry(c, v)).chain(cluster_entries(c));
        for name in names {
            if resources.iter().any(|r| r.kernel == name) {
                continue;
            }
            let Some(f) = ferrotune::module::function_resources(&s, &name).map_err(|e| e.to_string())? else {
                continue;
            };
            let resources_of = KernelResources {
                registers: f.registers,
                max_threads: f.max_threads,
                local_bytes: f.local_bytes,
                ..Default::default()
            };
            resources.push(GemmResourceJson { kernel: name, resources: resources_of });
        }
    }
    Ok((defaults, resources))
}

/// Runs `pass` of `p` with `cfg` on `s` over one set of tensors.
fn run<T: Scalar>(
    s: &Stream,
    pass: CliffordPass,
    p: &Clifford,
    cfg: &CliffordConfig,
    set: &mut Set<T>,
    workspace: &mut Buffer<f32>,
) -> ferrotune::Result<()> {
    let (x, y, w) = (set.ins[0].all(), set.ins[1].all(), set.ins[2].all());
    match pass {
        CliffordPass::Forward => cl::run_sgp_forward(s, p, cfg, &x, &y, &w, &mut set.outs[0].all_mut()),
        CliffordPass::Backward => {
            let go = set.ins[3].all();
            let [dx, dy, dw] = &mut set.outs[..] else {
                return Err(Error::InvalidConfig { op: "clifford", why: "the backward has three outputs".into() });
            };
            cl::run_sgp_backward(
                s,
                p,
                cfg,
                &x,
                &y,
                &w,
                &go,
                &mut dx.all_mut(),
                &mut dy.all_mut(),
                &mut dw.all_mut(),
                workspace,
            )
        }
    }
}

fn prepare<T: Scalar>(b: &Backend, shape: CliffordShape, seed: u64) -> ferrotune::Result<CliffordBench<T>> {
    let s = b.stream();
    let p = shape.problem;
    let (len, wl) = (p.mv_len()?, p.sgp_weights_len()?);
    let mut rng = Rng::new(seed);
    let mut host: Vec<Vec<T>> = vec![rng.vec(len, -2.0, 2.0), rng.vec(len, -2.0, 2.0), rng.vec(wl, -1.0, 1.0)];
    let out_lens = match shape.pass {
        CliffordPass::Forward => vec![len],
        CliffordPass::Backward => {
            host.push(rng.vec(len, -1.0, 1.0));
            vec![len, len, wl]
        }
    };
    // The reference: the built-in config on the CPU backend.
    let cpu = cpu_backend();
    let cs = cpu.stream();
    let mut reference = Set {
        ins: host.iter().map(|h| Buffer::from_slice(&cs, h)).collect::<ferrotune::Result<_>>()?,
        outs: out_lens
            .iter()
            .map(|&n| Buffer::from_slice(&cs, &vec![poison::<T>(); n]))
            .collect::<ferrotune::Result<_>>()?,
    };
    let cpu_cfg = builtin(&cs, &shape)?;
    run(&cs, shape.pass, &p, &cpu_cfg, &mut reference, &mut Buffer::zeros(&cs, 0)?)?;
    let want = reference
        .outs
        .iter()
        .map(|o| o.to_vec(&cs).map(|v| v.iter().map(|x| x.to_f32()).collect()))
        .collect::<ferrotune::Result<Vec<Vec<f32>>>>()?;
    let elem = T::DTYPE.size_bytes() as u64;
    let set_bytes = (host.iter().map(|h| h.len()).sum::<usize>() + out_lens.iter().sum::<usize>()) as u64 * elem;
    let cache = b.device().map_or(CPU_CACHE_BYTES, |d| u64::from(d.l2_bytes));
    let memory = b.device().map_or(4u64 << 30, |d| d.global_mem_bytes as u64 / 4);
    let mut sets = Vec::new();
    for _ in 0..rotation(set_bytes, cache, memory, 16) {
        sets.push(Set {
            ins: host.iter().map(|h| Buffer::from_slice(&s, h)).collect::<ferrotune::Result<_>>()?,
            outs: out_lens
                .iter()
                .map(|&n| Buffer::from_slice(&s, &vec![poison::<T>(); n]))
                .collect::<ferrotune::Result<_>>()?,
        });
    }
    let workspace = Buffer::zeros(&s, 0)?;
    s.synchronize()?;
    Ok(CliffordBench { shape, sets, workspace, want })
}

/// The first element of `got` too far from `want`: the forward element by element (`rel` of
/// |want| + 1), gradients relative to the tensor's largest |want| (they mix signs, and dw sums
/// B terms in another order).
fn compare(pass: CliffordPass, dtype: DType, what: &str, got: &[f32], want: &[f32]) -> Result<(), String> {
    let narrow = dtype != DType::F32;
    let (rel, scale) = match pass {
        CliffordPass::Forward => (Tolerance::of(dtype).rel.max(1e-5), None),
        CliffordPass::Backward => {
            let top = want.par_iter().map(|v| f64::from(v.abs())).reduce(|| 0.0, f64::max);
            (if narrow { 2e-2 } else { 1e-4 }, Some(top.max(1e-12)))
        }
    };
    // In chunks over the rayon pool (outputs of large shapes hold 10^8 elements), the first
    // bad element of the first bad chunk reported.
    const CHUNK: usize = 1 << 16;
    let bad = got.par_chunks(CHUNK).zip(want.par_chunks(CHUNK)).enumerate().find_map_first(|(c, (gs, ws))| {
        gs.iter().zip(ws).enumerate().find_map(|(j, (&g, &w))| {
            let (g, w) = (f64::from(g), f64::from(w));
            let allowed = rel * scale.unwrap_or(w.abs() + 1.0);
            (!g.is_finite() || (g - w).abs() > allowed).then(|| {
                let i = c * CHUNK + j;
                format!("{what}[{i}]: got {g:e}, the built-in config on the CPU gave {w:e} (allowed {allowed:e})")
            })
        })
    });
    bad.map_or(Ok(()), Err)
}

impl<T: Scalar> CliffordBench<T> {
    fn footprint(&self) -> (usize, u64) {
        let set = &self.sets[0];
        let elems: usize = set.ins.iter().chain(&set.outs).map(|b| b.len()).sum();
        (self.sets.len(), (elems * T::DTYPE.size_bytes()) as u64)
    }

    fn eval(
        &mut self,
        s: &Stream,
        c: CliffordConfigJson,
        repeat: Repeat,
        inject: &[Injection],
        fake: bool,
    ) -> EvalOutcome {
        let failed = |e: Error| EvalOutcome::Failed { why: e.to_string(), fatal: is_fatal(&e) };
        let (shape, config) = (Shape::Clifford(self.shape), ConfigJson::Clifford(c));
        if let Some(o) = injected(s, inject, &shape, &config) {
            return o;
        }
        let (pass, p, cfg) = (self.shape.pass, self.shape.problem, CliffordConfig::from(c));
        // Verification run into poisoned outputs: an element never written stays NaN.
        for o in &mut self.sets[0].outs {
            let poisoned = vec![poison::<T>(); o.len()];
            if let Err(e) = o.copy_from(s, &poisoned) {
                return failed(e);
            }
        }
        if let Err(e) = run(s, pass, &p, &cfg, &mut self.sets[0], &mut self.workspace) {
            return failed(e);
        }
        let names: &[&str] = if pass == CliffordPass::Forward { &["out"] } else { &["dx", "dy", "dw"] };
        for (k, o) in self.sets[0].outs.iter().enumerate() {
            let mut got: Vec<f32> = match o.to_vec(s) {
                Ok(v) => v.iter().map(|x| x.to_f32()).collect(),
                Err(e) => return failed(e),
            };
            if k == 0 && wrong_injected(inject, &shape, &config) && !got.is_empty() {
                let i = got.len() / 2;
                got[i] += 1000.0;
            }
            if let Err(why) = compare(pass, self.shape.dtype, names[k], &got, &self.want[k]) {
                return EvalOutcome::Invalid { why };
            }
        }
        let n = self.sets.len();
        let stats =
            match time_on_stream(s, repeat, |i| run(s, pass, &p, &cfg, &mut self.sets[i % n], &mut self.workspace)) {
                Ok(st) => st,
                Err(e) => return failed(e),
            };
        let stats = if fake {
            let t = fake_ms(&config);
            Stats { median_ms: t, min_ms: t, max_ms: t, mad_ms: 0.0, samples: stats.samples }
        } else {
            stats
        };
        EvalOutcome::Ok {
            stats,
            verified: "every element within tolerance of the built-in config's CPU output".into(),
            kernel: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Request, Response, ShapeJson};
    use crate::worker::{Worker, parse_injections};

    #[test]
    fn a_cpu_worker_verifies_clifford_candidates_and_catches_wrong_ones() {
        for pass in CliffordPass::ALL {
            let mut w = Worker { backend: None, prepared: None, inject: Ok(vec![]), fake_time: false };
            let shape =
                Shape::Clifford(CliffordShape { pass, dtype: DType::Bf16, problem: Clifford::new(3, 37, 29, true) });
            let (Response::Description(d), false) = w.handle(Request::Describe {
                backend: "cpu".into(),
                ops: vec![],
                dtypes: vec![],
                gemm: vec![],
                clifford: vec![ShapeJson::from(&shape)],
                resources_dir: None,
            }) else {
                panic!("describe failed")
            };
            let Shape::Clifford(cs) = shape else { unreachable!() };
            let base = d.clifford_default_of(&cs).expect("the built-in config is described");
            assert!(d.clifford_resources.is_empty(), "no kernels on the CPU");
            let (Response::Prepared { sets, .. }, _) =
                w.handle(Request::Prepare { backend: "cpu".into(), shape: (&shape).into(), seed: 5 })
            else {
                panic!("prepare failed")
            };
            assert!(sets >= 2, "inputs are rotated");
            for rows in [1, 4, 64] {
                let config = ConfigJson::Clifford(CliffordConfig { cpu_rows: rows, ..base }.into());
                let (Response::Outcome(o), false) = w.handle(Request::Eval { config, warmup: 1, iters: 2 }) else {
                    panic!("eval failed")
                };
                assert!(matches!(o, EvalOutcome::Ok { ref verified, .. } if verified.contains("built-in")), "{o:?}");
            }
            w.inject = parse_injections("wrong@cpu_rows=8");
            let config = ConfigJson::Clifford(CliffordConfig { cpu_rows: 8, ..base }.into());
            let (Response::Outcome(o), _) = w.handle(Request::Eval { config, warmup: 1, iters: 2 }) else { panic!() };
            assert!(matches!(o, EvalOutcome::Invalid { ref why } if why.contains("[")), "{pass}: {o:?}");
            // A config the host refuses (rows per task 0) fails before it runs.
            let config = ConfigJson::Clifford(CliffordConfig { cpu_rows: 0, ..base }.into());
            let (Response::Outcome(o), false) = w.handle(Request::Eval { config, warmup: 1, iters: 1 }) else {
                panic!()
            };
            assert!(matches!(o, EvalOutcome::Failed { ref why, fatal: false } if why.contains("cpu_rows")), "{o:?}");
        }
    }
}
