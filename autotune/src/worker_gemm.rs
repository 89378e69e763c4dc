//! The worker's GEMM bench: fresh random operands (rotated copies, so consecutive timed runs do
//! not find them in L2 when that matters), then per candidate: a run into poisoned D, the check
//! (every element written, sampled elements against float64 dot products, every element
//! against the first verified output), and event-timed repetitions.

use ferrotune::config::GemmConfig;
use ferrotune::ops::gemm::{Gemm, Precision, gemm};
use ferrotune::{Backend, Buffer, Error, Scalar, Stream};
use ferrotune_testkit::{Rng, gemm_allowed, gemm_check_samples, poison};
use rayon::prelude::*;

use crate::measure::{Repeat, Stats, time_on_stream};
use crate::protocol::{ConfigJson, EvalOutcome, GemmConfigJson, GemmDtype, GemmShape, Shape};
use crate::worker::{CPU_CACHE_BYTES, Injection, fake_ms, injected, is_fatal, rotation, wrong_injected};

/// Random elements checked against the float64 reference per candidate (besides the corners
/// and centre of the first and last matrix).
const SAMPLES: usize = 512;

/// A prepared GEMM shape in the worker.
pub(crate) struct GemmBench<T: Scalar> {
    shape: GemmShape,
    /// The problem, resolved (tight leading dimensions and strides).
    g: Gemm,
    /// Rotated copies of (A, B, D).
    sets: Vec<(Buffer<T>, Buffer<T>, Buffer<T>)>,
    ha: Vec<T>,
    hb: Vec<T>,
    /// Per matrix row of A (batch-major): the sum of |a| over k; per column of B: the largest
    /// |b|. Their product bounds the sum of |terms| of every element, for the whole-output
    /// comparison.
    a_row_l1: Vec<f64>,
    b_col_max: Vec<f64>,
    /// The first output that passed the f64 check: every later candidate is compared with it
    /// element by element.
    checked: Option<Vec<T>>,
    /// D's size of poison (NaN) on the device, copied over D before each verification run (a
    /// device copy: no host fill and upload per candidate).
    poison: Buffer<T>,
    /// Configs this worker has verified: measured again (the confirmation rounds), they are
    /// timed without running the check a second time.
    verified: Vec<GemmConfigJson>,
}

