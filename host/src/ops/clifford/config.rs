//! [`CliffordConfig`]: how the Clifford row kernels and the backward are launched, the
//! built-in heuristic, validation, and the space the tuner sweeps.

use ferrotune_kernels::clifford::{BWD_VARIANTS, ROW_VARIANTS, RowVariant};

use super::{Clifford, OP};
use crate::DType;
use crate::device::DeviceInfo;
use crate::error::{Error, Result};

/// How the row kernels (forward, FCGP assembly) and the backward are launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CliffordConfig {
    /// Threads per block: a power of two in 32..=1024.
    pub threads: u32,
    /// Batch rows a block works on at once (the batch block): a power of two dividing
    /// `threads`; each row gets a team of `threads / rows_per_block` threads covering its N
    /// features.
    pub rows_per_block: u32,
    /// Accesses of 4 features or 1, and how many a thread keeps in registers per row (0: two
    /// passes). A compiled variant ([`ROW_VARIANTS`]); the backward uses only `vec`.
    pub variant: RowVariant,
    /// 0: one block per group of rows. k > 0: at most k blocks per SM, each looping over rows.
    pub blocks_per_sm: u32,
    /// Batch rows per rayon task on the CPU backend.
    pub cpu_rows: usize,
}

impl CliffordConfig {
    /// The built-in choice for `p` in `dtype`: each thread keeps 4 features' weights in
    /// registers (2D: one 4-feature access when N % 4 == 0, else four 1-feature accesses; 3D:
    /// two 1-feature accesses, as the 3D weights take twice the registers), a team of the
    /// next power of two threads covers the row (the two-pass form with teams of 256 beyond
    /// 1024 threads per row), blocks of at least 256 threads, two resident blocks per SM
    /// looping over the rows (each reads its weights once and prefetches its next row).
    pub fn heuristic(p: &Clifford, _dtype: DType, device: Option<&DeviceInfo>) -> CliffordConfig {
        let max_threads = device.map_or(1024, |d| d.max_threads_per_block);
        let vec = p.dim == 2 && p.n.is_multiple_of(4);
        let (lanes, vpt) = match (p.dim, vec) {
            (2, true) => (4, 1),
            (2, false) => (1, 4),
            _ => (1, 2),
        };
        let team = p.n.max(1).div_ceil(lanes * vpt).next_power_of_two();
        let (variant, team) = if team <= max_threads as usize {
            (RowVariant { vec, vpt: vpt as u32 }, team as u32)
        } else {
            (RowVariant { vec, vpt: 0 }, 256)
        };
        let threads = team.max(256).min(max_threads);
        CliffordConfig {
            threads,
            rows_per_block: threads / team,
            variant,
            blocks_per_sm: 2,
            cpu_rows: (4096 / p.n.max(1)).max(1),
        }
    }

    /// The built-in choice for the backward: the one-pass kernel keeping a row in registers
    /// (2D: one 4-feature access when N % 4 == 0, else two 1-feature accesses; 3D: one
    /// 1-feature access, then two) when a team of at most 256 threads covers N (their
    /// registers, about 160 per thread for the larger variants, allow 256 threads per
    /// block), else the two-pass form ([`CliffordConfig::backward_form`]). Two resident
    /// blocks per SM loop over the rows; each team's weight gradient stays in registers.
    pub fn backward_heuristic(p: &Clifford, dtype: DType, device: Option<&DeviceInfo>) -> CliffordConfig {
        let vec = p.dim == 2 && p.n.is_multiple_of(4);
        let options: &[(bool, usize)] = match (p.dim, vec) {
            (2, true) => &[(true, 1)],
            (2, false) => &[(false, 2), (false, 4)],
            _ => &[(false, 1), (false, 2)],
        };
        for &(vec, vpt) in options {
            let lanes = if vec { 4 } else { 1 };
            let team = p.n.max(1).div_ceil(lanes * vpt).next_power_of_two();
            if team <= 256 {
                let threads = 256u32.max(team as u32);
                return CliffordConfig {
                    threads,
                    rows_per_block: threads / team as u32,
                    variant: RowVariant { vec, vpt: vpt as u32 },
                    blocks_per_sm: 2,
                    cpu_rows: (4096 / p.n.max(1)).max(1),
                };
            }
        }
        Self::heuristic(p, dtype, device).backward_form()
    }

    /// The config's two-pass form for the backward kernels: they keep nothing in registers
    /// across a row (any team size covers the row), and their register use (up to 250 per
    /// thread in 3D) allows at most 256 threads per block.
    pub fn backward_form(mut self) -> CliffordConfig {
        self.variant.vpt = 0;
        let team = self.team().min(256);
        self.threads = self.threads.min(256).max(team);
        self.rows_per_block = self.threads / team;
        self
    }

    /// Threads per row.
    pub fn team(&self) -> u32 {
        self.threads / self.rows_per_block.max(1)
    }

