//! `cargo xtask ranks --world N`: NCCL with one process per GPU, launched the way torchrun
//! does it. The launcher makes the unique id, writes it to a file and also hands it out in
//! `FERROTUNE_NCCL_ID`; each rank process (`xtask ranks --rank R`) joins, runs every
//! collective on its GPU and checks the values, then checks that ranks passing different
//! lengths get `SizeMismatch`. Each rank has a deadline; the launcher kills what outlives it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use ferrotune::collective::{Communicator, Reduce};
use ferrotune::nccl::{CollectiveError, NCCL_ID_ENV, NcclId};
use ferrotune::{Backend, Buffer, Error, Gpu};

#[derive(clap::Args)]
pub struct Args {
    /// Ranks (one per GPU, ranks 0..N on devices 0..N).
    #[arg(long, default_value_t = 2)]
    world: usize,
    /// Internal: run as this rank (set by the launcher).
    #[arg(long, hide = true)]
    rank: Option<usize>,
    /// Internal: the file holding the id (the launcher's).
    #[arg(long, hide = true)]
    id_file: Option<PathBuf>,
    /// Elements per rank in the checks.
    #[arg(long, default_value_t = 1 << 20)]
    elements: usize,
    /// Seconds each step may take.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    match a.rank {
        Some(r) => rank(&a, r),
        None => launch(&a),
    }
}

fn launch(a: &Args) -> anyhow::Result<()> {
    let n = ferrotune::device_count().unwrap_or(0);
    if n < a.world || a.world < 2 {
        println!("ranks: skipped: needs {} CUDA devices, {n} present", a.world.max(2));
        return Ok(());
    }
    ferrotune::nccl::require_nccl()?;
    let id = NcclId::new()?;
    let file = std::env::temp_dir().join(format!("ferrotune-nccl-id-{}", std::process::id()));
    id.write_file(&file).with_context(|| format!("writing {}", file.display()))?;
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for r in 0..a.world {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["ranks", "--world", &a.world.to_string(), "--rank", &r.to_string()])
            .args(["--elements", &a.elements.to_string(), "--timeout", &a.timeout.to_string()])
            .env("NCCL_NVLS_ENABLE", "0");
        // Rank 0 reads the id from the environment, the others from the file: both paths.
        if r == 0 {
            cmd.env(NCCL_ID_ENV, id.to_hex());
        } else {
            cmd.arg("--id-file").arg(&file);
        }
        children.push(cmd.spawn().context("starting a rank")?);
    }
    let deadline = Instant::now() + Duration::from_secs(3 * a.timeout + 30);
    let mut failed = 0;
    for (r, mut c) in children.into_iter().enumerate() {
        let status = loop {
            if let Some(s) = c.try_wait()? {
                break Some(s);
            }
            if Instant::now() > deadline {
                let _ = c.kill();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        match status {
            Some(s) if s.success() => {}
            Some(s) => {
                failed += 1;
                println!("rank {r}: exited with {s}");
            }
            None => {
                failed += 1;
                println!("rank {r}: killed at the launcher's deadline");
            }
        }
    }
    let _ = std::fs::remove_file(&file);
    anyhow::ensure!(failed == 0, "{failed} of {} ranks failed", a.world);
    println!("ranks: {} processes, every collective checked, size disagreement detected", a.world);
    Ok(())
}

fn rank(a: &Args, r: usize) -> anyhow::Result<()> {
    let timeout = Duration::from_secs(a.timeout);
    let id = match &a.id_file {
        Some(f) => NcclId::read_file(f, timeout)?,
        None => NcclId::from_env()?,
    };
    let b = Backend::Cuda(Gpu::new(r)?);
    let s = b.new_stream()?;
    let t0 = Instant::now();
    let mut c = Communicator::from_rank(&s, r, a.world, &id, timeout)?;
    let (w, n) = (a.world, a.elements);
    let x: Vec<f32> = (0..n).map(|i| (i % 1000 + r) as f32).collect();
    let xb = Buffer::from_slice(&s, &x)?;
    let mut sum = Buffer::<f32>::zeros(&s, n)?;
    c.all_reduce(&xb.all(), &mut sum.all_mut(), Reduce::Sum)?;
    let want_sum = |i: usize| (w * (i % 1000) + w * (w - 1) / 2) as f32;
    anyhow::ensure!(sum.to_vec(&s)?.iter().enumerate().all(|(i, v)| *v == want_sum(i)), "rank {r}: all_reduce wrong");
    let mut bc = Buffer::from_slice(&s, &x)?;
    c.broadcast(&mut bc.all_mut(), w - 1)?;
    anyhow::ensure!(
        bc.to_vec(&s)?.iter().enumerate().all(|(i, v)| *v == (i % 1000 + w - 1) as f32),
        "rank {r}: broadcast wrong"
    );
    let mut g = Buffer::<f32>::zeros(&s, w * n)?;
    c.all_gather(&xb.all(), &mut g.all_mut())?;
    let gv = g.to_vec(&s)?;
    anyhow::ensure!((0..w * n).all(|j| gv[j] == (j % n % 1000 + j / n) as f32), "rank {r}: all_gather wrong");
    let big = Buffer::from_slice(&s, &vec![(r + 1) as f32; w * n])?;
    let mut part = Buffer::<f32>::zeros(&s, n)?;
    c.reduce_scatter(&big.all(), &mut part.all_mut(), Reduce::Sum)?;
    anyhow::ensure!(part.to_vec(&s)?.iter().all(|v| *v == (w * (w + 1) / 2) as f32), "rank {r}: reduce_scatter wrong");
    // Different lengths on different ranks: every rank gets the typed error, none hangs.
    let mut odd = Buffer::<f32>::zeros(&s, 1000 + r)?;
    match c.all_reduce_in_place(&mut odd.all_mut(), Reduce::Sum) {
        Err(Error::Collective(CollectiveError::SizeMismatch { .. })) => {}
        other => anyhow::bail!("rank {r}: lengths 1000 + rank should be a SizeMismatch, got {other:?}"),
    }
    println!("rank {r}: all collectives correct, size disagreement detected ({:.1} s)", t0.elapsed().as_secs_f64());
    Ok(())
}
