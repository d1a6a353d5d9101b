//! The f64 reference against a naive triple loop; rows/columns helpers; typed input errors.
mod oracle;

use oracle::{Data, case, naive, recipe};
use w4a16_reference::gemm::{InputError, LineAxis, reference, reference_cols, reference_rows};
use w4a16_reference::{ActDtype, BiasStage, NumericRecipe};

fn close(got: f64, want: f64, scale: f64) -> bool {
    (got - want).abs() <= 1e-12 * scale.max(1e-30)
}

#[test]
fn reference_matches_naive_loop_sym_asym_bias_strides() {
    for dtype in ActDtype::ALL {
        for (asym, bias) in [(false, false), (false, true), (true, false), (true, true)] {
            for (m, n, k, g) in [(3, 24, 64, 32), (5, 17, 128, 128), (1, 8, 96, 32)] {
                let c = case(
                    m,
                    n,
                    k,
                    g,
                    dtype,
                    asym,
                    bias,
                    Data::Realistic,
                    (m * 1000 + n) as u64,
                );
                let x = c.x.with_row_stride(k + 5);
                let r = reference(&x, &c.layer, &NumericRecipe::fp32_exact_weights(dtype)).unwrap();
                let (y, a) = naive(&x, &c.layer);
                assert_eq!((r.m, r.n, r.k), (m, n, k));
                assert!(r.a_offset.is_none());
                for i in 0..m * n {
                    assert!(
                        close(r.y[i], y[i], a[i] + 1.0),
                        "{dtype} asym={asym} bias={bias} y[{i}]: {} vs {}",
                        r.y[i],
                        y[i]
                    );
                    assert!(close(r.a[i], a[i], a[i]), "a[{i}]: {} vs {}", r.a[i], a[i]);
                    assert!(a[i] >= (y[i] - c.layer.bias_value(i % n)).abs());
                }
            }
        }
    }
}

#[test]
fn exact_class_reference_is_exact() {
    for dtype in ActDtype::ALL {
        let c = case(6, 40, 256, 64, dtype, true, true, Data::Exact, 7);
        let r = reference(&c.x, &c.layer, &NumericRecipe::fp32_exact_weights(dtype)).unwrap();
        let (y, a) = naive(&c.x, &c.layer);
        assert_eq!(r.y, y);
        assert_eq!(r.a, a);
    }
}

#[test]
fn offset_magnitude_matches_naive_definition() {
    let dtype = ActDtype::Bf16;
    let c = case(4, 16, 128, 32, dtype, true, false, Data::Realistic, 11);
    let rec = recipe(dtype, false, BiasStage::BeforeCast, Some(128.0));
    let r = reference(&c.x, &c.layer, &rec).unwrap();
    let off = r.a_offset.as_ref().unwrap();
    for m in 0..4 {
        for n in 0..16 {
            let want: f64 = (0..128)
                .map(|k| {
                    let g = k / 32;
                    c.x.get(m, k).abs()
                        * c.layer.scale(n, g).abs()
                        * (256.0 + f64::from(c.layer.code(n, k)) + f64::from(c.layer.zero(n, g)))
                })
                .sum();
            assert!(close(off[m * 16 + n], want, want));
            assert!(off[m * 16 + n] > r.a_at(m, n));
        }
    }
}

#[test]
fn rows_and_cols_equal_the_full_reference() {
    let dtype = ActDtype::F16;
    let c = case(40, 72, 192, 64, dtype, true, true, Data::Realistic, 3);
    for rec in [
        NumericRecipe::fp32_exact_weights(dtype),
        recipe(dtype, false, BiasStage::AfterCast, Some(128.0)),
    ] {
        let full = reference(&c.x, &c.layer, &rec).unwrap();
        let rows = [0, 17, 39];
        let lr = reference_rows(&c.x, &c.layer, &rec, &rows).unwrap();
        assert_eq!(lr.axis, LineAxis::Rows);
        let cols = [0, 31, 32, 71];
        let lc = reference_cols(&c.x, &c.layer, &rec, &cols).unwrap();
        for (lines, count) in [(&lr, rows.len()), (&lc, cols.len())] {
            for i in 0..count {
                for j in 0..lines.len {
                    let (m, n) = lines.coords(i, j);
                    let e = i * lines.len + j;
                    assert!(
                        close(lines.y[e], full.y_at(m, n), full.a_at(m, n) + 1.0),
                        "({m},{n})"
                    );
                    assert!(close(lines.a[e], full.a_at(m, n), full.a_at(m, n)));
                    if let (Some(lo), Some(fo)) = (&lines.a_offset, &full.a_offset) {
                        assert!(close(lo[e], fo[m * 72 + n], fo[m * 72 + n]));
                    }
                }
            }
        }
    }
}

#[test]
fn bad_inputs_are_refused_with_typed_errors() {
    let dtype = ActDtype::F16;
    let rec = NumericRecipe::fp32_exact_weights(dtype);
    let c = case(2, 8, 64, 32, dtype, true, true, Data::Realistic, 5);

    let mut x = c.x.clone();
    x.k = 32;
    assert!(matches!(
        reference(&x, &c.layer, &rec),
        Err(InputError::Mismatch {
            what: "X columns (K)",
            ..
        })
    ));

    let mut layer = c.layer.clone();
    layer.q[77] = 16;
    assert_eq!(
        reference(&c.x, &layer, &rec),
        Err(InputError::CodeOutOfRange {
            what: "layer q",
            index: 77,
            value: 16
        })
    );

    let mut layer = c.layer.clone();
    layer.zeros.as_mut().unwrap()[3] = 200;
    assert!(matches!(
        reference(&c.x, &layer, &rec),
        Err(InputError::CodeOutOfRange {
            what: "layer zeros",
            index: 3,
            ..
        })
    ));

    let bf = NumericRecipe::fp32_exact_weights(ActDtype::Bf16);
    assert!(matches!(
        reference(&c.x, &c.layer, &bf),
        Err(InputError::Mismatch {
            what: "recipe output dtype",
            ..
        })
    ));

    let mut x = c.x.clone();
    x.data[70] = dtype.poison_bits();
    assert_eq!(
        reference(&x, &c.layer, &rec),
        Err(InputError::NonFinite {
            what: "X",
            index: 70
        })
    );

    let mut x = c.x.clone();
    x.data.truncate(100);
    assert!(matches!(
        reference(&x, &c.layer, &rec),
        Err(InputError::Mismatch {
            what: "X data length",
            ..
        })
    ));

    assert_eq!(
        reference_rows(&c.x, &c.layer, &rec, &[0, 2]),
        Err(InputError::IndexOutOfRange {
            what: "row index",
            index: 2,
            extent: 2
        })
    );
    assert_eq!(
        reference_cols(&c.x, &c.layer, &rec, &[8]),
        Err(InputError::IndexOutOfRange {
            what: "column index",
            index: 8,
            extent: 8
        })
    );
    let msg = reference_cols(&c.x, &c.layer, &rec, &[8])
        .unwrap_err()
        .to_string();
    assert!(msg.contains("column index") && msg.contains("< 8"), "{msg}");
}
