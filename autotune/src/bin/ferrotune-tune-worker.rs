//! A standalone tuner worker (the same as `cargo xtask tune-worker`): what the autotuner's own
//! tests start, so that they go through the real child-process machinery.

fn main() {
    let code = ferrotune_autotune::worker::serve(std::io::stdin().lock(), std::io::stdout().lock());
    std::process::exit(code);
}
