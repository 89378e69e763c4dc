//! Every compiled tile of the tensor-core GEMM on one shape: the raw data behind the built-in
//! tile heuristic and a quick view of what tuning a GEMM shape can gain.

use ferrotune::ops::gemm::{Gemm, Layout, Precision, gemm, variant_for};
use ferrotune::peer::{GemmMath, GemmShape};
use ferrotune::{Backend, Buffer, Result, Scalar, bf16, f16};
use ferrotune_autotune::measure::{Repeat, Stats, time_on_stream};
use ferrotune_kernels::gemm::tc::TILES;
use ferrotune_testkit::Rng;
use serde::{Deserialize, Serialize};

/// One tile's timing on one problem.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TileRow {
    pub dtype: String,
    pub layout: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub tile: usize,
    pub kernel: String,
    /// Whether the built-in heuristic picks this tile for the shape.
    pub heuristic: bool,
    pub stats: Option<Stats>,
    pub tflops: Option<f64>,
    pub correct: bool,
    pub error: Option<String>,
}

/// Times every tile on `shape` with A row-major and B `b_layout` (`math`: tf32, f16 or bf16).
pub fn tile_sweep(
    backend: &Backend,
    math: GemmMath,
    shape: GemmShape,
    b_layout: Layout,
    repeat: Repeat,
) -> Result<Vec<TileRow>> {
    match math {
        GemmMath::F32 | GemmMath::Tf32 => sweep::<f32>(backend, math, shape, b_layout, repeat),
        GemmMath::F16 => sweep::<f16>(backend, math, shape, b_layout, repeat),
        GemmMath::Bf16 => sweep::<bf16>(backend, math, shape, b_layout, repeat),
    }
}

fn sweep<T: Scalar>(
    backend: &Backend,
    math: GemmMath,
    shape: GemmShape,
    b_layout: Layout,
    repeat: Repeat,
) -> Result<Vec<TileRow>> {
    let s = backend.stream();
    let base = Gemm::new(shape.m, shape.n, shape.k).layouts(Layout::Row, b_layout).precision(Precision::AllowTf32);
    let r = base.resolved();
    let mut rng = Rng::new(17);
    let ha: Vec<T> = rng.vec(r.stride_a, -1.0, 1.0);
    let hb: Vec<T> = rng.vec(r.stride_b, -1.0, 1.0);
    let a = Buffer::from_slice(&s, &ha)?;
    let b = Buffer::from_slice(&s, &hb)?;
    let heuristic = variant_for(&r, T::DTYPE, T::DTYPE, 256, 256)?.tile as usize;
    let mut rows = Vec::new();
    for tile in 0..TILES.len() {
        let g = base.tile(tile);
        // Tiles other than the default need 16-byte aligned rows: skip them where that fails.
        let Ok(v) = variant_for(&g.resolved(), T::DTYPE, T::DTYPE, 256, 256) else { continue };
        let kernel = v.entry_name().as_str().to_string();
        let mut d = Buffer::from_slice(&s, &vec![T::from_f32(f32::NAN); r.stride_c])?;
        let run = |d: &mut Buffer<T>| gemm::<T, T>(&s, &g, &a.all(), &b.all(), None, None, &mut d.all_mut());
        let outcome =
            run(&mut d).and_then(|_| d.to_vec(&s)).map(|got| crate::gemm::check_samples(&g, &ha, &hb, &got, None, 256));
        let (stats, correct, error) = match outcome {
            Ok(mismatch) => match time_on_stream(&s, repeat, |_| run(&mut d)) {
                Ok(st) => (Some(st), mismatch.is_none(), mismatch),
                Err(e) => (None, false, Some(e.to_string())),
            },
            Err(e) => (None, false, Some(e.to_string())),
        };
        rows.push(TileRow {
            dtype: math.name().into(),
            layout: format!("r{}", b_layout.code()),
            m: shape.m,
            n: shape.n,
            k: shape.k,
            tile,
            kernel,
            heuristic: tile == heuristic,
            tflops: stats.map(|st| base.flops() / st.median_ms / 1e9),
            stats,
            correct,
            error,
        });
    }
    Ok(rows)
}
