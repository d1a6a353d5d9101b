//! Converters refuse what they cannot take, with a typed error whose message names the tensor,
//! what was expected and what it got (docs/contract.md §2–3).

mod common;

use common::fixed_layer;
use w4a16_reference::ActDtype;
use w4a16_reference::formats::{
    AwqLayer, Checkpoint, CompressedTensorsLayer, ConversionNote, ConvertError, GptqLayer,
    GptqVersion, LayerError, LayoutError, LegacyLayer, LoadTarget, ResidentLayer, ResidentWeights,
    RowPadding, StoredDtype, Tensor, TensorData,
};
use w4a16_reference::layer::{LayerShape, QuantizedLayer};

fn target(layer: &QuantizedLayer) -> LoadTarget {
    LoadTarget {
        n: layer.shape.n,
        k: layer.shape.k,
        dtype: layer.dtype,
    }
}

fn refuse(ckpt: &dyn Checkpoint, t: &LoadTarget) -> (ConvertError, String) {
    let err = ckpt
        .to_resident(t, RowPadding::NONE)
        .expect_err("conversion must be refused");
    let msg = err.to_string();
    (err, msg)
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "message {msg:?} should mention {p:?}");
    }
}

/// The ABI trap: the legacy `[N, K/G]` f16 zero points handed to a packed-zp converter.
#[test]
fn unpacked_zero_points_refused_by_packed_converter() {
    let layer = fixed_layer(true);
    let mut ct = CompressedTensorsLayer::from_logical(&layer).unwrap();
    ct.weight_zero_point = LegacyLayer::from_logical(&layer).unwrap().weight_zero_point;
    let (err, msg) = refuse(&ct, &target(&layer));
    assert!(
        matches!(
            &err,
            ConvertError::Dtype { tensor, expected: StoredDtype::I32, got: StoredDtype::F16, shape, got_shape, .. }
                if tensor == "weight_zero_point" && shape == &[2, 2] && got_shape == &[16, 2]
        ),
        "{err:?}"
    );
    assert_mentions(
        &msg,
        &[
            "weight_zero_point",
            "i32",
            "[N/8, K/G] = [2, 2]",
            "got f16 [16, 2]",
        ],
    );
}

#[test]
fn wrong_shapes_and_dtypes_refused() {
    let layer = fixed_layer(true);
    let t = target(&layer);

    // GPTQ qweight stored transposed ([N, K/8] instead of [K/8, N]).
    let mut gptq = GptqLayer::from_logical(&layer, GptqVersion::V2).unwrap();
    gptq.qweight.shape = vec![16, 8];
    let (err, msg) = refuse(&gptq, &t);
    assert!(
        matches!(&err, ConvertError::Shape { expected, got, .. } if expected == &[8, 16] && got == &[16, 8])
    );
    assert_mentions(&msg, &["qweight", "[K/8, N] = [8, 16]", "got [16, 8]"]);

    // Scales in bf16 for an f16 model.
    let mut awq = AwqLayer::from_logical(&layer).unwrap();
    if let TensorData::F16(bits) = &awq.scales.data {
        awq.scales.data = TensorData::Bf16(bits.clone());
    }
    let (_, msg) = refuse(&awq, &t);
    assert_mentions(
        &msg,
        &[
            "scales",
            "expected dtype f16",
            "[K/G, N] = [2, 16]",
            "got bf16",
        ],
    );

    // Packed weights as f32.
    let mut ct = CompressedTensorsLayer::from_logical(&layer).unwrap();
    ct.weight_packed.data = TensorData::F32(vec![0.0; 16 * 8]);
    let (_, msg) = refuse(&ct, &t);
    assert_mentions(&msg, &["weight_packed", "i32", "got f32"]);

    // A shape that claims more than the data holds.
    let mut ct = CompressedTensorsLayer::from_logical(&layer).unwrap();
    if let TensorData::I32(w) = &mut ct.weight_packed.data {
        w.pop();
    }
    let (err, msg) = refuse(&ct, &t);
    assert!(matches!(
        err,
        ConvertError::DataLength {
            expected: 128,
            got: 127,
            ..
        }
    ));
    assert_mentions(&msg, &["weight_packed", "128", "127"]);

    // Bias of the wrong length.
    let mut legacy = LegacyLayer::from_logical(&layer).unwrap();
    legacy.bias = Some(Tensor::new("bias", vec![8], TensorData::F16(vec![0; 8])));
    let (_, msg) = refuse(&legacy, &t);
    assert_mentions(&msg, &["bias", "[N] = [16]", "got [8]"]);
}

