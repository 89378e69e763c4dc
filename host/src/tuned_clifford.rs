//! Run-time use of tuning profiles for the Clifford SGP layer: the profile key of a problem,
//! a `CliffordConfig` as named parameters and back, and which config the forward or the
//! backward gets (profile entry in the usual lookup order, valid for this call, else the
//! built-in heuristic, with the reason). The ops themselves compute the heuristic
//! (`ops::clifford::forward_choice`, `backward_choice`), since on the GPU it is fitted to the
//! compiled kernels' registers.

use std::fmt;

use ferrotune_kernels::DType;
use ferrotune_kernels::clifford::RowVariant;
use ferrotune_profile::{Config, Param, ProfileSet, Query};

use crate::ops::clifford::{Clifford, CliffordConfig};
use crate::stream::Stream;
use crate::tuned::{Source, check_usable_in, current, fingerprint, machine_of};

/// Which pass of the SGP layer (`fused_gelu_sgp_norm` or its backward) a config is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CliffordPass {
    Forward,
    Backward,
}

impl CliffordPass {
    pub const ALL: [CliffordPass; 2] = [CliffordPass::Forward, CliffordPass::Backward];

    /// The op name of the pass's profile entries: `clifford_fwd` or `clifford_bwd`.
    pub fn op_name(self) -> &'static str {
        match self {
            CliffordPass::Forward => "clifford_fwd",
            CliffordPass::Backward => "clifford_bwd",
        }
    }

    pub fn from_name(s: &str) -> Option<CliffordPass> {
        CliffordPass::ALL.into_iter().find(|p| p.op_name() == s)
    }

    /// Whether `c` is a config this pass can run for `p` on `device` (the host's own checks).
    pub fn validate(self, c: &CliffordConfig, p: &Clifford, device: Option<&crate::DeviceInfo>) -> crate::Result<()> {
        match self {
            CliffordPass::Forward => c.validate(p, device),
            CliffordPass::Backward => c.validate_backward(p, device),
        }
    }
}

impl fmt::Display for CliffordPass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.op_name())
    }
}

/// The layout key of a Clifford problem: the algebra and whether the norm is applied, which
/// must match exactly (`cl2_norm`, `cl3_plain`, ...).
pub fn clifford_layout(p: &Clifford) -> String {
    format!("cl{}_{}", p.dim, if p.normalize { "norm" } else { "plain" })
}

/// The dimensions of a Clifford problem as profiles key them: `[B, N]` (bucketed like every
/// shape; the algebra and the norm are in the layout key).
pub fn clifford_dims(p: &Clifford) -> [u64; 2] {
    [p.b as u64, p.n as u64]
}

/// A variant's name in profiles and reports: `v1_p2s` (4-feature accesses `v4`, features kept
/// per thread `p<n>`, `s` when the weights are re-read per row).
pub fn variant_label(v: RowVariant) -> String {
    format!("{}_p{}{}", if v.vec { "v4" } else { "v1" }, v.vpt, if v.stream_w { "s" } else { "" })
}

/// A Clifford config as named parameters: `threads`, `rows_per_block`, `vec`, `vpt`,
/// `stream_w`, `blocks_per_sm`, `cpu_rows`, `variant` (the label, checked on reading), and
/// `cluster` where it is not 1 (absent reads as 1, so older profiles load unchanged).
pub fn clifford_to_params(c: &CliffordConfig) -> Config {
    let mut m = Config::new();
    m.insert("threads".into(), Param::Int(c.threads.into()));
    m.insert("rows_per_block".into(), Param::Int(c.rows_per_block.into()));
    m.insert("vec".into(), Param::Bool(c.variant.vec));
    m.insert("vpt".into(), Param::Int(c.variant.vpt.into()));
    m.insert("stream_w".into(), Param::Bool(c.variant.stream_w));
    m.insert("variant".into(), Param::Text(variant_label(c.variant)));
    m.insert("blocks_per_sm".into(), Param::Int(c.blocks_per_sm.into()));
    m.insert("cpu_rows".into(), Param::Int(c.cpu_rows as i64));
    if c.cluster != 1 {
        m.insert("cluster".into(), Param::Int(c.cluster.into()));
    }
    m
}

/// The Clifford config from named parameters; `None` when one is missing, of the wrong type or
/// out of range, or the `variant` label is not the one the fields make. Whether the config
/// suits a problem is `CliffordPass::validate`'s question.
pub fn clifford_from_params(m: &Config) -> Option<CliffordConfig> {
    let u32_of = |k: &str| match m.get(k) {
        Some(Param::Int(v)) => u32::try_from(*v).ok(),
        _ => None,
    };
    let bool_of = |k: &str| match m.get(k) {
        Some(Param::Bool(b)) => Some(*b),
        _ => None,
    };
    let cpu_rows = match m.get("cpu_rows") {
        Some(Param::Int(v)) => usize::try_from(*v).ok().filter(|&r| r > 0)?,
        _ => return None,
    };
    let variant = RowVariant { vec: bool_of("vec")?, vpt: u32_of("vpt")?, stream_w: bool_of("stream_w")? };
    match m.get("variant") {
        Some(Param::Text(t)) if *t == variant_label(variant) => {}
        None => {}
        Some(_) => return None,
    }
    let cluster = match m.get("cluster") {
        None => 1,
        Some(_) => u32_of("cluster").filter(|&c| c > 0)?,
    };
    Some(CliffordConfig {
        threads: u32_of("threads")?,
        rows_per_block: u32_of("rows_per_block")?,
        variant,
        blocks_per_sm: u32_of("blocks_per_sm")?,
        cpu_rows,
        cluster,
    })
}

