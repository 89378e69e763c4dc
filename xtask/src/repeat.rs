//! `cargo xtask repeat`: one CPU op `--iters` times in one process (operands made once), for
//! timing whole processes from outside, e.g. a Clifford op against the parallel copy of
//! `--copy-mib`, or our GEMM against `--peer` (`matrixmultiply`). `--iters 0` runs only the
//! setup. The work is in `ferrotune_bench::repeat`.

use anyhow::Context;
use ferrotune::ops::gemm::Layout;
use ferrotune::{Backend, BackendChoice, DType};
use ferrotune_bench::repeat::{Work, run};

#[derive(clap::Args)]
pub struct Args {
    /// `copy`, `clifford-fwd`, `clifford-fwdbwd` or `gemm`.
    op: String,
    /// Times the op runs after the setup (0: the setup alone).
    #[arg(long, default_value_t = 10)]
    iters: usize,
    /// f32, f16 or bf16 (Clifford and GEMM).
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Clifford `BxN`, GEMM `MxNxK`.
    #[arg(long, default_value = "")]
    shape: String,
    /// Clifford algebra: 2 or 3.
    #[arg(long, default_value_t = 2)]
    dim: u32,
    /// GEMM layouts of A and B: `rr` or `rc` (B column-major, `x wᵀ`).
    #[arg(long, default_value = "rc")]
    layout: String,
    /// GEMM: run the `matrixmultiply` peer (f32 operands) instead of ours.
    #[arg(long)]
    peer: bool,
    /// Copy: MiB of the source (and of the destination).
    #[arg(long, default_value_t = 64)]
    copy_mib: usize,
}

fn dims(shape: &str, count: usize) -> anyhow::Result<Vec<usize>> {
    let v: Vec<usize> = shape
        .split('x')
        .map(|p| p.trim().parse())
        .collect::<Result<_, _>>()
        .with_context(|| format!("bad shape '{shape}'"))?;
    anyhow::ensure!(
        v.len() == count && v.iter().all(|&d| d > 0),
        "shape '{shape}' is not {count} positive sizes joined by x"
    );
    Ok(v)
}

pub fn run_cmd(a: Args) -> anyhow::Result<()> {
    let dtype = DType::ALL
        .into_iter()
        .find(|t| t.name() == a.dtype)
        .with_context(|| format!("unknown dtype '{}' (valid: f32, f16, bf16)", a.dtype))?;
    let work = match a.op.as_str() {
        "copy" => Work::Copy { bytes: a.copy_mib << 20 },
        "clifford-fwd" | "clifford-fwdbwd" => {
            anyhow::ensure!(a.dim == 2 || a.dim == 3, "--dim {} (valid: 2, 3)", a.dim);
            let v = dims(&a.shape, 2)?;
            Work::Clifford { dim: a.dim, b: v[0], n: v[1], bwd: a.op.ends_with("fwdbwd"), dtype }
        }
        "gemm" => {
            let v = dims(&a.shape, 3)?;
            let lb = match a.layout.as_str() {
                "rr" => Layout::Row,
                "rc" => Layout::Col,
                l => anyhow::bail!("unknown layout '{l}' (valid: rr, rc)"),
            };
            Work::Gemm { m: v[0], n: v[1], k: v[2], lb, dtype, peer: a.peer }
        }
        o => anyhow::bail!("unknown op '{o}' (valid: copy, clifford-fwd, clifford-fwdbwd, gemm)"),
    };
    let backend = Backend::new(BackendChoice::Cpu)?;
    let done = run(&backend, work, a.iters)?;
    println!(
        "{} x{}: {} bytes, {} FLOPs an iteration; checksum {:.6e}",
        a.op, a.iters, done.bytes, done.flops, done.checksum
    );
    Ok(())
}
