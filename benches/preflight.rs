//! Memory the bench will need, checked before anything is measured: a size that cannot fit
//! (`--sizes 100000`, a 300000³ GEMM) fails at once with `Error::OutOfMemory`, instead of an
//! allocation abort or minutes of swapping halfway through the run.

use ferrotune::Stream;
use ferrotune::buffer::ensure_fits;

use crate::Options;
use crate::error::Result;

/// `a * b` in bytes, `usize::MAX` when it overflows (reported as such).
fn mul(a: usize, b: usize) -> usize {
    a.saturating_mul(b)
}

/// Operand elements of an `m x n x k` GEMM: A, B and D.
fn gemm_elems((m, n, k): (usize, usize, usize)) -> usize {
    mul(m, k).saturating_add(mul(k, n)).saturating_add(mul(m, n))
}

/// Every (device, host) need of the standard run, each checked on its own (rows run one at
/// a time and free their buffers).
pub fn check_run(s: &Stream, opts: &Options) -> Result<()> {
    for &bytes in &opts.sizes {
        // An elementwise row: up to three inputs and the output on the backend; their host
        // data, the output's initial contents and the copy read back for the check.
        ensure_fits(s, mul(4, bytes), mul(5, bytes), &format!("elementwise rows of {} MiB tensors", bytes >> 20))?;
    }
    let c = &opts.ceilings;
    ensure_fits(s, mul(2, c.copy_bytes), 0, &format!("the copy ceiling of {} MiB", c.copy_bytes >> 20))?;
    let g = c.gemm_size;
    ensure_fits(s, mul(3 * 4, mul(g, g)), mul(2 * 4, mul(g, g)), &format!("the GEMM ceiling of {g}³"))?;
    for &shape in &opts.gemm_shapes {
        check_gemm(s, shape, 4, &format!("the GEMM row {}x{}x{}", shape.0, shape.1, shape.2))?;
    }
    Ok(())
}

/// One GEMM of `shape` with `elem`-byte inputs: operands and an f32 output on the backend
/// (ours and a peer's), host copies of the inputs and the result.
pub fn check_gemm(s: &Stream, shape: (usize, usize, usize), elem: usize, what: &str) -> Result<()> {
    let e = gemm_elems(shape);
    Ok(ensure_fits(s, mul(2 * 4, e), mul(2 * elem + 4, e), what)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferrotune::{Backend, Error};

    #[test]
    fn impossible_sizes_fail_before_anything_runs() {
        let s = Backend::Cpu(ferrotune::Cpu::new(1).unwrap()).stream();
        let e = check_gemm(&s, (300_000, 300_000, 300_000), 4, "the GEMM row 300000³").unwrap_err();
        assert!(matches!(e, crate::BenchError::Runtime(Error::OutOfMemory { .. })), "{e}");
        assert!(e.to_string().starts_with("out of memory: the GEMM row 300000³"), "{e}");
        let overflow = check_gemm(&s, (usize::MAX / 2, 3, 3), 4, "huge").unwrap_err();
        assert!(overflow.to_string().contains("overflows the address space") || overflow.to_string().contains("needs"));
        // A small problem fits.
        check_gemm(&s, (64, 64, 64), 2, "small").unwrap();
    }
}