    /// Checks the config against the compiled variants, the device and the problem.
    pub fn validate(&self, p: &Clifford, device: Option<&DeviceInfo>) -> Result<()> {
        let bad = |why: String| Err(Error::InvalidConfig { op: OP, why });
        let max_threads = device.map_or(1024, |d| d.max_threads_per_block);
        if !self.threads.is_power_of_two() || self.threads < 32 || self.threads > max_threads {
            return bad(format!("threads per block {} must be a power of two in 32..={max_threads}", self.threads));
        }
        if !self.rows_per_block.is_power_of_two() || self.rows_per_block > self.threads {
            return bad(format!("rows per block {} must be a power of two up to threads", self.rows_per_block));
        }
        if !ROW_VARIANTS.contains(&self.variant) {
            return bad(format!("variant {:?} is not compiled into the PTX (see ROW_VARIANTS)", self.variant));
        }
        if self.variant.vec && !p.n.is_multiple_of(4) {
            return bad(format!("4-feature accesses need N % 4 == 0, N is {}", p.n));
        }
        if let Some(max) = self.variant.max_features(self.team() as usize)
            && p.n > max
        {
            return bad(format!(
                "{} threads per row keeping {} accesses of {} cover {max} features, N is {}",
                self.team(),
                self.variant.vpt,
                self.variant.lanes(),
                p.n
            ));
        }
        if self.cpu_rows == 0 {
            return bad("cpu_rows must be at least 1".into());
        }
        Ok(())
    }

    /// Checks a backward config: `vpt` = 0 the two-pass kernels (any N), else a compiled
    /// one-pass variant ([`BWD_VARIANTS`]) whose team covers N.
    pub fn validate_backward(&self, p: &Clifford, device: Option<&DeviceInfo>) -> Result<()> {
        let mut two_pass = *self;
        two_pass.variant.vpt = 0;
        two_pass.validate(p, device)?;
        if self.variant.vpt > 0 {
            if !BWD_VARIANTS.contains(&self.variant) {
                return Err(Error::InvalidConfig {
                    op: OP,
                    why: format!("backward variant {:?} is not compiled into the PTX (see BWD_VARIANTS)", self.variant),
                });
            }
            if let Some(max) = self.variant.max_features(self.team() as usize)
                && p.n > max
            {
                return Err(Error::InvalidConfig {
                    op: OP,
                    why: format!(
                        "backward: {} threads per row keeping {} accesses of {} cover {max} features, N is {}",
                        self.team(),
                        self.variant.vpt,
                        self.variant.lanes(),
                        p.n
                    ),
                });
            }
        }
        Ok(())
    }

    /// Every config the tuner may try for `p` on the GPU: compiled variants x block sizes x
    /// batch blocks x grid policies, keeping those that cover N.
    pub fn gpu_space(p: &Clifford) -> Vec<CliffordConfig> {
        let mut v = Vec::new();
        for variant in ROW_VARIANTS {
            for threads in [64, 128, 256, 512, 1024] {
                let mut rows = 1;
                while rows <= threads {
                    for blocks_per_sm in [0, 2, 4, 8] {
                        let c = CliffordConfig { threads, rows_per_block: rows, variant, blocks_per_sm, cpu_rows: 16 };
                        if c.validate(p, None).is_ok() {
                            v.push(c);
                        }
                    }
                    rows *= 2;
                }
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heuristic_is_valid_for_many_shapes() {
        for dim in [2, 3] {
            for n in [1, 3, 4, 31, 32, 100, 128, 512, 777, 1000, 1024, 1536, 4096, 100_000] {
                for dt in DType::ALL {
                    let p = Clifford::new(dim, 7, n, true);
                    let c = CliffordConfig::heuristic(&p, dt, None);
                    c.validate(&p, None).unwrap_or_else(|e| panic!("{p:?}: {c:?}: {e}"));
                    let c = CliffordConfig::backward_heuristic(&p, dt, None);
                    c.validate_backward(&p, None).unwrap_or_else(|e| panic!("backward {p:?}: {c:?}: {e}"));
                }
            }
        }
    }

    #[test]
    fn space_is_valid_and_rejects_what_does_not_cover_n() {
        let p = Clifford::new(3, 64, 1024, true);
        let space = CliffordConfig::gpu_space(&p);
        assert!(!space.is_empty());
        assert!(space.iter().all(|c| c.validate(&p, None).is_ok()));
        let bad = CliffordConfig {
            threads: 64,
            rows_per_block: 1,
            variant: RowVariant { vec: false, vpt: 1 },
            blocks_per_sm: 0,
            cpu_rows: 1,
        };
        assert!(matches!(bad.validate(&p, None), Err(Error::InvalidConfig { .. })));
        let odd = Clifford::new(2, 4, 7, true);
        let vec = CliffordConfig { variant: RowVariant { vec: true, vpt: 1 }, threads: 32, ..bad };
        assert!(vec.validate(&odd, None).is_err());
    }
}
