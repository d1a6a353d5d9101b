//! The checkpoint differential: every producer's own reading of its checkpoint
//! recovers the layer it was built from, and agrees with converter → resident → logical; a wrong
//! reading is shown to disagree, so the comparison can fail.

mod common;

use common::{CASES, fixed_layer, logical_layer};
use proptest::prelude::*;
use w4a16_reference::ActDtype;
use w4a16_reference::formats::{
    AWQ_ORDER, AwqLayer, Checkpoint, CompressedTensorsLayer, ConvertError, GptqLayer, GptqVersion,
    LayerError, LegacyLayer, LoadTarget, NibbleOrder, Producer, RowPadding, StoredDtype, Tensor,
    TensorData,
};
use w4a16_reference::layer::{LayerShape, QuantizedLayer, Symmetry};

fn target(layer: &QuantizedLayer) -> LoadTarget {
    LoadTarget {
        n: layer.shape.n,
        k: layer.shape.k,
        dtype: layer.dtype,
    }
}

/// A layer (N a multiple of 8 half the time, any N otherwise) with spare zero points, so that
/// each case can be tried both symmetric and asymmetric.
fn layer_and_zeros() -> impl Strategy<Value = (QuantizedLayer, Vec<u8>)> {
    prop_oneof![logical_layer(false), logical_layer(true)].prop_flat_map(|l| {
        let len = l.shape.n * l.shape.groups();
        (Just(l), prop::collection::vec(0u8..16, len))
    })
}

fn with_symmetry(layer: &QuantizedLayer, sym: Symmetry, zeros: &[u8]) -> QuantizedLayer {
    QuantizedLayer {
        zeros: (sym == Symmetry::Asym).then(|| zeros.to_vec()),
        ..layer.clone()
    }
}

/// AWQ read as if its nibbles were sequential: the bug the differential exists to catch.
fn awq_read_sequentially(c: &AwqLayer, layer: &QuantizedLayer) -> QuantizedLayer {
    let LayerShape { n, k, .. } = layer.shape;
    let groups = layer.shape.groups();
    let seq = |t: &Tensor| match &t.data {
        TensorData::I32(v) => {
            NibbleOrder::Sequential.unpack_run(&v.iter().map(|&w| w as u32).collect::<Vec<_>>())
        }
        other => panic!("{}: expected i32, got {:?}", t.name, other.dtype()),
    };
    // Unpacked [K, N] and [K/G, N]; transpose to [N, K] and [N, K/G].
    let qt = seq(&c.qweight);
    let q = (0..n * k).map(|i| qt[(i % k) * n + i / k]).collect();
    let zeros = c.qzeros.as_ref().map(|t| {
        let zt = seq(t);
        (0..n * groups)
            .map(|i| zt[(i % groups) * n + i / groups])
            .collect()
    });
    QuantizedLayer {
        q,
        zeros,
        ..layer.clone()
    }
}

