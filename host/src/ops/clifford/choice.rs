//! Which config the SGP forward and backward run when the call names none: a tuning profile's
//! entry that is valid for this call and fits the compiled kernel, else the built-in
//! heuristic fitted to the kernel's registers, together with where it came from.

use ferrotune_kernels::clifford::{self as kc, CliffordKernel, RowVariant};
use ferrotune_profile::ProfileSet;

use super::{Clifford, CliffordConfig, fit_to, forward_config, row_entry};
use crate::DType;
use crate::buffer::Scalar;
use crate::error::Result;
use crate::stream::Stream;
use crate::tuned::{CliffordPass, Source, clifford_explain_in};
use crate::tuned_clifford::clifford_config_for;

/// The entry point of the backward for `v`: the split form's feature kernel (whose block is the
/// config's), the one-pass kernel (`vpt` > 0) or the two-pass one (its `_g` form, weights in
/// global memory, is picked at launch when they do not fit in shared memory; both have the
/// same registers).
pub fn backward_entry(dim: u32, dtype: DType, v: RowVariant) -> String {
    if v.is_split() {
        super::sgp_bwd_split::feat_entry(dim, dtype)
    } else if v.vpt > 0 {
        kc::bwd_entry_name(dim, dtype, v).as_str().to_string()
    } else {
        format!("ft_clifford_bwd_d{dim}_{}_{}", dtype.name(), if v.vec { "v4" } else { "v1" })
    }
}

/// The entry point the backward config `c` launches: [`backward_entry`] of its variant, or
/// the cluster form's (`_c`) where `c.cluster` > 1.
pub fn backward_entry_of(dim: u32, dtype: DType, c: &CliffordConfig) -> String {
    if c.cluster > 1 {
        kc::bwd_cluster_entry_name(dim, dtype, c.variant.vpt).as_str().to_string()
    } else {
        backward_entry(dim, dtype, c.variant)
    }
}

/// The kernel the `pass` of `c` launches.
fn entry_of(pass: CliffordPass, p: &Clifford, dtype: DType, c: &CliffordConfig) -> String {
    match pass {
        CliffordPass::Forward => row_entry(CliffordKernel::Forward, p.dim, dtype, c.variant),
        CliffordPass::Backward => backward_entry_of(p.dim, dtype, c),
    }
}

/// The backward's built-in config on this stream: `CliffordConfig::backward_heuristic` with
/// its threads lowered to what the compiled kernel's registers allow. A cluster form whose
/// kernel is not in the loaded module (a GPU of compute capability 9.0 without the sm_90a
/// build) falls back to the form without clusters.
pub fn backward_config<T: Scalar>(s: &Stream, p: &Clifford) -> Result<CliffordConfig> {
    let info = s.gpu().map(|g| g.info());
    let mut cfg = CliffordConfig::backward_heuristic(p, T::DTYPE, info);
    if cfg.cluster > 1 && s.gpu().is_some_and(|g| g.kernels().is_ok_and(|k| k.arch != "sm_90a")) {
        cfg = CliffordConfig::backward_heuristic_unclustered(p, T::DTYPE, info);
    }
    fit_to(s, cfg, &backward_entry_of(p.dim, T::DTYPE, &cfg))
}

/// A tuned config, or the heuristic with the reason when the tuned one is absent or asks for
/// more threads per block than the compiled kernel allows on this device.
fn settle<T: Scalar>(
    s: &Stream,
    pass: CliffordPass,
    p: &Clifford,
    (tuned, src): (Option<CliffordConfig>, Source),
) -> Result<(CliffordConfig, Source)> {
    let heuristic = |s: &Stream| match pass {
        CliffordPass::Forward => forward_config::<T>(s, p),
        CliffordPass::Backward => backward_config::<T>(s, p),
    };
    let Some(c) = tuned else { return Ok((heuristic(s)?, src)) };
    if let Some(gpu) = s.gpu() {
        let name = entry_of(pass, p, T::DTYPE, &c);
        let k = gpu.kernels()?.function(&name)?;
        if c.threads > k.max_threads {
            let why = format!(
                "the entry at {src} asks for {} threads per block, {name} allows {} on this device",
                c.threads, k.max_threads
            );
            return Ok((heuristic(s)?, Source::Heuristic { why }));
        }
    }
    Ok((c, src))
}

/// The config `fused_gelu_sgp_norm` runs for `p` on this stream and where it came from: the
/// loaded profiles' entry for the problem when it is valid for this call, else
/// [`forward_config`] (the heuristic). Lookups are memoised per (problem, machine).
pub fn forward_choice<T: Scalar>(s: &Stream, p: &Clifford) -> Result<(CliffordConfig, Source)> {
    settle::<T>(s, CliffordPass::Forward, p, clifford_config_for(s, CliffordPass::Forward, p, T::DTYPE)?)
}

/// The config `fused_gelu_sgp_norm_backward` runs for `p` on this stream and where it came
/// from: as [`forward_choice`], the heuristic being [`backward_config`].
pub fn backward_choice<T: Scalar>(s: &Stream, p: &Clifford) -> Result<(CliffordConfig, Source)> {
    settle::<T>(s, CliffordPass::Backward, p, clifford_config_for(s, CliffordPass::Backward, p, T::DTYPE)?)
}

/// [`forward_choice`] or [`backward_choice`] against an explicit set of profiles (what tests
/// and `cargo xtask profile explain` use).
pub fn choice_in<T: Scalar>(
    set: &ProfileSet,
    pass: CliffordPass,
    s: &Stream,
    p: &Clifford,
) -> Result<(CliffordConfig, Source)> {
    settle::<T>(s, pass, p, clifford_explain_in(set, pass, p, T::DTYPE, s))
}
