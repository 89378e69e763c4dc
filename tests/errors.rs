//! Bad input gives a typed error before anything is launched, never a panic.

use ferrotune::config::ElemConfig;
use ferrotune::ops::{self, Activation};
use ferrotune::{Backend, Buffer, DType, ElemOp, ElemVariant, Error, bf16};
use ferrotune_testkit::{cpu_backend, cuda_backend};

fn backends(test: &str) -> Vec<Backend> {
    let mut v = vec![cpu_backend()];
    v.extend(cuda_backend(test));
    v
}

#[test]
fn mismatched_lengths_are_shape_errors() {
    for b in backends("mismatched_lengths_are_shape_errors") {
        let s = b.stream();
        let a = Buffer::from_slice(&s, &[1.0f32; 5]).unwrap();
        let c = Buffer::from_slice(&s, &[1.0f32; 4]).unwrap();
        let mut o = Buffer::<f32>::zeros(&s, 5).unwrap();
        let e = ops::add(&s, &a.all(), &c.all(), &mut o.all_mut()).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { op: "add", expected: 5, got: 4, .. }), "{e}");
        let e = ops::add_mul_act(&s, Activation::GeluErf, &a.all(), &a.all(), &c.all(), &mut o.all_mut()).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        let mut short = Buffer::<f32>::zeros(&s, 3).unwrap();
        let e = ops::relu(&s, &a.all(), &mut short.all_mut()).unwrap_err();
        assert!(e.to_string().contains("relu: shape mismatch"), "{e}");
        let e = ops::axpy(&s, 1.0, &a.all(), &mut short.all_mut()).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { op: "axpy", .. }), "{e}");
        // The output was left alone.
        assert_eq!(o.to_vec(&s).unwrap(), [0.0; 5]);
    }
}

#[test]
fn bias_errors_name_the_problem() {
    for b in backends("bias_errors_name_the_problem") {
        let s = b.stream();
        let mut x = Buffer::from_slice(&s, &[bf16::ONE; 6]).unwrap();
        let bias3 = Buffer::from_slice(&s, &[bf16::ONE; 3]).unwrap();
        let empty = Buffer::<bf16>::zeros(&s, 0).unwrap();
        // Wrong bias length for cols = 2.
        let e = ops::bias_add_inplace(&s, &mut x.all_mut(), &bias3.all(), 3, 2).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { op: "bias_add_inplace", what: "bias", expected: 2, got: 3 }), "{e}");
        // rows * cols disagrees with x.
        let e = ops::bias_add_inplace(&s, &mut x.all_mut(), &bias3.all(), 4, 3).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { expected: 12, got: 6, .. }), "{e}");
        // Empty bias.
        let e = ops::bias_add_inplace(&s, &mut x.all_mut(), &empty.all(), 6, 0).unwrap_err();
        assert!(matches!(e, Error::EmptyInput { what: "bias", .. }), "{e}");
        // Through the config-taking entry: x not a whole number of rows.
        let bias4 = Buffer::from_slice(&s, &[bf16::ONE; 4]).unwrap();
        let cfg = ElemConfig::heuristic(ElemOp::BiasAdd, DType::Bf16, b.device());
        let e = ops::run_elementwise(&s, ElemOp::BiasAdd, &cfg, &[&bias4.all()], &mut x.all_mut(), 0.0).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        assert_eq!(x.to_vec(&s).unwrap(), [bf16::ONE; 6]);
    }
}

#[test]
fn empty_tensors_are_a_no_op_and_slices_out_of_range_are_errors() {
    for b in backends("empty_tensors_are_a_no_op") {
        let s = b.stream();
        let a = Buffer::<f32>::zeros(&s, 0).unwrap();
        let mut o = Buffer::<f32>::zeros(&s, 0).unwrap();
        ops::add(&s, &a.all(), &a.all(), &mut o.all_mut()).unwrap();
        assert_eq!(ops::sum(&s, &a.all()).unwrap(), 0.0);
        let e = a.view(0..1).err().expect("out of range");
        assert!(matches!(e, Error::BufferTooSmall { .. }), "{e}");
    }
}

