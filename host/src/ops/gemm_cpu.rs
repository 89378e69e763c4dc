//! The CPU backend of GEMM: the `gemm` crate's packed, cache-blocked f32 micro-kernels (AVX-512
//! where the CPU has it, else AVX2 + FMA) on bands of output rows spread over the backend's
//! rayon pool (every layout through strides; one band with fewer bands than threads is
//! threaded by the crate itself, over the pool), f16/bf16 operands widened to f32 one K panel
//! at a time with a bulk (vectorised) conversion, and the shared epilogue (`kernels-gpu`'s
//! `Epilogue`) in one pass over each finished band.

use std::any::TypeId;
use std::cell::RefCell;

use ferrotune_kernels::gemm::{self as kg, Epilogue, Layout};
use gemm::Parallelism;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use rayon::prelude::*;

use crate::backend::Cpu;
use crate::buffer::{Scalar, try_host_vec};
use crate::error::Result;
use crate::ops::gemm::Gemm;

/// f32 elements of the widened A and B panels of a 16-bit product (16 MiB): a panel spans as
/// much of K as fits, in whole multiples of [`KC`], so a product is few crate calls (each
/// one a pass over the accumulators and a rendezvous of the threads) while its extra memory
/// stays bounded whatever the shape.
const PANEL_FLOATS: usize = 4 << 20;

/// The K step of the panels: at least the crate's own K block for f32.
const KC: usize = 256;

/// K elements per widened panel of a band of `rows` rows against `n` columns.
fn panel_k(rows: usize, n: usize, k: usize) -> usize {
    let fit = PANEL_FLOATS / (rows + n).max(1);
    (fit / KC * KC).max(KC).min(k)
}

/// The column pitch (f32s) of a column-major B panel holding `kp` of K: `kp`, or `kp + 16`
/// where `kp` is a multiple of 512 (2 KiB). The crate packs B by reading a row of its columns
/// at a time; with columns a multiple of 2 KiB apart those reads fall in one or two L1 sets
/// and evict each other: rc 1024³ f32 ran 5.7 ms against 4.7 at 1000³ (2 cores, AVX-512).
fn col_pitch(kp: usize) -> usize {
    if kp.is_multiple_of(512) { kp + 16 } else { kp }
}

/// Whether an f32 B read in place would hit that: column-major, columns a multiple of 2 KiB
/// apart (a copy into padded panels costs a pass over B, a few percent of the product).
fn b_aliases(g: &Gemm) -> bool {
    g.b_layout == Layout::Col && g.ldb.is_multiple_of(512)
}

thread_local! {
    /// Each thread's f32 working memory for 16-bit products (widened panels, accumulators),
    /// kept between calls: fresh buffers of several MiB a call cost page faults and zeroing
    /// that took a fifth of a 1024³ f16 product.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on `len` f32s of this thread's scratch (contents unspecified: `f` writes before
/// it reads), or on a fresh allocation while the scratch is in use (a band that work stealing
/// runs inside another band's threaded product). Growing it is a fallible allocation.
fn with_scratch<R>(len: usize, what: &str, f: impl FnOnce(&mut [f32]) -> Result<R>) -> Result<R> {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut v) => {
            if v.len() < len {
                // Dropped first, so the old and the new buffer are never held together.
                *v = Vec::new();
                *v = try_host_vec::<f32>(len, what)?;
            }
            f(&mut v[..len])
        }
        Err(_) => f(&mut try_host_vec::<f32>(len, what)?),
    })
}

/// The slice as f32 when `T` is f32.
fn as_f32<T: 'static>(s: &[T]) -> Option<&[f32]> {
    // SAFETY: `T` is `f32` (same TypeId), so the cast reinterprets nothing.
    (TypeId::of::<T>() == TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) })
}

/// The mutable slice as f32 when `T` is f32.
fn as_f32_mut<T: 'static>(s: &mut [T]) -> Option<&mut [f32]> {
    // SAFETY: `T` is `f32` (same TypeId); the borrow of `s` is moved into the result.
    (TypeId::of::<T>() == TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) })
}

/// `dst = src` widened to f32: `half`'s slice conversions (F16C on x86 when present, bit
/// shifts for bf16), one call per contiguous run, never an element at a time.
fn widen<T: Scalar>(src: &[T], dst: &mut [f32]) {
    let id = TypeId::of::<T>();
    if id == TypeId::of::<f16>() {
        // SAFETY: `T` is `f16` (same TypeId).
        let s: &[f16] = unsafe { std::slice::from_raw_parts(src.as_ptr().cast(), src.len()) };
        s.convert_to_f32_slice(dst);
    } else if id == TypeId::of::<bf16>() {
        // SAFETY: `T` is `bf16` (same TypeId).
        let s: &[bf16] = unsafe { std::slice::from_raw_parts(src.as_ptr().cast(), src.len()) };
        s.convert_to_f32_slice(dst);
    } else {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = s.to_f32());
    }
}