#[test]
fn n_not_multiple_of_8_refused_where_packed_along_n() {
    let mut layer = fixed_layer(false);
    layer.shape = LayerShape::new(12, 64, 32);
    layer.q.truncate(12 * 64);
    layer.scales.truncate(12 * 2);
    layer.bias = None;
    let t = target(&layer);

    // compressed-tensors stores [ceil(N/8), K/G] = [2, 2] at N = 12: [N/8] = [1, 2] is refused
    // by shape, naming the ceil formula.
    let mut ct = CompressedTensorsLayer::from_logical(&layer).unwrap();
    ct.config.symmetric = false;
    ct.weight_zero_point = Some(Tensor::i32_packed(
        "weight_zero_point",
        vec![1, 2],
        vec![0x8888_8888; 2],
    ));
    let (err, msg) = refuse(&ct, &t);
    assert!(
        matches!(&err, ConvertError::Shape { tensor, expected, got, .. }
            if tensor == "weight_zero_point" && expected == &[2, 2] && got == &[1, 2]),
        "{err:?}"
    );
    assert_mentions(
        &msg,
        &[
            "weight_zero_point",
            "[ceil(N/8), K/G] = [2, 2]",
            "got [1, 2]",
        ],
    );
    // The right shape, but codes in the unused nibbles of the partial last word (rows 12..15):
    // another packing, refused rather than dropped.
    ct.weight_zero_point = Some(Tensor::i32_packed(
        "weight_zero_point",
        vec![2, 2],
        vec![0x8888_8888, 0x8888_8888, 0x0000_8888, 0x0008_8888],
    ));
    let (err, msg) = refuse(&ct, &t);
    assert_eq!(
        err,
        ConvertError::UnusedZeroPointNibbles {
            tensor: "weight_zero_point".into(),
            n: 12,
            used: 4,
            row: 1,
            g: 1,
            word: 0x0008_8888,
        }
    );
    assert_mentions(
        &msg,
        &["weight_zero_point", "N = 12", "nibbles 4..=7 must be 0"],
    );
    // The library's own reading slices those rows off, as `unpack_from_int32` does.
    assert!(ct.decode_own_semantics().is_ok());

    // AWQ packs the weights themselves along N.
    let mut awq = AwqLayer::from_logical(&fixed_layer(false)).unwrap();
    awq.qweight.shape = vec![64, 1];
    let (err, _) = refuse(&awq, &t);
    assert!(
        matches!(&err, ConvertError::PackedDim { tensor, dim: "N", got: 12 } if tensor == "qweight")
    );
    // GPTQ's qzeros [K/G, N/8] are whole words along N.
    let mut asym = layer.clone();
    asym.zeros = Some(vec![3; 12 * 2]);
    let mut gptq = GptqLayer::from_logical(&layer, GptqVersion::V2).unwrap();
    gptq.config.sym = false;
    gptq.qzeros = Some(Tensor::i32_packed("qzeros", vec![2, 2], vec![0; 4]));
    let (err, _) = refuse(&gptq, &t);
    assert!(
        matches!(&err, ConvertError::PackedDim { tensor, dim: "N", got: 12 } if tensor == "qzeros"),
        "{err:?}"
    );

    // The producers that pack whole words along N refuse to write such a layer at all.
    for v in [GptqVersion::V1, GptqVersion::V2] {
        assert_eq!(
            GptqLayer::from_logical(&asym, v).unwrap_err(),
            LayerError::NNotMultipleOf8 {
                packed: "zero points",
                n: 12
            }
        );
    }
    assert!(matches!(
        AwqLayer::from_logical(&layer),
        Err(LayerError::NNotMultipleOf8 { n: 12, .. })
    ));
    // compressed-tensors writes the partial last word, unused nibbles 0, and reads it back.
    let ct = CompressedTensorsLayer::from_logical(&asym).unwrap();
    let zp = ct.weight_zero_point.as_ref().unwrap();
    assert_eq!(zp.shape, vec![2, 2]);
    assert_eq!(
        zp.data,
        TensorData::I32(vec![0x3333_3333, 0x3333_3333, 0x3333, 0x3333])
    );
    assert_eq!(ct.decode_own_semantics().unwrap(), asym);
    let resident = ct.to_resident(&t, RowPadding::NONE).unwrap().layer;
    assert_eq!(resident.to_logical().unwrap(), asym);
    // Legacy zero points are not packed: N = 12 is fine there.
    let legacy = LegacyLayer::from_logical(&asym).unwrap();
    assert!(legacy.to_resident(&t, RowPadding::NONE).is_ok());
}