/// Whether every block of 8 columns reads the same in AWQ order and in sequential order.
fn blind_to_awq_order(layer: &QuantizedLayer) -> bool {
    let LayerShape { n, k, .. } = layer.shape;
    let groups = layer.shape.groups();
    (0..n).all(|col| {
        let moved = col - col % 8 + AWQ_ORDER[col % 8];
        (0..k).all(|kk| layer.code(col, kk) == layer.code(moved, kk))
            && (0..groups).all(|g| layer.zero(col, g) == layer.zero(moved, g))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Producer × symmetry: the producer's own reading gives back the layer, the converter's
    /// resident layout reads back to the same layer, and exactly the shapes a producer cannot
    /// pack are refused at build time.
    #[test]
    fn own_semantics_and_converter_agree((base, spare) in layer_and_zeros(), extra in 0usize..3) {
        let pad = RowPadding { weight_extra_bytes: 4 * extra, scale_extra_elems: extra };
        for sym in [Symmetry::Sym, Symmetry::Asym] {
            let layer = with_symmetry(&base, sym, &spare);
            for p in Producer::ALL {
                let n = layer.shape.n;
                // AWQ packs its weights along N; GPTQ packs zero points in whole words along N.
                // compressed-tensors stores a partial last zero-point word, legacy none at all.
                let packs_along_n = p == Producer::Awq
                    || (sym == Symmetry::Asym
                        && matches!(p, Producer::GptqV1 | Producer::GptqV2));
                let ckpt = match p.build(&layer) {
                    Ok(c) => c,
                    Err(e) => {
                        prop_assert!(packs_along_n && !n.is_multiple_of(8), "{p} {sym:?} N={n}: {e}");
                        prop_assert!(matches!(e, LayerError::NNotMultipleOf8 { .. }), "{e}");
                        continue;
                    }
                };
                prop_assert!(!packs_along_n || n.is_multiple_of(8), "{p} built N = {n}");
                prop_assert_eq!(ckpt.format_name(), p.name());
                let own = ckpt.decode_own_semantics().map_err(|e| {
                    TestCaseError::fail(format!("{p} {sym:?}: {e}"))
                })?;
                prop_assert_eq!(&own, &layer, "{} {:?}: own semantics", p, sym);
                let resident = ckpt.to_resident(&target(&layer), pad).map_err(|e| {
                    TestCaseError::fail(format!("{p} {sym:?}: {e}"))
                })?;
                prop_assert_eq!(
                    &resident.layer.to_logical().unwrap(), &own, "{} {:?}: converter", p, sym
                );
            }
        }
    }

    /// A wrong own reading (AWQ taken as sequential) disagrees with the converter path
    /// exactly when the data can tell the two orders apart.
    #[test]
    fn awq_read_sequentially_disagrees((base, spare) in layer_and_zeros(), asym: bool) {
        let n8 = base.shape.n - base.shape.n % 8;
        prop_assume!(n8 > 0);
        let base = QuantizedLayer {
            shape: LayerShape::new(n8, base.shape.k, base.shape.group),
            q: base.q[..n8 * base.shape.k].to_vec(),
            scales: base.scales[..n8 * base.shape.groups()].to_vec(),
            bias: base.bias.map(|b| b[..n8].to_vec()),
            ..base
        };
        let sym = if asym { Symmetry::Asym } else { Symmetry::Sym };
        let layer = with_symmetry(&base, sym, &spare[..n8 * base.shape.groups()]);
        let ckpt = AwqLayer::from_logical(&layer).unwrap();
        let converted = ckpt.to_resident(&target(&layer), RowPadding::NONE).unwrap();
        let wrong = awq_read_sequentially(&ckpt, &layer);
        prop_assert_eq!(
            wrong == converted.layer.to_logical().unwrap(),
            blind_to_awq_order(&layer)
        );
    }
}

/// Data constant across each block of 8 columns cannot tell AWQ order from sequential: the
/// wrong reading then agrees, which is why the differential needs varied data.
#[test]
fn awq_order_is_invisible_to_column_block_constant_data() {
    let mut layer = fixed_layer(true);
    let LayerShape { n, k, .. } = layer.shape;
    let groups = layer.shape.groups();
    layer.q = (0..n * k)
        .map(|i| ((i % k + i / k / 8) % 16) as u8)
        .collect();
    layer.zeros = Some(
        (0..n * groups)
            .map(|i| ((i / groups / 8) % 16) as u8)
            .collect(),
    );
    assert!(blind_to_awq_order(&layer));
    let ckpt = AwqLayer::from_logical(&layer).unwrap();
    assert_eq!(awq_read_sequentially(&ckpt, &layer), layer);
    // Column 1 differing from column 2 (its AWQ slot) makes the order visible.
    layer.q[k] ^= 1;
    assert!(!blind_to_awq_order(&layer));
    let ckpt = AwqLayer::from_logical(&layer).unwrap();
    assert_ne!(awq_read_sequentially(&ckpt, &layer), layer);
}

/// A v1 checkpoint labelled v2 reads every zero point one low (mod 16); a symmetric one reads
/// as asymmetric with z = 7.
#[test]
fn gptq_v1_read_as_v2_is_off_by_one() {
    for asym in [false, true] {
        let layer = fixed_layer(asym);
        let mut ckpt = GptqLayer::from_logical(&layer, GptqVersion::V1).unwrap();
        ckpt.config.version = GptqVersion::V2;
        let own = ckpt.decode_own_semantics().unwrap();
        let want: Vec<u8> = match &layer.zeros {
            Some(z) => z.iter().map(|&z| z.wrapping_sub(1) & 15).collect(),
            None => vec![7; layer.shape.n * layer.shape.groups()],
        };
        assert_eq!(own.zeros, Some(want), "asym = {asym}");
        assert_eq!(own.q, layer.q);
    }
}

#[test]
fn producer_names_parse_and_serialize() {
    for p in Producer::ALL {
        assert_eq!(Producer::parse(p.name()), Some(p));
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            format!("\"{}\"", p.name())
        );
        assert_eq!(
            serde_json::from_str::<Producer>(&format!("\"{p}\"")).unwrap(),
            p
        );
    }
    assert_eq!(Producer::parse("gptq"), None);
    assert_eq!(Producer::parse("AWQ"), None);
}

/// The own reading takes its shapes from the tensors, so it has its own refusals.
#[test]
fn own_semantics_refusals_name_the_tensor() {
    let layer = fixed_layer(true);
    let mut ct = CompressedTensorsLayer::from_logical(&layer).unwrap();
    ct.weight_packed.shape = vec![layer.shape.n * layer.shape.k / 8];
    let e = ct.decode_own_semantics().unwrap_err();
    assert!(
        matches!(&e, ConvertError::Rank { tensor, rank: 2, .. } if tensor == "weight_packed"),
        "{e}"
    );

    let mut awq = AwqLayer::from_logical(&layer).unwrap();
    awq.scales.data = TensorData::F32(vec![1.0; layer.shape.n * layer.shape.groups()]);
    let e = awq.decode_own_semantics().unwrap_err();
    assert_eq!(
        e,
        ConvertError::NotActDtype {
            tensor: "scales".into(),
            got: StoredDtype::F32
        }
    );

    let mut gptq = GptqLayer::from_logical(&layer, GptqVersion::V2).unwrap();
    gptq.qzeros = None;
    assert_eq!(
        gptq.decode_own_semantics().unwrap_err(),
        ConvertError::MissingZeroPoints { tensor: "qzeros" }
    );

    let mut legacy = LegacyLayer::from_logical(&layer).unwrap();
    if let Some(t) = &mut legacy.weight_zero_point
        && let TensorData::F16(bits) = &mut t.data
    {
        bits[3] = ActDtype::F16.from_f32(2.5);
    }
    let e = legacy.decode_own_semantics().unwrap_err();
    assert_eq!(
        e,
        ConvertError::ZeroPointValue {
            tensor: "weight_zero_point".into(),
            n: 1,
            g: 1,
            got: 2.5
        }
    );
}

/// A symmetric checkpoint carrying a z other than 8: the converter refuses it, the own reading
/// applies it as AutoGPTQ would, so the two readings visibly part.
#[test]
fn symmetric_with_stray_zero_point_parts_the_readings() {
    let layer = fixed_layer(false);
    let mut ckpt = GptqLayer::from_logical(&layer, GptqVersion::V2).unwrap();
    if let Some(t) = &mut ckpt.qzeros
        && let TensorData::I32(w) = &mut t.data
    {
        w[0] = (w[0] & !0xF) | 5;
    }
    let e = ckpt
        .to_resident(&target(&layer), RowPadding::NONE)
        .unwrap_err();
    assert!(
        matches!(
            e,
            ConvertError::SymmetricZeroPoint {
                got: 5,
                n: 0,
                g: 0,
                ..
            }
        ),
        "{e}"
    );
    let own = ckpt.decode_own_semantics().unwrap();
    let zeros = own.zeros.expect("the stray zero point is applied");
    assert_eq!(zeros[0], 5);
    assert!(zeros[1..].iter().all(|&z| z == 8));
}