/// Which profile entry (if any) the `pass` of `p` with `dtype` gets on the machine behind `s`:
/// `Some(config)` with where it came from, or `None` with why the built-in heuristic applies
/// (no profile, no entry for the key, or an entry whose config is malformed or not valid for
/// this call: e.g. tuned for a nearby N that its team does not cover). The key is (device,
/// build, op `clifford_fwd`/`clifford_bwd`, dtype, layout `cl<dim>_<norm|plain>`, bucket of
/// `[B, N]`), in the lookup order of every op.
pub fn clifford_explain_in(
    set: &ProfileSet,
    pass: CliffordPass,
    p: &Clifford,
    dtype: DType,
    s: &Stream,
) -> (Option<CliffordConfig>, Source) {
    let heuristic = |why: String| (None, Source::Heuristic { why });
    if set.is_empty() {
        return heuristic("no tuning profile loaded (FERROTUNE_PROFILE or ~/.config/ferrotune/profiles)".into());
    }
    let (dev, build) = match fingerprint(s, pass.op_name()) {
        Ok(f) => f,
        Err(e) => return heuristic(format!("no device fingerprint: {e}")),
    };
    let layout = clifford_layout(p);
    let shape = clifford_dims(p);
    let q =
        Query { device: &dev, build: &build, op: pass.op_name(), dtype: dtype.name(), layout: &layout, shape: &shape };
    let Some(found) = set.lookup(&q) else {
        return heuristic(format!("no entry for {pass} {} {layout} on {dev} with kernel build {build}", dtype.name()));
    };
    let src = Source::Profile { path: found.path.clone(), line: found.entry.line, how: found.how };
    let Some(c) = clifford_from_params(&found.entry.config) else {
        return heuristic(format!("the entry at {src} has an invalid config {:?}", found.entry.config));
    };
    match pass.validate(&c, p, s.gpu().map(|g| g.info())) {
        Ok(()) => match wider_than_the_row(&c, p).filter(|_| s.gpu().is_some()) {
            Some(why) => heuristic(format!("the entry at {src} does not suit B = {}, N = {}: {why}", p.b, p.n)),
            None => (Some(c), src),
        },
        Err(e) => heuristic(format!("the entry at {src} does not suit B = {}, N = {}: {e}", p.b, p.n)),
    }
}

/// Why a valid config from a profile would waste its GPU teams on rows of `p`: a row team (all
/// the blocks of a cluster in the backward's cluster form) that covers more than twice N (more than half its feature slots empty) was tuned for longer rows
/// (the nearest bucket serves an entry to every N, and a team of 512 keeping two features,
/// tuned at N = 1024, would leave 7 of 8 slots empty at N = 128). The built-in teams cover at
/// most 2N; a config the call forces is still taken as it is, and the CPU backend has no teams.
fn wider_than_the_row(c: &CliffordConfig, p: &Clifford) -> Option<String> {
    let team = c.team() as usize * c.cluster.max(1) as usize;
    let covers = c.variant.max_features(team)?;
    (covers > 2 * p.n.max(1)).then(|| {
        format!("its teams of {team} threads cover {covers} features, more than twice N: tuned for longer rows")
    })
}

/// (pass, dtype, dim, normalize, bucket of B, exact N, machine): validity depends on the exact
/// N, the timing key on B's bucket.
pub(crate) type CliffordMemoKey = (CliffordPass, DType, u32, bool, u64, usize, String);