/// The resident packed zero points of a ragged N: ceil(N/8) rows, the unused nibbles 0; a
/// nonzero there or a wrong word count is a typed layout error.
#[test]
fn resident_zero_points_of_a_ragged_n() {
    let mut layer = fixed_layer(true);
    layer.shape = LayerShape::new(12, 64, 32);
    layer.q.truncate(12 * 64);
    layer.scales.truncate(12 * 2);
    layer.zeros.as_mut().unwrap().truncate(12 * 2);
    layer.bias = None;
    let mut r = ResidentLayer::from_logical(&layer, RowPadding::NONE).unwrap();
    let Some(w4a16_reference::formats::ZeroPoints::Packed(z)) = r.zeros.as_mut() else {
        panic!("packed zero points");
    };
    assert_eq!((z.rows(), z.words.len()), (2, 4));
    assert!(z.words[2..].iter().all(|w| w >> 16 == 0));
    z.words[3] |= 0x1 << 20;
    let word = z.words[3];
    assert_eq!(
        r.validate().unwrap_err(),
        LayoutError::UnusedZeroPointNibbles {
            n: 12,
            used: 4,
            row: 1,
            g: 1,
            word
        }
    );
    let Some(w4a16_reference::formats::ZeroPoints::Packed(z)) = r.zeros.as_mut() else {
        panic!("packed zero points");
    };
    z.words.truncate(2);
    let msg = r.validate().unwrap_err().to_string();
    assert_mentions(
        &msg,
        &["4 words for [ceil(N/8), K/G] = [2, 2]", "got 2 words"],
    );
}

