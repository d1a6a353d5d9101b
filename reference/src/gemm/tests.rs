use super::weight_pass::{WeightLanes, weight_pass};
use crate::dtype::ActDtype;
use crate::layer::{LayerShape, QuantizedLayer};
use ndarray::Array2;

/// The fused loop and the GEMM tiles compute the same lanes (one path each side of
/// `GEMM_LANES`), including the right-hand side and the offset magnitude.
#[test]
fn weight_pass_paths_agree_with_a_plain_sum() {
    let (n, k, g) = (37, 1100, 100);
    let layer = QuantizedLayer {
        shape: LayerShape::new(n, k, g),
        dtype: ActDtype::F16,
        q: (0..n * k).map(|i| ((i * 7 + i / 5) % 16) as u8).collect(),
        zeros: Some((0..n * k / g).map(|i| (i % 16) as u8).collect()),
        scales: (0..n * k / g)
            .map(|i| ActDtype::F16.from_f64(0.01 + 0.001 * (i % 9) as f64))
            .collect(),
        bias: None,
    };
    let lane = |j: usize, kk: usize| ((j * 31 + kk * 17) % 23) as f64 / 7.0 - 1.5;
    let right = Array2::from_shape_fn((n, 3), |(i, t)| if (i + t) % 3 == 0 { 1.0 } else { -1.0 });
    for lanes_each in [2, 5] {
        let signed = Array2::from_shape_fn((lanes_each, k), |(j, kk)| lane(j, kk));
        let abs = signed.mapv(f64::abs);
        let lanes = WeightLanes {
            signed: signed.view(),
            abs: abs.view(),
            right: Some(right.view()),
        };
        let out = weight_pass(&layer, Some(128.0), &lanes);
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-11 * (1.0 + b.abs());
        for j in 0..lanes_each {
            for nn in 0..n {
                let (mut ys, mut ya, mut yo) = (0.0, 0.0, 0.0);
                for kk in 0..k {
                    let w = layer.weight(nn, kk);
                    let off = layer.scale(nn, kk / g).abs()
                        * (256.0
                            + f64::from(layer.code(nn, kk))
                            + f64::from(layer.zero(nn, kk / g)));
                    ys += signed[[j, kk]] * w;
                    ya += abs[[j, kk]] * w.abs();
                    yo += abs[[j, kk]] * off;
                }
                assert!(close(out.signed[[j, nn]], ys) && close(out.abs[[j, nn]], ya));
                assert!(close(out.offset.as_ref().unwrap()[[j, nn]], yo));
            }
        }
        let r = out.right.unwrap();
        for kk in (0..k).step_by(97) {
            let want: Vec<f64> = (0..3)
                .map(|t| (0..n).map(|nn| right[[nn, t]] * layer.weight(nn, kk)).sum())
                .collect();
            let abs_sum: f64 = (0..n).map(|nn| layer.weight(nn, kk).abs()).sum();
            assert!((0..3).all(|t| close(r[[t, kk]], want[t])) && close(r[[3, kk]], abs_sum));
        }
    }
}
