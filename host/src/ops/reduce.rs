//! Reductions: `sum` of an f32 vector (block partial sums on the device, added on the host).

use cudarc::driver::{DevicePtr, LaunchConfig, PushKernelArg};
use rayon::prelude::*;

use crate::buffer::View;
use crate::error::{DriverContext, Error, Result};
use crate::stream::Stream;

const THREADS: u32 = 256;

/// Sum of `x` (synchronous: returns the value). Partial sums are f32, combined in f64.
pub fn sum(s: &Stream, x: &View<'_, f32>) -> Result<f32> {
    if x.backend_name() != s.backend_name() {
        return Err(Error::BackendMismatch {
            op: "sum",
            what: "input",
            expected: s.backend_name(),
            got: x.backend_name(),
        });
    }
    let n = x.len();
    if n == 0 {
        return Ok(0.0);
    }
    match (s, x) {
        (Stream::Cpu(cpu), View::Cpu(x)) => Ok(cpu.pool.install(|| {
            x.par_chunks(1 << 16).map(|c| ferrotune_kernels::reduce::sum_slice(c) as f64).sum::<f64>() as f32
        })),
        (Stream::Cuda { stream, gpu }, View::Cuda(v)) => {
            let func = gpu.kernels()?.function("ft_sum_f32")?.func;
            let (p, guard) = v.device_ptr(stream);
            // Elements before the first 16-byte boundary are added one by one by the kernel.
            let head = (((16 - p % 16) % 16) / 4).min(n as u64) as usize;
            let blocks = ((n - head) / 4).div_ceil(THREADS as usize).clamp(1, 4 * gpu.info.sm_count as usize) as u32;
            let mut partial = crate::pool::Pooled::<f32>::uninit(&gpu.pool, stream, blocks as usize)?;
            stream.memset_zeros(&mut *partial).ctx(|| "zeroing partial sums".into())?;
            let launch = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
            let mut b = stream.launch_builder(&func);
            b.arg(&p).arg(&mut *partial).arg(&n).arg(&head);
            // SAFETY: matches ft_sum_f32(x, partial, n, head): x covers n f32, p + 4 * head is
            // 16-byte aligned (f32 device pointers are 4-byte aligned), partial has one slot
            // per block, 256 threads is a multiple of 32.
            unsafe { b.launch(launch) }.ctx(|| format!("launching ft_sum_f32 on {n} elements"))?;
            drop(guard);
            let parts = stream.clone_dtoh(&*partial).ctx(|| "copying partial sums".into())?;
            Ok(parts.iter().map(|&v| v as f64).sum::<f64>() as f32)
        }
        _ => unreachable!("backends matched above"),
    }
}
