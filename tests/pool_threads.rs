//! The caching pool under threads: one thread captures and replays graphs while another
//! creates streams, works on them and drops them, on the same device. The pool orders blocks
//! reused after a dropped stream by that stream's last event and never by a device-wide
//! synchronize, which fails while a stream of the context is being captured (and breaks that
//! capture). GPU only ("skipped" without a device).

use ferrotune::{Buffer, Stream, ops};
use ferrotune_testkit::{Rng, cuda_backend};

/// `out = relu(1.5 x) + x`, in three launches through `t`.
fn chain(s: &Stream, x: &Buffer<f32>, t: &mut Buffer<f32>, out: &mut Buffer<f32>) -> ferrotune::Result<()> {
    ops::scale(s, 1.5, &x.all(), &mut t.all_mut())?;
    ops::relu(s, &t.all(), &mut out.all_mut())?;
    ops::add(s, &out.all(), &x.all(), &mut t.all_mut())?;
    ops::copy(s, &t.all(), &mut out.all_mut())
}

#[test]
fn gpu_pool_captures_beside_another_threads_stream_churn() {
    let Some(be) = cuda_backend("gpu_pool_captures_beside_another_threads_stream_churn") else { return };
    let be = &be;
    std::thread::scope(|scope| {
        let churn = scope.spawn(move || {
            for i in 0..300usize {
                // A new stream each round (its handle often the last one's), blocks of changing
                // sizes (the last stream's segments, re-owned), work, then all of it dropped.
                let s = be.new_stream().unwrap();
                let n = 1000 + 4093 * (i % 7);
                let x = Buffer::from_slice(&s, &vec![1.25f32; n]).unwrap();
                let mut y = Buffer::<f32>::zeros(&s, n).unwrap();
                ops::scale(&s, 2.0, &x.all(), &mut y.all_mut()).unwrap();
                let got = y.to_vec(&s).unwrap();
                assert!(got.iter().all(|&v| v == 2.5), "round {i}: {:?}", &got[..4]);
            }
        });
        let s = be.new_stream().unwrap();
        let n = 10_007;
        for round in 0..40u64 {
            let x = Buffer::from_slice(&s, &Rng::new(round).vec::<f32>(n, -2.0, 2.0)).unwrap();
            let (mut t, mut want) = (Buffer::<f32>::zeros(&s, n).unwrap(), Buffer::<f32>::zeros(&s, n).unwrap());
            chain(&s, &x, &mut t, &mut want).unwrap();
            let want = want.to_vec(&s).unwrap();
            let mut out = Buffer::from_slice(&s, &vec![f32::NAN; n]).unwrap();
            let g = s.capture(|c| chain(c, &x, &mut t, &mut out)).unwrap_or_else(|e| panic!("round {round}: {e}"));
            g.replay(&s).unwrap();
            let got = out.to_vec(&s).unwrap();
            assert!(
                got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                "round {round}: the replay differs from the eager chain"
            );
        }
        churn.join().unwrap();
    });
}
