//! The final comparison of a search's winner with the built-in config. Both are measured again,
//! longer, in alternating rounds (default, winner, default, winner, ...) so that a drift of the
//! clocks or the temperature during the comparison hits both alike; each config's time is the
//! median of its round medians. The winner replaces the built-in config only when it is faster
//! by more than a margin: a near-tie then gives the same profile on every run, instead of
//! whichever config the noise favoured (bench/results/multigpu-h200/run4 saw three of eight
//! configs flip between two runs that way).

use crate::measure::{Repeat, Stats};
use crate::protocol::{ConfigJson, EvalOutcome};

/// Rounds of the alternating comparison.
pub const ROUNDS: usize = 3;

/// The least relative gain a challenger needs to replace the built-in config, unless the user
/// sets another (`--min-gain`).
pub const DEFAULT_MIN_GAIN: f64 = 0.02;

/// The journal role of `who` (`default` or `best`) in round `round`. Round 0 keeps the names
/// older profiles journalled, so their confirmations are reused on resume.
pub fn role(who: &str, round: usize) -> String {
    if round == 0 { format!("confirm-{who}") } else { format!("confirm-{who}-r{}", round + 1) }
}

/// The repetitions of one round: `total` iterations spread over [`ROUNDS`] (at least 1 each).
pub fn per_round(total: Repeat) -> Repeat {
    Repeat { warmup: total.warmup, iters: total.iters.div_ceil(ROUNDS).max(1) }
}

/// One config's rounds as one figure: the median of the round medians (the middle one of
/// three), the median of their dispersions, the extremes and the sample count of all.
/// `None` when there are no rounds.
pub fn pool(rounds: &[Stats]) -> Option<Stats> {
    if rounds.is_empty() {
        return None;
    }
    let med = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
    };
    Some(Stats {
        median_ms: med(rounds.iter().map(|s| s.median_ms).collect()),
        min_ms: rounds.iter().map(|s| s.min_ms).fold(f64::INFINITY, f64::min),
        max_ms: rounds.iter().map(|s| s.max_ms).fold(f64::NEG_INFINITY, f64::max),
        mad_ms: med(rounds.iter().map(|s| s.mad_ms).collect()),
        samples: rounds.iter().map(|s| s.samples).sum(),
    })
}

/// Runs the comparison: `measure(config, journal role, repeat)` for the built-in config `base`
/// and the `challenger` (if any) in alternating rounds; a side that fails a round is not
/// measured again and has no time. Returns the built-in config's pooled time and the decision.
pub fn run<E>(
    base: ConfigJson,
    challenger: Option<ConfigJson>,
    total: Repeat,
    min_gain: f64,
    mut measure: impl FnMut(&ConfigJson, &str, Repeat) -> Result<EvalOutcome, E>,
) -> Result<(Option<Stats>, Option<Decision>), E> {
    let repeat = per_round(total);
    let mut sides: Vec<(ConfigJson, &str, Option<Vec<Stats>>)> = vec![(base, "default", Some(Vec::new()))];
    if let Some(c) = challenger {
        sides.push((c, "best", Some(Vec::new())));
    }
    for r in 0..ROUNDS {
        for (cfg, who, rounds) in sides.iter_mut() {
            let Some(v) = rounds else { continue };
            match measure(cfg, &role(who, r), repeat)? {
                EvalOutcome::Ok { stats, .. } => v.push(stats),
                _ => *rounds = None,
            }
        }
    }
    let pooled = |i: usize| sides.get(i).and_then(|s| s.2.as_deref()).and_then(pool);
    let default = pooled(0);
    // Rounds the challenger lost (its round median not below the built-in config's).
    let lost = match (sides.first().and_then(|s| s.2.as_deref()), sides.get(1).and_then(|s| s.2.as_deref())) {
        (Some(d), Some(c)) => d.iter().zip(c).filter(|(d, c)| c.median_ms >= d.median_ms).count(),
        _ => 0,
    };
    Ok((default, decide(base, default, challenger.zip(pooled(1)), min_gain, lost)))
}

