//! The staged SGP entries (`ft_clifford_fwdt_d{2,3}_{dt}_f{n}` forward and
//! `ft_clifford_bwdt_d{2,3}_{dt}_f{n}` backward, sm_90a only; `entry/clifford_*_staged.rs`,
//! their ring in `entry/clifford_staged_io.rs`): the shared-memory layout and the copy ranges
//! that the PTX entries and the host's launch code agree on.
//!
//! A block takes groups of `R` consecutive batch rows (`R = threads / team`). For one group,
//! each component plane of an input (x and y; the backward also grad_out) holds the group's
//! rows as one contiguous run of `R * N` elements: a *segment*. `cp.async.bulk` copies the
//! 16-byte-aligned interior of every segment into a ring of `stages` shared-memory stages, so
//! the copies of the next `stages - 1` groups are in flight while a group is computed; the few
//! elements before the first and after the last aligned 16 bytes of a segment (any N, any
//! pointer offset) are read from global memory by the thread that needs them. In a stage, the
//! element at byte address `a` of a segment starting at `s` sits at `seg(s) + a - floor16(s)`,
//! so the interior lands 16-byte aligned.
//!
//! Dynamic shared memory: `[0, SCRATCH)` the team-reduction scratch, `[SCRATCH, SCRATCH +
//! 8 * MAX_STAGES)` one mbarrier per stage, then the stages from [`STAGES_AT`].

/// Bytes of the team-reduction scratch (as the other row kernels, `entry/clifford_io.rs`).
pub const SCRATCH: usize = 1024;
/// Most stages of the ring.
pub const MAX_STAGES: usize = 8;
/// Byte offset of the first stage.
pub const STAGES_AT: usize = SCRATCH + 8 * MAX_STAGES;
/// Features per thread of the compiled entries (the `_f{n}` suffix): 2 in 2D, 4 in 3D (the
/// forward also 4 in 2D). 3D with 2 (512 threads, 128 registers) spilled its weights.
pub const FPTS: [u32; 2] = [2, 4];

/// Threads per block of the entries with `fpt` features per thread (their launch bounds, one
/// block per SM: up to 255 registers with 4 features, 128 with 2) and of every launch.
pub const fn threads_for(fpt: u32) -> u32 {
    if fpt == 2 { 512 } else { 256 }
}

/// Launch bounds of the staged entries (`None` for other names).
pub fn launch_bounds(entry: &str) -> Option<(u32, u32)> {
    let rest = entry.strip_prefix("ft_clifford_fwdt_d").or_else(|| entry.strip_prefix("ft_clifford_bwdt_d"))?;
    Some((threads_for(if rest.ends_with("_f2") { 2 } else { 4 }), 1))
}

/// Bytes a segment of `rows * n` elements of `es` bytes takes in a stage: the elements, up to
/// 15 bytes of misalignment before them, rounded up to 16.
pub const fn segment_bytes(rows: usize, n: usize, es: usize) -> usize {
    (rows * n * es + 15).div_ceil(16) * 16
}

/// Bytes of one stage: `tensors * c` segments (input by input, component by component).
pub const fn stage_bytes(tensors: usize, c: usize, rows: usize, n: usize, es: usize) -> usize {
    tensors * c * segment_bytes(rows, n, es)
}

/// Dynamic shared memory of a launch with `stages` stages.
pub const fn smem_bytes(tensors: usize, c: usize, rows: usize, n: usize, es: usize, stages: usize) -> usize {
    STAGES_AT + stages * stage_bytes(tensors, c, rows, n, es)
}

/// The part of the byte range `[start, end)` that `cp.async.bulk` copies: from the first
/// 16-byte boundary at or after `start` to the last at or before `end`, as `(lo, hi)`; `lo ==
/// hi` when no whole 16 bytes lie inside (everything then comes from global memory).
pub const fn interior(start: u64, end: u64) -> (u64, u64) {
    let lo = (start + 15) & !15;
    let hi = end & !15;
    if hi > lo { (lo, hi) } else { (lo, lo) }
}

/// The entry point `ft_clifford_{fwdt|bwdt}_d{dim}_{dt}_f{fpt}` (`backward` picks bwdt).
pub fn entry_name(backward: bool, dim: u32, dtype: crate::element::DType, fpt: u32) -> crate::gemm::EntryName {
    let mut n = crate::gemm::EntryName::new();
    n.push(if backward { "ft_clifford_bwdt_d" } else { "ft_clifford_fwdt_d" });
    n.push(if dim == 2 { "2_" } else { "3_" });
    n.push(dtype.name());
    n.push(if fpt == 2 { "_f2" } else { "_f4" });
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interior_is_aligned_and_inside() {
        for start in 0u64..64 {
            for len in 0u64..80 {
                let end = start + len;
                let (lo, hi) = interior(start, end);
                assert_eq!(lo % 16, 0);
                assert_eq!(hi % 16, 0);
                assert!(lo <= hi);
                if hi > lo {
                    assert!(lo >= start && hi <= end, "{start}..{end} -> {lo}..{hi}");
                    assert!(lo - start < 16 && end - hi < 16);
                } else {
                    // No aligned 16 bytes fit inside.
                    assert!(start.div_ceil(16) * 16 + 16 > end);
                }
            }
        }
    }

    #[test]
    fn a_segment_holds_its_interior_at_its_offset() {
        for es in [2usize, 4] {
            for n in [1usize, 7, 128, 777] {
                for rows in [1usize, 2, 4] {
                    for mis in (0..16).step_by(es) {
                        let start = 4096 + mis as u64;
                        let end = start + (rows * n * es) as u64;
                        let (_, hi) = interior(start, end);
                        // The last byte placed in the stage is below the segment's size.
                        let last = (hi.max(end)) - (start & !15);
                        assert!(last as usize <= segment_bytes(rows, n, es), "es {es} n {n} rows {rows} mis {mis}");
                        assert_eq!(segment_bytes(rows, n, es) % 16, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn layout_fits_the_largest_rows_it_is_used_for() {
        // 3D f32 N = 1024, one row a stage, three stages: inside the 227 KiB an SM gives a block.
        assert!(smem_bytes(2, 8, 1, 1024, 4, 3) <= 227 * 1024);
        assert_eq!(STAGES_AT % 16, 0);
        let bf16 = crate::element::DType::Bf16;
        assert_eq!(entry_name(false, 3, bf16, 4).as_str(), "ft_clifford_fwdt_d3_bf16_f4");
        assert_eq!(entry_name(true, 2, bf16, 2).as_str(), "ft_clifford_bwdt_d2_bf16_f2");
        assert_eq!(launch_bounds("ft_clifford_fwdt_d2_bf16_f2"), Some((512, 1)));
        assert_eq!(launch_bounds("ft_clifford_bwdt_d3_f32_f4"), Some((256, 1)));
        assert_eq!(launch_bounds("ft_clifford_fwd_d2_f32_v1_p4"), None);
        assert_eq!(launch_bounds("ft_clifford_bwd_d2_f32_v1_p4s"), None);
    }
}
