//! ferrotune's kernels: the maths of every op, written once. Built for `nvptx64-nvidia-cuda`
//! it yields the PTX entry points (`entry/`); built for the host it is the CPU backend's maths.
#![no_std]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, stdarch_nvptx, asm_experimental_arch, core_intrinsics))]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]

pub mod arch;
pub mod clifford;
pub mod element;
pub mod elementwise;
pub mod gemm;
pub mod gemm_sm90;
pub mod gemm_sm90_split;
pub mod gemv;
pub mod gemv_rows;
pub mod gemv_stream;
pub mod math;
pub mod pack;
pub mod reduce;
pub mod splitk;

#[cfg(target_arch = "nvptx64")]
mod entry;

pub use element::{DType, Element};

/// A kernel cannot unwind; the host validates inputs so that this is never reached.
#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; it has no other effect.
    unsafe { core::arch::nvptx::trap() }
}
