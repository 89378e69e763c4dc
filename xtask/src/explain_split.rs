//! `profile explain --op gemm --shape MxNxKxB --devices all`: how a batched GEMM would be
//! split over the GPUs, from each GPU's measured speed on one batch entry of the shape.

use ferrotune::device_split::measure_speeds;
use ferrotune::{Backend, WorkSplit, bf16, f16};

pub fn run(
    spec: &str,
    dtype: ferrotune_autotune::GemmDtype,
    (batch, m, n, k): (usize, usize, usize, usize),
) -> anyhow::Result<()> {
    let devices = ferrotune::parse_device_list(spec, ferrotune::device_count()?)?;
    let backends = devices.iter().map(|&d| Backend::on_device(d)).collect::<Result<Vec<_>, _>>()?;
    let probe = (1, m, n, k);
    let speeds = match dtype.dtype() {
        ferrotune::DType::F32 => measure_speeds::<f32>(&backends, probe, 5)?,
        ferrotune::DType::F16 => measure_speeds::<f16>(&backends, probe, 5)?,
        ferrotune::DType::Bf16 => measure_speeds::<bf16>(&backends, probe, 5)?,
    };
    let plan = WorkSplit::new(batch, &speeds, 1)?;
    println!(
        "  device split of the batch ({batch} entries) over devices {devices:?}, by measured speed (one entry per run, median of 5):"
    );
    for (d, s) in devices.iter().zip(&speeds) {
        println!("    device {d}: {:.3} ms per entry", 1.0 / s);
    }
    print!("{plan}");
    Ok(())
}