/// `dst = src` rounded to `T` (nearest even): `half`'s slice conversions (F16C on x86 when
/// present), one call per row.
fn narrow<T: Scalar>(src: &[f32], dst: &mut [T]) {
    let id = TypeId::of::<T>();
    if id == TypeId::of::<f16>() {
        // SAFETY: `T` is `f16` (same TypeId); the borrow of `dst` is reborrowed for the call.
        let d: &mut [f16] = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast(), dst.len()) };
        d.convert_from_f32_slice(src);
    } else if id == TypeId::of::<bf16>() {
        // SAFETY: `T` is `bf16` (same TypeId).
        let d: &mut [bf16] = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr().cast(), dst.len()) };
        d.convert_from_f32_slice(src);
    } else {
        dst.iter_mut().zip(src).for_each(|(d, s)| *d = T::from_f32(*s));
    }
}

/// A strided f32 matrix: base slice (starting at element (0, 0)), row and column strides.
#[derive(Clone, Copy)]
struct Mat<'a> {
    data: &'a [f32],
    rs: usize,
    cs: usize,
}

/// Element strides of a matrix in `layout` with leading dimension `ld`.
fn strides(layout: Layout, ld: usize) -> (usize, usize) {
    match layout {
        Layout::Row => (ld, 1),
        Layout::Col => (1, ld),
    }
}

/// `acc (rows x n, pitch ldo) = a (rows x k) b (k x n)`, plus `acc` when `accumulate`, with the
/// `gemm` crate on `par` (the pool of the caller's `install`).
#[allow(clippy::too_many_arguments)]
fn sgemm(
    rows: usize,
    k: usize,
    n: usize,
    a: Mat<'_>,
    b: Mat<'_>,
    accumulate: bool,
    acc: &mut [f32],
    ldo: usize,
    par: Parallelism,
) {
    let last = |m: &Mat<'_>, r: usize, c: usize| (r - 1) * m.rs + (c - 1) * m.cs;
    assert!(rows > 0 && n > 0 && k > 0, "sgemm: empty product");
    assert!(last(&a, rows, k) < a.data.len() && last(&b, k, n) < b.data.len(), "sgemm: operand out of range");
    assert!((rows - 1) * ldo + n <= acc.len() && n <= ldo, "sgemm: output out of range");
    // SAFETY: the asserts above prove every element the strides reach lies inside its slice;
    // `acc` is borrowed mutably and the inputs immutably, so nothing aliases. The crate
    // computes `dst = alpha dst + beta a b` (alpha read only with `read_dst`).
    unsafe {
        gemm::gemm(
            rows,
            n,
            k,
            acc.as_mut_ptr(),
            1,
            ldo as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            par,
        )
    }
}

/// Runs `f(i, chunk)` over the `len`-element chunks of `dst`: on the pool when `par` is
/// threaded (one band alone, so its widening is spread like its product), else in order.
fn chunks_on(par: Parallelism, dst: &mut [f32], len: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    match par {
        Parallelism::None => dst.chunks_mut(len).enumerate().for_each(|(i, c)| f(i, c)),
        _ => dst.par_chunks_mut(len).enumerate().for_each(|(i, c)| f(i, c)),
    }
}

/// What one band of output rows reads: the operands of its matrix and the band's first row.
struct Band<'a, T, O> {
    g: &'a Gemm,
    a: &'a [T],
    b: &'a [T],
    /// C of this matrix (from its first row; empty when the epilogue does not read it).
    c: &'a [O],
    bias: &'a [O],
    i0: usize,
    rows: usize,
    /// The product's threads: one (`None`) when the bands fill the pool.
    par: Parallelism,
}

