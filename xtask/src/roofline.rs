//! `cargo xtask roofline`: plots a bench result on the roofline of its own measured ceilings
//! (SVG) and prints what bounds each op and the likely cause of its gap. Without `--from` it
//! runs the quick bench first. The work is in `ferrotune_bench::roofline`.

use std::path::PathBuf;

use ferrotune::BackendChoice;
use ferrotune_bench::roofline::{self, ClassifyConfig, PlotConfig};
use ferrotune_bench::{Options, Report};

#[derive(clap::Args)]
pub struct Args {
    /// A bench result (`cargo xtask bench --json`); without it the quick bench runs first.
    #[arg(long)]
    from: Option<PathBuf>,
    /// Where to write the SVG.
    #[arg(long, default_value = "roofline.svg")]
    out: PathBuf,
    /// ptxas's resource report for the cause analysis (default:
    /// target/ptx/ferrotune_kernels.<the report's PTX arch>.resources.json, from `cargo xtask ptx`).
    #[arg(long)]
    resources: Option<PathBuf>,
    /// Backend of the quick bench when there is no --from.
    #[arg(long, default_value = "auto")]
    backend: BackendChoice,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let report = match &args.from {
        Some(path) => Report::load(path)?,
        None => {
            println!("no --from: running the quick bench first");
            let backend = crate::bench::open_backend(args.backend)?;
            crate::bench::run_report(&backend, &Options::quick(&backend), None)?
        }
    };
    let resources_path = args.resources.clone().or_else(|| {
        let arch = report.device.as_ref()?.ptx_arch.clone();
        Some(crate::workspace_root().join(format!("target/ptx/ferrotune_kernels.{arch}.resources.json")))
    });
    let resources = match &resources_path {
        Some(p) if p.exists() => {
            println!("ptxas resources: {}", p.display());
            roofline::load_resources(p)?
        }
        Some(p) => {
            println!("no ptxas report at {} (run `cargo xtask ptx`): causes use the config only", p.display());
            Vec::new()
        }
        None => Vec::new(),
    };
    let classes = roofline::classify_all(&report, &resources, &ClassifyConfig::default());
    println!("{}", report.device_label());
    print!("{}", roofline::render_classification(&report, &classes));
    roofline::write_svg(&report, &args.out, &PlotConfig::for_report(&report))?;
    println!("wrote {}", args.out.display());
    Ok(())
}
