//! Entry points of the memory-bound family: grid-stride loops over 16-byte vectors (or single
//! elements when a pointer is not 16-byte aligned), several vectors in flight per thread.

use crate::arch::nvptx::{block_dim_x, block_idx_x, grid_dim_x, ld_global_v4, st_global_v4, thread_idx_x};
use crate::element::Element;
use crate::elementwise::{Activation, Add, AddMulAct, Axpy, CopyBits, GeluErf, GeluTanh, Map, Relu, Scale};
use half::{bf16, f16};

/// How a thread moves its elements: one at a time or 16 bytes at a time.
trait Lanes<T: Element> {
    const N: usize;
    type Arr: core::marker::Copy + AsRef<[T]> + AsMut<[T]>;
    /// # Safety
    /// `p + i * N .. p + (i + 1) * N` must be readable (and 16-byte aligned for vectors).
    unsafe fn load(p: *const T, i: usize) -> Self::Arr;
    /// # Safety
    /// As `load`, writable.
    unsafe fn store(p: *mut T, i: usize, v: Self::Arr);
}

struct One;
impl<T: Element> Lanes<T> for One {
    const N: usize = 1;
    type Arr = [T; 1];
    #[inline(always)]
    unsafe fn load(p: *const T, i: usize) -> [T; 1] {
        // SAFETY: forwarded from the caller.
        [unsafe { *p.add(i) }]
    }
    #[inline(always)]
    unsafe fn store(p: *mut T, i: usize, v: [T; 1]) {
        // SAFETY: forwarded from the caller.
        unsafe { *p.add(i) = v[0] }
    }
}

struct V16;
impl<T: Element> Lanes<T> for V16 {
    const N: usize = 16 / core::mem::size_of::<T>();
    type Arr = T::Vec16;
    #[inline(always)]
    unsafe fn load(p: *const T, i: usize) -> T::Vec16 {
        // SAFETY: forwarded from the caller (the host only picks V16 for aligned pointers).
        T::from_words(unsafe { ld_global_v4(p.add(i * <Self as Lanes<T>>::N) as *const u32) })
    }
    #[inline(always)]
    unsafe fn store(p: *mut T, i: usize, v: T::Vec16) {
        // SAFETY: forwarded from the caller.
        unsafe { st_global_v4(p.add(i * <Self as Lanes<T>>::N) as *mut u32, T::to_words(v)) }
    }
}

#[inline(always)]
fn global_thread() -> (usize, usize) {
    let tid = block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize;
    (tid, grid_dim_x() as usize * block_dim_x() as usize)
}

/// Applies `op` lane by lane to one group of loaded vectors.
#[inline(always)]
fn compute<T: Element, L: Lanes<T>, const K: usize, Op: Map<K>>(op: Op, x: &[L::Arr; K]) -> L::Arr {
    let mut o = x[0];
    for l in 0..L::N {
        // Fixed trip counts and no `array::from_fn`: both keep the arrays in registers.
        let mut xl = [o.as_ref()[l]; K];
        for k in 1..K {
            xl[k] = x[k].as_ref()[l];
        }
        o.as_mut()[l] = op.apply(xl);
    }
    o
}

/// `out[i] = op(in_0[i], .., in_K-1[i])` for `i < n`. `out` may alias an input (each element
/// is read and written by the same thread).
///
/// # Safety
/// Every pointer covers `n` elements; for `L = V16` every pointer is 16-byte aligned.
#[inline(always)]
unsafe fn map_kernel<T: Element, L: Lanes<T>, const K: usize, const U: usize, Op: Map<K>>(
    op: Op,
    inp: [*const T; K],
    out: *mut T,
    n: usize,
) {
    let (tid, nthreads) = global_thread();
    let nvec = n / L::N;
    let mut v = tid;
    // Unrolled steps: all U x K loads are issued before the first use.
    while v + (U - 1) * nthreads < nvec {
        // SAFETY (all loads and stores of this step): v + u * nthreads < nvec for every u.
        let first = unsafe { L::load(inp[0], v) };
        let mut x = [[first; K]; U];
        for (u, xu) in x.iter_mut().enumerate() {
            for (k, xuk) in xu.iter_mut().enumerate() {
                if u + k > 0 {
                    *xuk = unsafe { L::load(inp[k], v + u * nthreads) };
                }
            }
        }
        for (u, xu) in x.iter().enumerate() {
            let y = compute::<T, L, K, Op>(op, xu);
            unsafe { L::store(out, v + u * nthreads, y) };
        }
        v += U * nthreads;
    }
    while v < nvec {
        // SAFETY (loads and store): v < nvec.
        let mut x = [unsafe { L::load(inp[0], v) }; K];
        for (k, xk) in x.iter_mut().enumerate().skip(1) {
            *xk = unsafe { L::load(inp[k], v) };
        }
        unsafe { L::store(out, v, compute::<T, L, K, Op>(op, &x)) };
        v += nthreads;
    }
    // Fewer than one vector of elements is left; the first threads take one each.
    let t = nvec * L::N + tid;
    if t < n {
        // SAFETY (loads and store): t < n.
        let mut x = [unsafe { *inp[0].add(t) }; K];
        for (k, xk) in x.iter_mut().enumerate().skip(1) {
            *xk = unsafe { *inp[k].add(t) };
        }
        unsafe { *out.add(t) = op.apply(x) };
    }
}