#[test]
fn invalid_configs_and_arity_are_rejected() {
    let b = cpu_backend();
    let s = b.stream();
    let x = Buffer::from_slice(&s, &[1.0f32; 8]).unwrap();
    let mut o = Buffer::<f32>::zeros(&s, 8).unwrap();
    let ok = ElemConfig::heuristic(ElemOp::Relu, DType::F32, None);
    let bad = ElemConfig { variant: ElemVariant { vec16: true, unroll: 3 }, ..ok };
    let e = ops::run_elementwise(&s, ElemOp::Relu, &bad, &[&x.all()], &mut o.all_mut(), 0.0).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig { op: "relu", .. }), "{e}");
    let e = ops::run_elementwise(&s, ElemOp::Add, &ok, &[&x.all()], &mut o.all_mut(), 0.0).unwrap_err();
    assert!(e.to_string().contains("takes 2 inputs"), "{e}");
}

#[test]
fn buffers_from_another_backend_are_rejected() {
    let Some(gpu) = cuda_backend("buffers_from_another_backend_are_rejected") else { return };
    let cpu = cpu_backend();
    let (gs, cs) = (gpu.stream(), cpu.stream());
    let g = Buffer::from_slice(&gs, &[1.0f32; 4]).unwrap();
    let c = Buffer::from_slice(&cs, &[1.0f32; 4]).unwrap();
    let mut o = Buffer::<f32>::zeros(&gs, 4).unwrap();
    let e = ops::add(&gs, &g.all(), &c.all(), &mut o.all_mut()).unwrap_err();
    assert!(matches!(e, Error::BackendMismatch { expected: "cuda", got: "cpu", .. }), "{e}");
}

#[test]
fn backend_choice_parses_and_reports_unknown_names() {
    use ferrotune::BackendChoice;
    assert_eq!("CPU".parse::<BackendChoice>().unwrap(), BackendChoice::Cpu);
    assert_eq!("cuda".parse::<BackendChoice>().unwrap(), BackendChoice::Cuda);
    assert!("tpu".parse::<BackendChoice>().unwrap_err().contains("unknown backend 'tpu'"));
    // Without a device, asking for CUDA explicitly is an error, not a silent CPU fallback.
    if !ferrotune::driver_present() {
        let e = Backend::new(BackendChoice::Cuda).unwrap_err();
        assert!(matches!(e, Error::NoDevice(_)), "{e}");
        assert_eq!(Backend::new(BackendChoice::Auto).unwrap().name(), "cpu");
    }
}

/// Impossible sizes are `Error::OutOfMemory` with the sizes, at once: no allocation abort, no
/// swapping, no bare driver error (CPU always; the GPU when there is one).
#[test]
fn impossible_sizes_are_out_of_memory_errors() {
    for b in backends("impossible_sizes_are_out_of_memory_errors") {
        let s = b.stream();
        let t = std::time::Instant::now();
        for len in [usize::MAX / 8, usize::MAX / 2, 1 << 50] {
            let e = Buffer::<f32>::zeros(&s, len).map(|_| ()).unwrap_err();
            assert!(matches!(e, Error::OutOfMemory { .. }), "{} zeros({len}): {e}", b.name());
            assert!(e.to_string().starts_with("out of memory: a buffer"), "{e}");
            let e = Buffer::<bf16>::zeros(&s, len).map(|_| ()).unwrap_err();
            assert!(matches!(e, Error::OutOfMemory { requested, available, .. } if requested > available), "{e}");
        }
        assert!(t.elapsed().as_secs_f64() < 1.0, "took {:?}", t.elapsed());
        // What fits still works.
        assert_eq!(Buffer::<f32>::zeros(&s, 1000).unwrap().len(), 1000);
    }
}
