//! Block reduction entry point: per-block partial sums with warp shuffles and shared memory.

use crate::arch::nvptx::{
    block_dim_x, block_idx_x, grid_dim_x, ld_global_v4, ld_shared_f32, reduce_smem_addr, shfl_xor_f32, st_shared_f32,
    sync_threads, thread_idx_x,
};
use crate::reduce::{combine, warp_tree};

/// `partial[blockIdx.x] = sum of the elements this block visits` (grid-stride, 16-byte loads).
/// The host adds the partials.
///
/// # Safety
/// `x` covers `n` f32 and `x + head` is 16-byte aligned (`head < 4`, `head <= n`); `partial`
/// covers `gridDim.x` f32; `blockDim.x` is a multiple of 32 and at most 1024.
#[unsafe(export_name = "ft_sum_f32")]
unsafe extern "ptx-kernel" fn sum_f32(x: *const f32, partial: *mut f32, n: usize, head: usize) {
    let tid = thread_idx_x() as usize;
    let gtid = block_idx_x() as usize * block_dim_x() as usize + tid;
    let nthreads = grid_dim_x() as usize * block_dim_x() as usize;
    let mut acc = [0.0f32; 4];
    if gtid < head {
        // SAFETY: gtid < head <= n.
        acc[1] = unsafe { *x.add(gtid) };
    }
    // SAFETY: head <= n, so x + head is inside (or one past) the buffer.
    let (x, n) = (unsafe { x.add(head) }, n - head);
    let nvec = n / 4;
    let mut v = gtid;
    while v < nvec {
        // SAFETY: v < n / 4 and x is 16-byte aligned.
        let w = unsafe { ld_global_v4(x.add(4 * v) as *const u32) };
        for l in 0..4 {
            acc[l] += f32::from_bits(w[l]);
        }
        v += nthreads;
    }
    let t = 4 * nvec + gtid;
    if t < n {
        // SAFETY: t < n.
        acc[0] += unsafe { *x.add(t) };
    }
    let mut s = combine(acc);
    // SAFETY: every lane of every warp reaches these calls (blockDim.x is a multiple of 32).
    s = warp_tree(s, |v, m| unsafe { shfl_xor_f32(v, m) });
    let warp = tid / 32;
    let smem = reduce_smem_addr();
    if tid % 32 == 0 {
        // SAFETY: warp < 32, inside the 128-byte scratch array.
        unsafe { st_shared_f32(smem + 4 * warp as u32, s) };
    }
    // SAFETY: reached by all threads of the block.
    unsafe { sync_threads() };
    if warp == 0 {
        let nwarps = block_dim_x() as usize / 32;
        // SAFETY: tid < 32 reads inside the scratch array.
        let mut s = if tid < nwarps { unsafe { ld_shared_f32(smem + 4 * tid as u32) } } else { 0.0 };
        // SAFETY: the whole of warp 0 is here.
        s = warp_tree(s, |v, m| unsafe { shfl_xor_f32(v, m) });
        if tid == 0 {
            // SAFETY: blockIdx.x < gridDim.x.
            unsafe { *partial.add(block_idx_x() as usize) = s };
        }
    }
}