/// The challenger of the built-in config `base` (which ran `base_kernel`): the search's
/// `winner` (config, kernel), unless it is `base` itself or runs the same kernel — then the two
/// are one point, any gap between their times is noise, and the second value names the kernel.
pub fn challenger(
    base: ConfigJson,
    base_kernel: Option<&str>,
    winner: Option<(ConfigJson, Option<&str>)>,
) -> (Option<ConfigJson>, Option<String>) {
    match winner {
        Some((c, _)) if c == base => (None, None),
        Some((_, Some(k))) if base_kernel == Some(k) => (None, Some(k.to_string())),
        Some((c, _)) => (Some(c), None),
        None => (None, None),
    }
}

/// The config kept, its confirmed time, and why.
pub type Decision = (ConfigJson, Stats, Verdict);

/// What the comparison decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// The challenger beat the built-in config by more than the margin (or the built-in
    /// config failed).
    Challenger,
    /// No challenger, or the challenger failed: the built-in config.
    Default,
    /// The challenger was faster, by `gain` (relative), but not by more than the margin.
    WithinMargin { gain: f64 },
    /// The challenger was faster by more than the margin in the pooled time, but not in every
    /// round: it won `won` of [`ROUNDS`]. Two configs of equal speed do that by chance far more
    /// often than they win every round (bench/results/smallm-prefetch-f0d690e3f07c/: one of 18
    /// configs flipped between two runs on a pooled gain alone).
    NotEveryRound { gain: f64, won: usize },
}

