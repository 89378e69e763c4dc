//! `cargo xtask info`: the devices and what they can do, or the CPU backend in use.

use ferrotune::{Backend, BackendChoice};

pub fn run() -> anyhow::Result<()> {
    match ferrotune::devices() {
        Ok(devs) => {
            for d in devs {
                println!("device {}: {}", d.ordinal, d.name);
                println!("  compute capability   {}.{} ({})", d.compute_capability.0, d.compute_capability.1, d.arch());
                println!("  SMs                  {}", d.sm_count);
                println!("  global memory        {:.1} GiB", d.global_mem_bytes as f64 / (1u64 << 30) as f64);
                println!("  L2 cache             {:.1} MiB", d.l2_bytes as f64 / (1u64 << 20) as f64);
                println!(
                    "  shared mem / block   {} KiB (opt-in {} KiB)",
                    d.shared_mem_per_block / 1024,
                    d.shared_mem_per_block_optin / 1024
                );
                println!("  shared mem / SM      {} KiB", d.shared_mem_per_sm / 1024);
                println!("  max threads          {} / block, {} / SM", d.max_threads_per_block, d.max_threads_per_sm);
                println!("  registers / SM       {}", d.registers_per_sm);
                println!("  SM clock             {} MHz", d.clock_khz / 1000);
                println!(
                    "  memory               {} MHz x {} bit ({:.0} GB/s theoretical)",
                    d.memory_clock_khz / 1000,
                    d.memory_bus_bits,
                    d.theoretical_bandwidth() / 1e9
                );
                println!("  driver               CUDA {}.{}", d.driver_version / 1000, d.driver_version % 1000 / 10);
            }
            topology();
            match ferrotune::nccl::require_nccl() {
                Ok(()) => println!("NCCL: loadable (collectives available)"),
                Err(e) => println!("NCCL: {e}"),
            }
            match Backend::new(BackendChoice::Cuda) {
                Ok(Backend::Cuda(g)) => {
                    let from =
                        if g.kernels_from_cubin()? { "cubin (no JIT)" } else { "PTX (JIT-compiled by the driver)" };
                    println!("kernels: {} {from} loaded", g.ptx_arch()?)
                }
                Ok(_) => {}
                Err(e) => println!("kernels: {e}"),
            }
            builds();
        }
        Err(e) => {
            builds();
            let b = Backend::new(BackendChoice::Cpu)?;
            let threads = match &b {
                Backend::Cpu(c) => c.threads(),
                Backend::Cuda(_) => 0,
            };
            println!("{e}: CPU backend, {threads} threads");
        }
    }
    Ok(())
}

/// The kernel build id of each op family in each embedded module: what profile entries
/// tuned with this binary are keyed by (docs/profile-format.md).
fn builds() {
    match ferrotune::build_id::embedded_builds() {
        Ok(mods) => {
            for (arch, ids) in mods {
                let list: Vec<String> = ids.iter().map(|(f, id)| format!("{f} {id}")).collect();
                println!("kernel builds ({arch}): {}", list.join(", "));
            }
        }
        Err(e) => println!("kernel builds: {e}"),
    }
}

/// Which device pairs have peer access and what kind of link the driver reports.
fn topology() {
    let n = ferrotune::device_count().unwrap_or(0);
    if n < 2 {
        println!("topology: one device, no peers");
        return;
    }
    match ferrotune::DeviceSet::all() {
        Ok(set) => {
            let t = set.topology();
            println!("topology (peer access enabled where possible):");
            for (i, row) in t.links.iter().enumerate() {
                for (j, link) in row.iter().enumerate() {
                    if let Some(l) = link {
                        println!(
                            "  {} -> {}: {} (performance rank {}{})",
                            t.ordinals[i],
                            t.ordinals[j],
                            l.kind(),
                            l.performance_rank,
                            if t.enabled[i][j] { ", enabled" } else { "" }
                        );
                    }
                }
            }
        }
        Err(e) => println!("topology: {e}"),
    }
}
