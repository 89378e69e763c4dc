//! `cargo xtask profile explain --op clifford --shape DIMxBxN`: the forward and backward launch
//! configs an SGP problem gets on this machine, and for each whether it came from a tuning
//! profile (which file, line and how it matched) or the built-in heuristic, and why.

use anyhow::Context;
use ferrotune::ops::clifford::{self as cl, Clifford, CliffordConfig};
use ferrotune::profile::ProfileSet;
use ferrotune::tuned::{CliffordPass, Source, clifford_layout, variant_label};
use ferrotune::{Backend, DType, Scalar, bf16, f16};

/// A config for people: block, team, variant, grid policy, CPU rows.
fn show(c: &CliffordConfig) -> String {
    format!(
        "{} threads, {} rows per block (team of {}), variant {}{}, {} blocks per SM, cpu_rows {}",
        c.threads,
        c.rows_per_block,
        c.team() * c.cluster,
        variant_label(c.variant),
        match (c.variant.stream_w, c.variant.vpt, c.cluster) {
            (true, 0, _) => " (split: the norm's row coefficients first, then one feature a thread)".to_string(),
            (true, _, _) => " (weights re-read per row)".to_string(),
            (_, _, k) if k > 1 => format!(" (a row shared by a cluster of {k} blocks)"),
            _ => String::new(),
        },
        c.blocks_per_sm,
        c.cpu_rows
    )
}

fn choice<T: Scalar>(
    set: &ProfileSet,
    pass: CliffordPass,
    b: &Backend,
    p: &Clifford,
) -> anyhow::Result<(CliffordConfig, Source)> {
    Ok(cl::choice_in::<T>(set, pass, &b.stream(), p)?)
}

pub fn run(set: &ProfileSet, dtype: &str, shape: Option<&str>, normalize: bool, b: &Backend) -> anyhow::Result<()> {
    let shape = shape.context("clifford needs --shape DIMxBxN (e.g. 2x4096x512)")?;
    let v = crate::validate::shape(shape, &[3], "DIMxBxN (e.g. 2x4096x512)")?;
    let [dim, batch, n] = v[..] else { anyhow::bail!("shape '{shape}' is not DIMxBxN") };
    let dt = DType::ALL
        .into_iter()
        .find(|d| d.name() == dtype)
        .with_context(|| format!("unknown dtype '{dtype}' (valid: f32, f16, bf16)"))?;
    let p = Clifford::new(u32::try_from(dim).unwrap_or(0), batch, n, normalize);
    p.tables()?;
    println!("clifford {} {} B={batch} N={n} on {}:", dt.name(), clifford_layout(&p), b.name());
    for pass in CliffordPass::ALL {
        let (c, src) = match dt {
            DType::F32 => choice::<f32>(set, pass, b, &p)?,
            DType::F16 => choice::<f16>(set, pass, b, &p)?,
            DType::Bf16 => choice::<bf16>(set, pass, b, &p)?,
        };
        let what = match pass {
            CliffordPass::Forward => "forward ",
            CliffordPass::Backward => "backward",
        };
        let two_pass = if pass == CliffordPass::Backward && c.variant.vpt == 0 && !c.variant.stream_w {
            " (two passes)"
        } else {
            ""
        };
        println!("  {what} ({pass}): {}{two_pass}\n    from: {src}", show(&c));
        if matches!(src, Source::Heuristic { .. }) && pass == CliffordPass::Forward {
            let chain: Vec<String> = CliffordConfig::forward_candidates(&p, dt, b.device())
                .iter()
                .map(|c| format!("{}/{}", variant_label(c.variant), c.team()))
                .collect();
            println!(
                "    the heuristic's candidates (variant/team, the first the registers allow wins; refit from the \
                 H100 sweep in bench/results/clifford-run2 and the H200 sweeps in \
                 bench/results/clifgate-f898a67117cd/run1 and run4): {}",
                chain.join(" → ")
            );
        }
    }
    Ok(())
}