/// The memoised `clifford_explain_in` over the loaded profiles for this stream's machine (an
/// error only with strict profiles, see `tuned::check_usable`), logged once per key at
/// `debug` level. `Ok(None)`: the caller's heuristic.
pub(crate) fn clifford_config_for(
    s: &Stream,
    pass: CliffordPass,
    p: &Clifford,
    dtype: DType,
) -> crate::Result<(Option<CliffordConfig>, Source)> {
    let c = current();
    check_usable_in(&c, s)?;
    if c.set.is_empty() {
        return Ok((None, Source::Heuristic { why: "no tuning profile loaded".into() }));
    }
    let key = (pass, dtype, p.dim, p.normalize, ferrotune_profile::bucket(p.b as u64), p.n, machine_of(s));
    let mut memo = c.clifford_memo.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(v) = memo.get(&key) {
        return Ok(v.clone());
    }
    let v = clifford_explain_in(&c.set, pass, p, dtype, s);
    log::debug!("{pass} {} {} B={} N={}: {:?} from {}", dtype.name(), clifford_layout(p), p.b, p.n, v.0, v.1);
    memo.insert(key, v.clone());
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clifford_params_round_trip_and_reject_malformed_values() {
        for dim in [2, 3] {
            for n in [1, 7, 64, 777, 4096] {
                let p = Clifford::new(dim, 9, n, n % 2 == 0);
                for c in [
                    CliffordConfig::heuristic(&p, DType::F16, None),
                    CliffordConfig::backward_heuristic(&p, DType::F32, None),
                ] {
                    assert_eq!(clifford_from_params(&clifford_to_params(&c)), Some(c));
                }
            }
        }
        let c = CliffordConfig::heuristic(&Clifford::new(3, 64, 512, true), DType::F32, None);
        let bad: [(&str, Option<Param>); 7] = [
            ("threads", Some(Param::Int(-32))),
            ("rows_per_block", None),
            ("vec", Some(Param::Int(1))),
            ("vpt", Some(Param::Text("2".into()))),
            ("cpu_rows", Some(Param::Int(0))),
            ("variant", Some(Param::Text("v4_p9".into()))),
            ("blocks_per_sm", Some(Param::Int(i64::from(u32::MAX) + 1))),
        ];
        for (k, v) in bad {
            let mut m = clifford_to_params(&c);
            match &v {
                Some(v) => m.insert(k.into(), v.clone()),
                None => m.remove(k),
            };
            assert_eq!(clifford_from_params(&m), None, "{k} = {v:?}");
        }
        // The cluster: written where it is not 1, absent reads as 1, 0 or a negative value is
        // malformed.
        let clustered = CliffordConfig {
            threads: 256,
            rows_per_block: 1,
            variant: RowVariant { vec: false, vpt: 2, stream_w: false },
            cluster: 2,
            ..c
        };
        let m = clifford_to_params(&clustered);
        assert_eq!(m.get("cluster"), Some(&Param::Int(2)));
        assert_eq!(clifford_from_params(&m), Some(clustered));
        assert!(!clifford_to_params(&c).contains_key("cluster"));
        for v in [0, -2] {
            let mut m = clifford_to_params(&clustered);
            m.insert("cluster".into(), Param::Int(v));
            assert_eq!(clifford_from_params(&m), None, "cluster = {v}");
        }
        // `variant` is only a check: without it the fields decide.
        let mut m = clifford_to_params(&c);
        m.remove("variant");
        assert_eq!(clifford_from_params(&m), Some(c));
        assert_eq!(variant_label(RowVariant { vec: false, vpt: 2, stream_w: true }), "v1_p2s");
        assert_eq!(clifford_layout(&Clifford::new(2, 1, 1, false)), "cl2_plain");
        assert_eq!(CliffordPass::from_name("clifford_bwd"), Some(CliffordPass::Backward));
    }

    #[test]
    fn profile_teams_twice_as_wide_as_the_row_are_refused() {
        // The built-in configs never are, forward or backward, at any N.
        for dim in [2, 3] {
            for n in [1, 2, 30, 33, 128, 257, 512, 513, 777, 1024, 1025, 3000] {
                let p = Clifford::new(dim, 64, n, true);
                for dt in [DType::F32, DType::Bf16] {
                    for c in [CliffordConfig::heuristic(&p, dt, None), CliffordConfig::backward_heuristic(&p, dt, None)]
                    {
                        assert_eq!(wider_than_the_row(&c, &p), None, "{dim}D N {n} {dt:?}: {c:?}");
                    }
                }
            }
        }
        // A team of 512 keeping two features, tuned at N = 1024: fine from N = 512, refused
        // below; the two-pass and split forms (any N) never.
        let wide = CliffordConfig::heuristic(&Clifford::new(2, 4096, 1024, true), DType::F32, None);
        let wide =
            CliffordConfig { threads: 512, rows_per_block: 1, variant: RowVariant { vpt: 2, ..wide.variant }, ..wide };
        assert_eq!(wider_than_the_row(&wide, &Clifford::new(2, 4096, 512, true)), None);
        let why = wider_than_the_row(&wide, &Clifford::new(2, 4096, 511, true)).expect("refused");
        assert!(why.contains("teams of 512 threads cover 1024 features"), "{why}");
        assert!(wider_than_the_row(&wide, &Clifford::new(2, 4096, 128, true)).is_some());
        assert_eq!(wider_than_the_row(&CliffordConfig::split(64, 0), &Clifford::new(3, 8, 100, true)), None);
        // A cluster's team is all its blocks: 2 x 256 threads keeping two features cover 1024.
        let cl = CliffordConfig { threads: 256, cluster: 2, ..wide };
        assert_eq!(wider_than_the_row(&cl, &Clifford::new(3, 4096, 777, true)), None);
        let why = wider_than_the_row(&cl, &Clifford::new(3, 4096, 500, true)).expect("refused");
        assert!(why.contains("teams of 512 threads cover 1024 features"), "{why}");
    }
}