impl<T: Scalar, O: Scalar> Band<'_, T, O> {
    /// The band's f32 products into `acc` (`rows x n`, pitch `ldo`): straight from the
    /// operands for f32, else panel by panel of K widened to f32.
    fn product(&self, acc: &mut [f32], ldo: usize, panels: &mut [f32]) -> Result<()> {
        let g = self.g;
        let (n, k, rows, i0) = (g.n, g.k, self.rows, self.i0);
        if k == 0 {
            for r in 0..rows {
                acc[r * ldo..r * ldo + n].fill(0.0);
            }
            return Ok(());
        }
        let (ars, acs) = strides(g.a_layout, g.lda);
        let (brs, bcs) = strides(g.b_layout, g.ldb);
        let par = self.par;
        let kc = panel_k(rows, n, k);
        if let (Some(a), Some(b)) = (as_f32(self.a), as_f32(self.b)) {
            let a = Mat { data: &a[i0 * ars..], rs: ars, cs: acs };
            if !b_aliases(g) {
                sgemm(rows, k, n, a, Mat { data: b, rs: brs, cs: bcs }, false, acc, ldo, par);
                return Ok(());
            }
            // B copied a K panel at a time into columns `col_pitch` apart; A read in place.
            for k0 in (0..k).step_by(kc) {
                let kp = kc.min(k - k0);
                let p = col_pitch(kp);
                chunks_on(par, &mut panels[..n * p], p, |j, d| d[..kp].copy_from_slice(&b[j * g.ldb + k0..][..kp]));
                let ak = Mat { data: &a.data[k0 * acs..], ..a };
                sgemm(rows, kp, n, ak, Mat { data: panels, rs: 1, cs: p }, k0 > 0, acc, ldo, par);
            }
            return Ok(());
        }
        let (pa, rest) = panels.split_at_mut(rows * kc);
        let pb = &mut rest[..(kc + 16) * n];
        for k0 in (0..k).step_by(kc) {
            let kp = kc.min(k - k0);
            // A panel (rows x kp) and B panel (kp x n), each kept in its operand's orientation
            // so that every conversion is one contiguous run.
            let a = match g.a_layout {
                Layout::Row => {
                    chunks_on(par, &mut pa[..rows * kp], kp, |r, d| widen(&self.a[(i0 + r) * g.lda + k0..][..kp], d));
                    Mat { data: pa, rs: kp, cs: 1 }
                }
                Layout::Col => {
                    chunks_on(par, &mut pa[..kp * rows], rows, |kk, d| {
                        widen(&self.a[(k0 + kk) * g.lda + i0..][..rows], d)
                    });
                    Mat { data: pa, rs: 1, cs: rows }
                }
            };
            let b = match g.b_layout {
                Layout::Row => {
                    chunks_on(par, &mut pb[..kp * n], n, |kk, d| widen(&self.b[(k0 + kk) * g.ldb..][..n], d));
                    Mat { data: pb, rs: n, cs: 1 }
                }
                Layout::Col => {
                    // Column j of B holds its K run contiguously: the panel's part of it.
                    let p = col_pitch(kp);
                    chunks_on(par, &mut pb[..n * p], p, |j, d| widen(&self.b[j * g.ldb + k0..][..kp], &mut d[..kp]));
                    Mat { data: pb, rs: 1, cs: p }
                }
            };
            sgemm(rows, kp, n, a, b, k0 > 0, acc, ldo, par);
        }
        Ok(())
    }
}

/// Whether the epilogue changes the products at all.
fn is_plain(e: &Epilogue) -> bool {
    e.alpha == 1.0 && e.flags() == 0
}

/// Runs the resolved, checked GEMM `g` on the CPU pool: bands of `band_rows` output rows of
/// every matrix of the batch are the rayon tasks, each one single-threaded product when there
/// are at least as many bands as threads, else each product threaded by the crate over the
/// pool. `d` spans at least each matrix's extent.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<T: Scalar, O: Scalar>(
    cpu: &Cpu,
    g: &Gemm,
    band_rows: usize,
    a: &[T],
    b: &[T],
    c: &[O],
    bias: &[O],
    d: &mut [O],
) -> Result<()> {
    let band_rows = band_rows.max(1);
    let extent = (g.m - 1) * g.ldc + g.n;
    let epi = g.epilogue;
    let reads_c = epi.beta != 0.0;
    // Batch z's D starts at z * stride_c; a batch of one may have any stride.
    let stride_c = if g.batch == 1 { d.len().max(1) } else { g.stride_c };
    let bands = g.batch.saturating_mul(g.m.div_ceil(band_rows));
    let par = if bands >= cpu.threads() { Parallelism::None } else { Parallelism::Rayon(cpu.threads()) };
    cpu.install(|| {
        d.par_chunks_mut(stride_c).take(g.batch).enumerate().try_for_each(|(z, dz)| {
            dz[..extent].par_chunks_mut(band_rows * g.ldc).enumerate().try_for_each(|(t, out)| {
                let i0 = t * band_rows;
                let rows = out.len().div_ceil(g.ldc);
                // Empty operands (k = 0) may be shorter than the batch strides.
                let from = |len: usize, at: usize| at.min(len);
                let band = Band {
                    g,
                    a: &a[from(a.len(), z * g.stride_a)..],
                    b: &b[from(b.len(), z * g.stride_b)..],
                    c: if reads_c { &c[z * g.stride_c + i0 * g.ldc..] } else { &[] },
                    bias,
                    i0,
                    rows,
                    par,
                };
                band.finish(out)
            })
        })
    })
}