/// Allocates and fills a GEMM shape's operands (uniform in [-1, 1), never all zeros).
pub(crate) fn prepare<T: Scalar>(b: &Backend, shape: GemmShape, seed: u64) -> ferrotune::Result<GemmBench<T>> {
    if shape.dtype == GemmDtype::Tf32 && !Precision::AllowTf32.uses_tf32() {
        return Err(Error::InvalidConfig {
            op: "gemm",
            why: "FERROTUNE_ALLOW_TF32=0 turns TF32 off: tf32 cannot be tuned".into(),
        });
    }
    let s = b.stream();
    let g = shape.gemm();
    let batch = g.batch.max(1);
    let (a_len, b_len, d_len) = (batch * g.stride_a, batch * g.stride_b, batch * g.stride_c);
    let mut rng = Rng::new(seed);
    let ha: Vec<T> = rng.vec(a_len, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(b_len, -1.0, 1.0);
    let elem = T::DTYPE.size_bytes() as u64;
    let set_bytes = (a_len + b_len + d_len) as u64 * elem;
    let cache = b.device().map_or(CPU_CACHE_BYTES, |d| u64::from(d.l2_bytes));
    let memory = b.device().map_or(4u64 << 30, |d| d.global_mem_bytes as u64 / 4);
    let sets_n = rotation(set_bytes, cache, memory, 16);
    let init = vec![poison::<T>(); d_len];
    let mut sets = Vec::with_capacity(sets_n);
    for _ in 0..sets_n {
        sets.push((Buffer::from_slice(&s, &ha)?, Buffer::from_slice(&s, &hb)?, Buffer::from_slice(&s, &init)?));
    }
    s.synchronize()?;
    let a_row_l1 = (0..batch * g.m)
        .into_par_iter()
        .map(|zi| {
            let (z, i) = (zi / g.m, zi % g.m);
            (0..g.k).map(|kk| f64::from(ha[z * g.stride_a + g.a_layout.index(i, kk, g.lda)].to_f32()).abs()).sum()
        })
        .collect();
    let b_col_max = (0..batch * g.n)
        .into_par_iter()
        .map(|zj| {
            let (z, j) = (zj / g.n, zj % g.n);
            (0..g.k)
                .map(|kk| f64::from(hb[z * g.stride_b + g.b_layout.index(kk, j, g.ldb)].to_f32()).abs())
                .fold(0.0, f64::max)
        })
        .collect();
    let poison = Buffer::from_slice(&s, &init)?;
    Ok(GemmBench { shape, g, sets, ha, hb, a_row_l1, b_col_max, checked: None, poison, verified: Vec::new() })
}

impl<T: Scalar> GemmBench<T> {
    pub(crate) fn footprint(&self) -> (usize, u64) {
        let batch = self.g.batch.max(1);
        let elems = batch * (self.g.stride_a + self.g.stride_b + self.g.stride_c);
        (self.sets.len(), (elems * T::DTYPE.size_bytes()) as u64)
    }

    fn run(&mut self, s: &Stream, g: &Gemm, set: usize) -> ferrotune::Result<()> {
        let k = set % self.sets.len();
        let (a, b, d) = &mut self.sets[k];
        gemm::<T, T>(s, g, &a.all(), &b.all(), None, None, &mut d.all_mut())
    }

    /// The first element of `got` that is not within the sum of both outputs' allowances of
    /// the verified output `want`.
    fn compare_whole(&self, want: &[T], got: &[T]) -> Result<(), String> {
        let g = &self.g;
        let rows = g.batch.max(1) * g.m;
        let bad = (0..rows).into_par_iter().find_map_first(|zi| {
            let z = zi / g.m;
            let base = z * g.stride_c + (zi % g.m) * g.ldc;
            (0..g.n).find_map(|j| {
                let (w, x) = (f64::from(want[base + j].to_f32()), f64::from(got[base + j].to_f32()));
                let mag = self.a_row_l1[zi] * self.b_col_max[z * g.n + j];
                let allowed = 2.0 * gemm_allowed(g, T::DTYPE, T::DTYPE, mag, w);
                (x.is_nan() || (x - w).abs() > allowed).then(|| {
                    format!(
                        "element ({z}, {}, {j}): got {x:e}, a verified tile gave {w:e} (allowed {allowed:e})",
                        zi % g.m
                    )
                })
            })
        });
        bad.map_or(Ok(()), Err)
    }

    /// Runs `g` into poisoned D and checks it: every element written, sampled elements against
    /// float64 dot products, every element against the first verified output. `wrong`: an
    /// injected wrong element (tests). How it was verified, or the outcome that ends the eval.
    fn verify(&mut self, s: &Stream, g: &Gemm, wrong: bool) -> Result<&'static str, EvalOutcome> {
        let failed = |e: Error| EvalOutcome::Failed { why: e.to_string(), fatal: is_fatal(&e) };
        // An element the kernel never writes stays NaN.
        ferrotune::ops::copy(s, &self.poison.all(), &mut self.sets[0].2.all_mut()).map_err(failed)?;
        self.run(s, g, 0).map_err(failed)?;
        let mut got = self.sets[0].2.to_vec(s).map_err(failed)?;
        if wrong {
            let i = (self.g.m / 2) * self.g.ldc + self.g.n / 2;
            got[i] = T::from_f32(got[i].to_f32() + 1000.0);
        }
        if let Some(i) = got.iter().position(|v| !v.to_f32().is_finite()) {
            return Err(EvalOutcome::Invalid { why: format!("element {i} of D is not finite (never written?)") });
        }
        gemm_check_samples(&self.g, &self.ha, &self.hb, &got, None, SAMPLES, 0x5A3F)
            .map_err(|why| EvalOutcome::Invalid { why })?;
        match &self.checked {
            Some(want) => {
                self.compare_whole(want, &got).map_err(|why| EvalOutcome::Invalid { why })?;
                Ok("sampled elements within tolerance of the f64 reference, every element of a verified output's")
            }
            None => {
                self.checked = Some(got);
                Ok("sampled elements within tolerance of the f64 reference")
            }
        }
    }

    pub(crate) fn eval(
        &mut self,
        s: &Stream,
        c: GemmConfigJson,
        repeat: Repeat,
        inject: &[Injection],
        fake: bool,
    ) -> EvalOutcome {
        let failed = |e: Error| EvalOutcome::Failed { why: e.to_string(), fatal: is_fatal(&e) };
        let (shape, config) = (Shape::Gemm(self.shape), ConfigJson::Gemm(c));
        if let Some(o) = injected(s, inject, &shape, &config) {
            return o;
        }
        // The point runs as the chosen config, through the plan: exactly what a profile entry
        // with this config runs (its family, tile, K split and packing).
        let g = self.g.with_config(GemmConfig::from(c));
        let verified = if self.verified.contains(&c) {
            "sampled elements within tolerance of the f64 reference (verified earlier in this worker)"
        } else {
            match self.verify(s, &g, wrong_injected(inject, &shape, &config)) {
                Ok(v) => v,
                Err(o) => return o,
            }
        };
        if !self.verified.contains(&c) {
            self.verified.push(c);
        }
        let stats = match time_on_stream(s, repeat, |i| self.run(s, &g, i)) {
            Ok(st) => st,
            Err(e) => return failed(e),
        };
        let stats = if fake {
            let t = fake_ms(&config);
            Stats { median_ms: t, min_ms: t, max_ms: t, mad_ms: 0.0, samples: stats.samples }
        } else {
            stats
        };
        // What the config ran: configs of one launch are one point to the tuner.
        let kernel =
            ferrotune::ops::gemm_plan::explain(s, &g, T::DTYPE, T::DTYPE).ok().flatten().and_then(|p| p.kernel_key());
        EvalOutcome::Ok { stats, verified: verified.into(), kernel }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Request, Response, ShapeJson};
    use crate::worker::{Worker, parse_injections};

    #[test]
    fn a_cpu_worker_verifies_gemm_candidates_and_catches_wrong_ones() {
        let mut w = Worker { backend: None, prepared: None, inject: Ok(vec![]), fake_time: false };
        let shape = Shape::Gemm(crate::gemm::tests::shape(GemmDtype::Bf16, 37, 29, 45));
        let (Response::Description(d), false) = w.handle(Request::Describe {
            backend: "cpu".into(),
            ops: vec![],
            dtypes: vec![],
            gemm: vec![ShapeJson::from(&shape)],
            clifford: vec![],
            resources_dir: None,
        }) else {
            panic!("describe failed")
        };
        assert!(d.gemm_resources.is_empty(), "no kernels on the CPU");
        let (Response::Prepared { sets, .. }, _) =
            w.handle(Request::Prepare { backend: "cpu".into(), shape: (&shape).into(), seed: 5 })
        else {
            panic!("prepare failed")
        };
        assert!(sets >= 2, "operands are rotated");
        for rows in [1, 16, 64] {
            let config = ConfigJson::Gemm(GemmConfig { cpu_rows: rows, ..GemmConfig::DEFAULT }.into());
            let (Response::Outcome(o), false) = w.handle(Request::Eval { config, warmup: 1, iters: 2 }) else {
                panic!("eval failed")
            };
            assert!(matches!(o, EvalOutcome::Ok { ref verified, .. } if verified.contains("f64")), "{o:?}");
        }
        w.inject = parse_injections("wrong@cpu_rows=8");
        let config = ConfigJson::Gemm(GemmConfig { cpu_rows: 8, ..GemmConfig::DEFAULT }.into());
        let (Response::Outcome(o), _) = w.handle(Request::Eval { config, warmup: 1, iters: 2 }) else { panic!() };
        assert!(matches!(o, EvalOutcome::Invalid { ref why } if why.contains("(0, 18, 14)")), "{o:?}");
        // A config verified once is timed again without a second check (the confirmation
        // rounds); one that failed its check is checked, and fails, every time.
        let again = ConfigJson::Gemm(GemmConfig { cpu_rows: 16, ..GemmConfig::DEFAULT }.into());
        let (Response::Outcome(o), _) = w.handle(Request::Eval { config: again, warmup: 1, iters: 2 }) else {
            panic!()
        };
        assert!(
            matches!(o, EvalOutcome::Ok { ref verified, .. } if verified.contains("earlier in this worker")),
            "{o:?}"
        );
        let (Response::Outcome(o), _) = w.handle(Request::Eval { config, warmup: 1, iters: 2 }) else { panic!() };
        assert!(matches!(o, EvalOutcome::Invalid { .. }), "{o:?}");
        // An elementwise config for a GEMM shape is a request error, not a crash.
        let elem = ConfigJson::Elem(d.defaults.first().map_or(
            ferrotune::ElemConfig::heuristic(ferrotune::ElemOp::Add, ferrotune::DType::F32, None).into(),
            |x| x.config,
        ));
        assert!(matches!(w.handle(Request::Eval { config: elem, warmup: 1, iters: 1 }).0, Response::Error { .. }));
    }
}