/// Picks the config to keep from the confirmed times: the challenger only when its median is
/// below the built-in config's by more than `min_gain` of it and, with a margin above 0, it
/// lost none of the rounds (`lost` of them). `None` when neither has a time.
pub fn decide(
    base: ConfigJson,
    default: Option<Stats>,
    challenger: Option<(ConfigJson, Stats)>,
    min_gain: f64,
    lost: usize,
) -> Option<Decision> {
    match (default, challenger) {
        (None, None) => None,
        (Some(d), None) => Some((base, d, Verdict::Default)),
        (None, Some((c, s))) => Some((c, s, Verdict::Challenger)),
        (Some(d), Some((c, s))) => {
            let gain = 1.0 - s.median_ms / d.median_ms;
            if gain > min_gain && lost > 0 && min_gain > 0.0 {
                Some((base, d, Verdict::NotEveryRound { gain, won: ROUNDS.saturating_sub(lost) }))
            } else if gain > min_gain {
                Some((c, s, Verdict::Challenger))
            } else if gain > 0.0 {
                Some((base, d, Verdict::WithinMargin { gain }))
            } else {
                Some((base, d, Verdict::Default))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ConfigJson, ElemConfigJson};

    fn st(m: f64) -> Stats {
        Stats { median_ms: m, min_ms: m * 0.9, max_ms: m * 1.1, mad_ms: m * 0.01, samples: 10 }
    }

    fn cfg(threads: u32) -> ConfigJson {
        ConfigJson::Elem(ElemConfigJson { threads, vec16: true, unroll: 1, blocks_per_sm: 0, cpu_chunk: 0 })
    }

    #[test]
    fn roles_keep_the_old_names_for_round_one() {
        assert_eq!(role("default", 0), "confirm-default");
        assert_eq!(role("best", 0), "confirm-best");
        assert_eq!(role("best", 2), "confirm-best-r3");
        assert_eq!(per_round(Repeat { warmup: 3, iters: 100 }), Repeat { warmup: 3, iters: 34 });
        assert_eq!(per_round(Repeat { warmup: 0, iters: 1 }), Repeat { warmup: 0, iters: 1 });
    }

    #[test]
    fn pooling_takes_the_middle_round() {
        let p = pool(&[st(1.0), st(3.0), st(2.0)]).unwrap();
        assert_eq!(p.median_ms, 2.0);
        assert_eq!(p.min_ms, 0.9);
        assert!((p.max_ms - 3.3).abs() < 1e-12);
        assert_eq!(p.samples, 30);
        assert_eq!(pool(&[st(1.0), st(2.0)]).unwrap().median_ms, 1.5);
        assert!(pool(&[]).is_none());
    }

    #[test]
    fn the_challenger_needs_more_than_the_margin() {
        let (base, c) = (cfg(256), cfg(512));
        // 1.5% faster: kept the built-in config, and says by how much the challenger won.
        let (k, s, v) = decide(base, Some(st(1.0)), Some((c, st(0.985))), 0.02, 0).unwrap();
        assert_eq!((k, s.median_ms), (base, 1.0));
        assert!(matches!(v, Verdict::WithinMargin { gain } if (gain - 0.015).abs() < 1e-9));
        // 3% faster: the challenger.
        let (k, _, v) = decide(base, Some(st(1.0)), Some((c, st(0.97))), 0.02, 0).unwrap();
        assert_eq!((k, v), (c, Verdict::Challenger));
        // Slower: the built-in config, no gain to report.
        assert_eq!(decide(base, Some(st(1.0)), Some((c, st(1.2))), 0.02, 0).unwrap().2, Verdict::Default);
        // A margin of 0 is the plain fastest.
        assert_eq!(decide(base, Some(st(1.0)), Some((c, st(0.999))), 0.0, 0).unwrap().0, c);
        // One side failed: the other; both: nothing.
        assert_eq!(decide(base, None, Some((c, st(2.0))), 0.02, 0).unwrap().0, c);
        assert_eq!(decide(base, Some(st(2.0)), None, 0.02, 0).unwrap().0, base);
        assert!(decide(base, None, None, 0.02, 0).is_none());
    }

    #[test]
    fn a_winner_that_runs_the_built_in_kernel_is_no_challenger() {
        let (base, c) = (cfg(256), cfg(512));
        let k = "Hopper(Sm90Variant { tile: 8 }, NONE)";
        // Same launch as the built-in config: kept, and the shared kernel named.
        assert_eq!(challenger(base, Some(k), Some((c, Some(k)))), (None, Some(k.to_string())));
        // Another launch, or kernels unknown on either side (older journals, small-M, CPU): a
        // challenger as before.
        assert_eq!(challenger(base, Some(k), Some((c, Some("Tiles(..)")))), (Some(c), None));
        assert_eq!(challenger(base, None, Some((c, Some(k)))), (Some(c), None));
        assert_eq!(challenger(base, Some(k), Some((c, None))), (Some(c), None));
        // The winner is the built-in config, or nothing passed: no challenger, nothing to name.
        assert_eq!(challenger(base, Some(k), Some((base, Some(k)))), (None, None));
        assert_eq!(challenger(base, Some(k), None), (None, None));
    }

    #[test]
    fn the_challenger_must_win_every_round() {
        let (base, c) = (cfg(256), cfg(512));
        // Pooled 5% faster but one round lost: the built-in config, and how many it won.
        let (k, s, v) = decide(base, Some(st(1.0)), Some((c, st(0.95))), 0.02, 1).unwrap();
        assert_eq!((k, s.median_ms), (base, 1.0));
        assert!(matches!(v, Verdict::NotEveryRound { won: 2, gain } if (gain - 0.05).abs() < 1e-9), "{v:?}");
        // Margin 0 is the plain fastest: rounds do not count.
        assert_eq!(decide(base, Some(st(1.0)), Some((c, st(0.95))), 0.0, 2).unwrap().0, c);

        // Through `run`: round medians default 1.00, 1.00, 1.00; challenger 0.90, 1.01, 0.90
        // (pooled 0.90, 10% faster, but slower in round 2) -> kept the built-in config.
        let times = |who: &str, r: usize| match (who, r) {
            ("best", 1) => 1.01,
            ("best", _) => 0.90,
            _ => 1.00,
        };
        let measure = |cfg: &ConfigJson, role: &str, _: Repeat| {
            let who = if *cfg == base { "default" } else { "best" };
            let r = (0..ROUNDS).find(|&r| super::role(who, r) == role).unwrap();
            Ok::<_, ()>(EvalOutcome::Ok { stats: st(times(who, r)), verified: "test".into(), kernel: None })
        };
        let (d, got) = run(base, Some(c), Repeat { warmup: 1, iters: 30 }, 0.02, measure).unwrap();
        assert_eq!(d.unwrap().median_ms, 1.0);
        assert!(matches!(got, Some((k, _, Verdict::NotEveryRound { won: 2, .. })) if k == base), "{got:?}");
        // Winning every round by the same pooled margin: the challenger.
        let measure = |cfg: &ConfigJson, _: &str, _: Repeat| {
            let m = if *cfg == base { 1.0 } else { 0.9 };
            Ok::<_, ()>(EvalOutcome::Ok { stats: st(m), verified: "test".into(), kernel: None })
        };
        let (_, got) = run(base, Some(c), Repeat { warmup: 1, iters: 30 }, 0.02, measure).unwrap();
        assert!(matches!(got, Some((k, _, Verdict::Challenger)) if k == c), "{got:?}");
    }
}