#[test]
fn group_not_dividing_k_and_act_order_refused() {
    let layer = fixed_layer(true);
    let t = target(&layer);
    let mut ct = CompressedTensorsLayer::from_logical(&layer).unwrap();
    for bad in [24, 0, 128] {
        ct.config.group_size = bad;
        let (err, msg) = refuse(&ct, &t);
        assert_eq!(err, ConvertError::Group { k: 64, got: bad });
        assert_mentions(
            &msg,
            &["group_size", "divisor of K = 64", &format!("got {bad}")],
        );
    }
    let mut gptq = GptqLayer::from_logical(&layer, GptqVersion::V1).unwrap();
    gptq.config.desc_act = true;
    let (err, msg) = refuse(&gptq, &t);
    assert_eq!(err, ConvertError::ActOrder);
    assert_mentions(&msg, &["desc_act", "expected false", "got true"]);
    // K not a multiple of 8 cannot be packed along K.
    let (err, _) = refuse(
        &CompressedTensorsLayer::from_logical(&layer).unwrap(),
        &LoadTarget { k: 60, ..t },
    );
    assert!(matches!(
        err,
        ConvertError::Group { .. } | ConvertError::PackedDim { .. }
    ));
    let mut ct = CompressedTensorsLayer::from_logical(&layer).unwrap();
    ct.config.group_size = 4;
    let (err, _) = refuse(&ct, &LoadTarget { k: 60, ..t });
    assert!(
        matches!(
            err,
            ConvertError::PackedDim {
                dim: "K",
                got: 60,
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn asymmetric_checkpoint_without_zero_points_refused() {
    let layer = fixed_layer(true);
    let mut ct = CompressedTensorsLayer::from_logical(&layer).unwrap();
    ct.weight_zero_point = None;
    let (err, msg) = refuse(&ct, &target(&layer));
    assert_eq!(
        err,
        ConvertError::MissingZeroPoints {
            tensor: "weight_zero_point"
        }
    );
    assert_mentions(&msg, &["weight_zero_point", "asymmetric", "got none"]);
    let mut gptq = GptqLayer::from_logical(&layer, GptqVersion::V1).unwrap();
    gptq.qzeros = None;
    assert!(matches!(
        refuse(&gptq, &target(&layer)).0,
        ConvertError::MissingZeroPoints { tensor: "qzeros" }
    ));
}

/// A symmetric checkpoint carrying zero points: accepted with a note when every z is 8 (the
/// result equals the symmetric conversion), refused naming the first other z.
#[test]
fn symmetric_checkpoint_with_zero_points() {
    let sym = fixed_layer(false);
    let t = target(&sym);
    let mut all8 = sym.clone();
    all8.zeros = Some(vec![8; 16 * 2]);
    let mut one7 = all8.clone();
    one7.zeros.as_mut().unwrap()[9 * 2 + 1] = 7;
    let want = ResidentLayer::from_logical(&sym, RowPadding::NONE).unwrap();

    let as_sym = |layer: &QuantizedLayer| -> Vec<(Box<dyn Checkpoint>, &'static str)> {
        let mut ct = CompressedTensorsLayer::from_logical(layer).unwrap();
        ct.config.symmetric = true;
        let mut g1 = GptqLayer::from_logical(layer, GptqVersion::V1).unwrap();
        g1.config.sym = true;
        let mut g2 = GptqLayer::from_logical(layer, GptqVersion::V2).unwrap();
        g2.config.sym = true;
        let mut awq = AwqLayer::from_logical(layer).unwrap();
        awq.config.zero_point = false;
        let mut legacy = LegacyLayer::from_logical(layer).unwrap();
        legacy.config.symmetric = true;
        vec![
            (Box::new(ct), "weight_zero_point"),
            (Box::new(g1), "qzeros"),
            (Box::new(g2), "qzeros"),
            (Box::new(awq), "qzeros"),
            (Box::new(legacy), "weight_zero_point"),
        ]
    };
    for (ckpt, name) in as_sym(&all8) {
        let got = ckpt.to_resident(&t, RowPadding::NONE).unwrap();
        assert_eq!(got.layer, want, "{}", ckpt.format_name());
        assert_eq!(
            got.notes,
            vec![ConversionNote::IgnoredSymmetricZeroPoints {
                tensor: name.to_string()
            }]
        );
        assert!(got.notes[0].to_string().contains("ignored"));
    }
    for (ckpt, name) in as_sym(&one7) {
        let (err, msg) = refuse(ckpt.as_ref(), &t);
        assert_eq!(
            err,
            ConvertError::SymmetricZeroPoint {
                tensor: name.to_string(),
                n: 9,
                g: 1,
                got: 7
            },
            "{}",
            ckpt.format_name()
        );
        assert_mentions(&msg, &[name, "every z = 8", "got z = 7 at (n = 9, g = 1)"]);
    }
}

#[test]
fn legacy_zero_points_must_be_small_integers() {
    let layer = fixed_layer(true);
    let mut legacy = LegacyLayer::from_logical(&layer).unwrap();
    if let TensorData::F16(bits) = &mut legacy.weight_zero_point.as_mut().unwrap().data {
        bits[5] = ActDtype::F16.from_f32(2.5);
    }
    let (err, msg) = refuse(&legacy, &target(&layer));
    assert_eq!(
        err,
        ConvertError::ZeroPointValue {
            tensor: "weight_zero_point".into(),
            n: 2,
            g: 1,
            got: 2.5
        }
    );
    assert_mentions(&msg, &["weight_zero_point", "0..=15", "got 2.5"]);
}

/// A strided view with too few bytes behind it is refused, never read (docs/contract.md §5).
#[test]
fn undersized_strided_views_refused() {
    // [N = 4, K = 64]: rows of 32 B at a stride of 160 B need 3·160 + 32 = 512 B.
    let ok = ResidentWeights::view(4, 64, 160, vec![0; 512]).unwrap();
    assert_eq!(ok.required_bytes(), 512);
    let err = ResidentWeights::view(4, 64, 160, vec![0; 511]).unwrap_err();
    assert_eq!(
        err,
        LayoutError::WeightBytes {
            n: 4,
            row: 32,
            stride: 160,
            needed: 512,
            got: 511
        }
    );
    assert!(
        err.to_string().contains("needs 512 bytes, got 511"),
        "{err}"
    );
    assert_eq!(
        ResidentWeights::view(4, 64, 16, vec![0; 1024]).unwrap_err(),
        LayoutError::WeightRowStride { min: 32, got: 16 }
    );
    assert_eq!(
        ResidentWeights::view(4, 64, 34, vec![0; 1024]).unwrap_err(),
        LayoutError::WeightStrideAlignment { got: 34 }
    );

    // A whole layer whose buffers were cut short: validation and read-back refuse it.
    let layer = fixed_layer(true);
    let resident = ResidentLayer::from_logical(
        &layer,
        RowPadding {
            weight_extra_bytes: 96,
            scale_extra_elems: 2,
        },
    )
    .unwrap();
    resident.validate().unwrap();
    let mut short = resident.clone();
    short
        .weights
        .bytes
        .truncate(short.weights.required_bytes() - 1);
    assert!(matches!(
        short.to_logical(),
        Err(LayoutError::WeightBytes { .. })
    ));
    let mut short = resident.clone();
    short.scales.bits.truncate(15 * 4 + 1);
    assert!(matches!(
        short.validate(),
        Err(LayoutError::ScaleElems {
            needed: 62,
            got: 61,
            ..
        })
    ));
    let mut bad_zeros = resident;
    if let Some(w4a16_reference::formats::ZeroPoints::Packed(z)) = &mut bad_zeros.zeros {
        z.words.pop();
    }
    let err = bad_zeros.validate().unwrap_err();
    assert!(err.to_string().contains("zero points"), "{err}");
}