/// `x[r, c] += bias[c]` over `n = rows * cols` elements, in place.
///
/// # Safety
/// `x` covers `n` elements, `bias` covers `cols >= 1`; for `L = V16` both are 16-byte aligned
/// and `cols >= L::N` (so a vector wraps past the end of a row at most once).
#[inline(always)]
unsafe fn bias_kernel<T: Element, L: Lanes<T>, const U: usize>(x: *mut T, bias: *const T, n: usize, cols: usize) {
    if cols == 0 {
        return; // Unreachable (the host checks); lets the compiler drop division-by-zero checks.
    }
    let (tid, nthreads) = global_thread();
    let nvec = n / L::N;
    let mut v = tid;
    // Column of the first lane of vector v, kept up to date without a division per step.
    let mut c = (v * L::N) % cols;
    let step_c = (nthreads * L::N) % cols;
    while v < nvec {
        for _ in 0..U {
            if v >= nvec {
                break;
            }
            // SAFETY: v < nvec.
            let mut xv = unsafe { L::load(x, v) };
            let mut cl = c;
            for l in 0..L::N {
                // SAFETY: cl < cols.
                let b = unsafe { *bias.add(cl) };
                let o = &mut xv.as_mut()[l];
                *o = Add.apply([*o, b]);
                cl += 1;
                if cl == cols {
                    cl = 0;
                }
            }
            // SAFETY: v < nvec.
            unsafe { L::store(x, v, xv) };
            v += nthreads;
            c += step_c;
            if c >= cols {
                c -= cols;
            }
        }
    }
    let t = nvec * L::N + tid;
    if t < n {
        // SAFETY: t < n and t % cols < cols.
        unsafe { *x.add(t) = Add.apply([*x.add(t), *bias.add(t % cols)]) };
    }
}

// One entry point per (op, dtype, variant). The suffix list must match `ELEM_VARIANTS`.
macro_rules! each_variant {
    ($m:ident, $($a:tt),*) => {
        $m!($($a),*, "v16", V16, 1);
        $m!($($a),*, "v16", V16, 2);
        $m!($($a),*, "v16", V16, 4);
        $m!($($a),*, "v1", One, 1);
        $m!($($a),*, "v1", One, 2);
        $m!($($a),*, "v1", One, 4);
    };
}

macro_rules! each_dtype {
    ($m:ident, $($a:tt),*) => {
        each_variant!($m, $($a),*, f32, "f32");
        each_variant!($m, $($a),*, f16, "f16");
        each_variant!($m, $($a),*, bf16, "bf16");
    };
}

/// `(x, y, n, p)`: `y = op(x)`, `p` is the op's scalar (scale's alpha; ignored by the rest).
macro_rules! unary_entry {
    ($name:literal, $make:tt, $T:ty, $dt:literal, $vn:literal, $L:ident, $u:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_", $name, "_", $dt, "_", $vn, "_u", $u))]
            unsafe extern "ptx-kernel" fn entry(x: *const $T, y: *mut $T, n: usize, p: f32) {
                // SAFETY: the host checked lengths and alignment before launching.
                unsafe { map_kernel::<$T, $L, 1, $u, _>($make(p), [x], y, n) }
            }
        };
    };
}

/// `(a, b, out, n, p)`: `out = op(a, b)`; axpy passes `out == b`.
macro_rules! binary_entry {
    ($name:literal, $make:tt, $T:ty, $dt:literal, $vn:literal, $L:ident, $u:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_", $name, "_", $dt, "_", $vn, "_u", $u))]
            unsafe extern "ptx-kernel" fn entry(a: *const $T, b: *const $T, out: *mut $T, n: usize, p: f32) {
                // SAFETY: the host checked lengths and alignment before launching.
                unsafe { map_kernel::<$T, $L, 2, $u, _>($make(p), [a, b], out, n) }
            }
        };
    };
}

/// `(a, b, c, out, n)`: `out = act((a + b) * c)`.
macro_rules! chain_entry {
    ($name:literal, $act:tt, $T:ty, $dt:literal, $vn:literal, $L:ident, $u:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_", $name, "_", $dt, "_", $vn, "_u", $u))]
            unsafe extern "ptx-kernel" fn entry(a: *const $T, b: *const $T, c: *const $T, out: *mut $T, n: usize) {
                let op = AddMulAct { act: $act };
                // SAFETY: the host checked lengths and alignment before launching.
                unsafe { map_kernel::<$T, $L, 3, $u, _>(op, [a, b, c], out, n) }
            }
        };
    };
}

/// `(x, bias, n, cols)`: `x[r, c] += bias[c]` in place.
macro_rules! bias_entry {
    ($name:literal, $T:ty, $dt:literal, $vn:literal, $L:ident, $u:literal) => {
        const _: () = {
            #[unsafe(export_name = concat!("ft_", $name, "_", $dt, "_", $vn, "_u", $u))]
            unsafe extern "ptx-kernel" fn entry(x: *mut $T, bias: *const $T, n: usize, cols: usize) {
                // SAFETY: the host checked lengths, alignment and cols before launching.
                unsafe { bias_kernel::<$T, $L, $u>(x, bias, n, cols) }
            }
        };
    };
}

each_dtype!(unary_entry, "copy", (|_p: f32| CopyBits));
each_dtype!(unary_entry, "scale", (|p: f32| Scale { alpha: p }));
each_dtype!(unary_entry, "relu", (|_p: f32| Relu));
each_dtype!(unary_entry, "gelu_erf", (|_p: f32| GeluErf));
each_dtype!(unary_entry, "gelu_tanh", (|_p: f32| GeluTanh));
each_dtype!(binary_entry, "add", (|_p: f32| Add));
each_dtype!(binary_entry, "axpy", (|p: f32| Axpy { alpha: p }));
each_dtype!(chain_entry, "add_mul", (Activation::None));
each_dtype!(chain_entry, "add_mul_relu", (Activation::Relu));
each_dtype!(chain_entry, "add_mul_gelu_erf", (Activation::GeluErf));
each_dtype!(chain_entry, "add_mul_gelu_tanh", (Activation::GeluTanh));
each_dtype!(bias_entry, "bias_add");