impl<T: Scalar, O: Scalar> Band<'_, T, O> {
    /// Products, then the epilogue, into the band `out` of D (rows of pitch `ldc`): in place
    /// for f32 outputs, else in f32 rows that are then narrowed in bulk.
    fn finish(&self, out: &mut [O]) -> Result<()> {
        let (n, ldc, epi) = (self.g.n, self.g.ldc, &self.g.epilogue);
        let plain = is_plain(epi);
        if let Some(out) = as_f32_mut(out) {
            with_scratch(self.panels_len(), "GEMM panels", |p| self.product(out, ldc, p))?;
            if !plain {
                let (c, bias) = (as_f32(self.c).unwrap_or(&[]), as_f32(self.bias).unwrap_or(&[]));
                let bias = if bias.is_empty() { bias } else { &bias[..n] };
                for r in 0..self.rows {
                    let cr = if c.is_empty() { c } else { &c[r * ldc..r * ldc + n] };
                    kg::epilogue_row_in_place(epi, cr, bias, &mut out[r * ldc..r * ldc + n], O::DTYPE);
                }
            }
            return Ok(());
        }
        let mut bias = Vec::new();
        if epi.bias {
            bias = try_host_vec::<f32>(n, "GEMM bias row")?;
            widen(&self.bias[..n], &mut bias);
        }
        let acc_len = self.rows * n;
        with_scratch(acc_len + self.panels_len(), "GEMM accumulators and panels", |s| {
            let (acc, panels) = s.split_at_mut(acc_len);
            self.product(acc, n, panels)?;
            // Row r of the band: the epilogue on its f32 products, then narrowed into D.
            let row = |r: usize, a: &mut [f32], o: &mut [O], cbuf: &mut Vec<f32>| {
                if !plain {
                    if !self.c.is_empty() {
                        cbuf.resize(n, 0.0);
                        widen(&self.c[r * ldc..r * ldc + n], cbuf);
                    }
                    kg::epilogue_row_in_place(epi, cbuf, &bias, a, O::DTYPE);
                }
                narrow(a, &mut o[..n]);
            };
            match self.par {
                Parallelism::None => {
                    let mut cbuf = Vec::new();
                    for (r, (a, o)) in acc.chunks_mut(n).zip(out.chunks_mut(ldc)).enumerate() {
                        row(r, a, o, &mut cbuf);
                    }
                }
                _ => acc
                    .par_chunks_mut(n)
                    .zip(out.par_chunks_mut(ldc))
                    .enumerate()
                    .for_each_init(Vec::new, |cbuf, (r, (a, o))| row(r, a, o, cbuf)),
            }
            Ok(())
        })
    }

    /// f32s of the widened A and B panels of a 16-bit product (B's columns padded where
    /// [`col_pitch`] pads them), of B's padded panel for an f32 B that [`b_aliases`], else none.
    fn panels_len(&self) -> usize {
        let (n, k) = (self.g.n, self.g.k);
        let kc = panel_k(self.rows, n, k);
        if as_f32(self.a).is_some() && as_f32(self.b).is_some() {
            return if b_aliases(self.g) && k > 0 { n * col_pitch(kc) } else { 0 };
        }
        self.rows * kc + n * (kc + 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_matches_the_element_conversion() {
        let xs: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) * 0.37).collect();
        let h: Vec<f16> = xs.iter().map(|&x| f16::from_f32(x)).collect();
        let b: Vec<bf16> = xs.iter().map(|&x| bf16::from_f32(x)).collect();
        let (mut wh, mut wb) = (vec![0.0; 37], vec![0.0; 37]);
        widen(&h, &mut wh);
        widen(&b, &mut wb);
        assert!(wh.iter().zip(&h).all(|(w, h)| *w == h.to_f32()));
        assert!(wb.iter().zip(&b).all(|(w, b)| *w == b.to_f32()));
        let (mut nh, mut nb) = (vec![f16::ZERO; 37], vec![bf16::ZERO; 37]);
        narrow(&xs, &mut nh);
        narrow(&xs, &mut nb);
        assert_eq!((nh, nb), (h, b));
    }
}
