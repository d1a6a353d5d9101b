//! Every producer → resident conversion keeps every dequantized value (docs/contract.md §3), with and
//! without row padding.

mod common;

use common::{CASES, assert_same_dequantized, logical_layer};
use proptest::prelude::*;
use w4a16_reference::formats::{
    AwqLayer, Checkpoint, CompressedTensorsLayer, ConversionNote, GptqLayer, GptqVersion,
    LegacyLayer, LoadTarget, ResidentLayer, RowPadding, ZeroPoints,
};
use w4a16_reference::layer::QuantizedLayer;

fn target(layer: &QuantizedLayer) -> LoadTarget {
    LoadTarget {
        n: layer.shape.n,
        k: layer.shape.k,
        dtype: layer.dtype,
    }
}

fn padding() -> impl Strategy<Value = RowPadding> {
    (prop::sample::select(vec![0usize, 4, 128]), 0usize..3).prop_map(
        |(weight_extra_bytes, scale_extra_elems)| RowPadding {
            weight_extra_bytes,
            scale_extra_elems,
        },
    )
}

/// Converts, reads the resident layout back, and checks it against the logical layer.
fn check(ckpt: &dyn Checkpoint, layer: &QuantizedLayer, pad: RowPadding) -> Vec<ConversionNote> {
    let converted = ckpt
        .to_resident(&target(layer), pad)
        .unwrap_or_else(|e| panic!("{}: {e}", ckpt.format_name()));
    assert_eq!(
        converted.layer.weights.row_stride_bytes,
        layer.shape.k / 2 + pad.weight_extra_bytes
    );
    assert_eq!(
        converted.layer.scales.row_stride,
        layer.shape.groups() + pad.scale_extra_elems
    );
    assert_same_dequantized(
        &converted.layer.to_logical().expect("valid resident layer"),
        layer,
    );
    converted.notes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn compressed_tensors_round_trips(layer in logical_layer(false), pad in padding()) {
        let ckpt = CompressedTensorsLayer::from_logical(&layer).unwrap();
        prop_assert_eq!(ckpt.weight_zero_point.is_some(), layer.zeros.is_some());
        prop_assert!(check(&ckpt, &layer, pad).is_empty());
    }

    #[test]
    fn gptq_v1_and_v2_round_trip(layer in logical_layer(false), pad in padding()) {
        for version in [GptqVersion::V1, GptqVersion::V2] {
            let ckpt = GptqLayer::from_logical(&layer, version).unwrap();
            let notes = check(&ckpt, &layer, pad);
            // AutoGPTQ writes qzeros for symmetric layers too; those (all 8) are dropped with a note.
            prop_assert_eq!(notes.len(), usize::from(layer.zeros.is_none()));
        }
    }

    #[test]
    fn awq_round_trips(layer in logical_layer(false), pad in padding()) {
        let ckpt = AwqLayer::from_logical(&layer).unwrap();
        prop_assert!(check(&ckpt, &layer, pad).is_empty());
    }

    /// Legacy zero points come out unpacked, in the activation dtype; any N works.
    #[test]
    fn legacy_round_trips_unpacked(layer in logical_layer(true), pad in padding()) {
        let ckpt = LegacyLayer::from_logical(&layer).unwrap();
        let converted = ckpt.to_resident(&target(&layer), pad).unwrap();
        match (&converted.layer.zeros, &layer.zeros) {
            (Some(ZeroPoints::UnpackedLegacy(z)), Some(want)) => {
                let got: Vec<u8> = z.bits.iter().map(|&b| layer.dtype.to_f32(b) as u8).collect();
                prop_assert_eq!(&got, want);
            }
            (None, None) => {}
            (got, _) => prop_assert!(false, "unexpected zero points {got:?}"),
        }
        assert_same_dequantized(&converted.layer.to_logical().unwrap(), &layer);
    }

    /// Padding changes strides and nothing else: the logical bytes of each row are those of the
    /// unpadded layout, padding holds the filler, and reading back gives the same layer.
    #[test]
    fn padded_layout_holds_the_same_rows(layer in logical_layer(false), pad in padding()) {
        let dense = ResidentLayer::from_logical(&layer, RowPadding::NONE).unwrap();
        let padded = ResidentLayer::from_logical(&layer, pad).unwrap();
        let (row, stride) = (layer.shape.k / 2, padded.weights.row_stride_bytes);
        for n in 0..layer.shape.n {
            prop_assert_eq!(&padded.weights.bytes[n * stride..n * stride + row], &dense.weights.bytes[n * row..(n + 1) * row]);
            prop_assert!(padded.weights.bytes[n * stride + row..(n + 1) * stride].iter().all(|&b| b == 0xA5));
        }
        prop_assert_eq!(padded.to_logical().unwrap(), dense.to_logical().unwrap());
    }
}

/// v1 stores z − 1 in a nibble: z = 0 is stored as 15 and must come back as 0. Every z in every
/// row slot of a qzeros word.
#[test]
fn gptq_v1_round_trips_every_zero_point() {
    let mut layer = common::fixed_layer(true);
    let groups = layer.shape.groups();
    for z in 0..16u8 {
        for (i, v) in layer.zeros.as_mut().unwrap().iter_mut().enumerate() {
            // z everywhere except a rotating neighbour, so a wrap that smears into the next
            // nibble shows.
            *v = if i % 3 == 0 { z } else { 15 - z };
        }
        let ckpt = GptqLayer::from_logical(&layer, GptqVersion::V1).unwrap();
        let stored = ckpt.qzeros.as_ref().unwrap();
        let w0 = match &stored.data {
            w4a16_reference::formats::TensorData::I32(v) => v[0] as u32,
            other => panic!("qzeros stored as {:?}", other.dtype()),
        };
        // Row 0, group 0 (i = 0) holds z, stored as (z − 1) mod 16 in the low nibble.
        assert_eq!(w0 & 0xF, u32::from(z.wrapping_sub(1) & 0xF), "z = {z}");
        let back = ckpt
            .to_resident(&target(&layer), RowPadding::NONE)
            .unwrap()
            .layer
            .to_logical()
            .unwrap();
        assert_same_dequantized(&back, &layer);
        assert_eq!(back.zero(0, 0), z);
        assert_eq!(groups, 2);
    }
}

/// Words written out by hand from docs/contract.md §2–3, so that a producer and its converter cannot agree
/// on a wrong order. Layer: N = K = G = 8, q[n][k] = n + k + 1 (row 0 and column 0 are 1..8),
/// z[n] = n + 1.
#[test]
fn stored_words_match_the_spec() {
    use w4a16_reference::ActDtype;
    use w4a16_reference::formats::{Tensor, TensorData};
    use w4a16_reference::layer::LayerShape;
    let layer = QuantizedLayer {
        shape: LayerShape::new(8, 8, 8),
        dtype: ActDtype::F16,
        q: (0..64).map(|i| ((i / 8 + i % 8 + 1) % 16) as u8).collect(),
        zeros: Some((1..=8).collect()),
        scales: vec![ActDtype::F16.from_f32(1.0); 8],
        bias: None,
    };
    let first = |t: &Tensor| match &t.data {
        TensorData::I32(v) => v[0] as u32,
        other => panic!("{} stored as {:?}", t.name, other.dtype()),
    };
    let ct = CompressedTensorsLayer::from_logical(&layer).unwrap();
    assert_eq!(first(&ct.weight_packed), 0x8765_4321, "sequential along K");
    assert_eq!(
        first(ct.weight_zero_point.as_ref().unwrap()),
        0x8765_4321,
        "sequential along N"
    );
    let v1 = GptqLayer::from_logical(&layer, GptqVersion::V1).unwrap();
    assert_eq!(first(&v1.qweight), 0x8765_4321);
    assert_eq!(
        first(v1.qzeros.as_ref().unwrap()),
        0x7654_3210,
        "v1 stores z - 1"
    );
    let v2 = GptqLayer::from_logical(&layer, GptqVersion::V2).unwrap();
    assert_eq!(first(v2.qzeros.as_ref().unwrap()), 0x8765_4321);
    let awq = AwqLayer::from_logical(&layer).unwrap();
    assert_eq!(
        first(&awq.qweight),
        0x8642_7531,
        "slots hold columns 0,2,4,6,1,3,5,7"
    );
    assert_eq!(first(awq.qzeros.as_ref().unwrap()), 0x8642_7531);
    for ckpt in [&ct as &dyn Checkpoint, &v1, &v2, &awq] {
        let resident = ckpt
            .to_resident(&target(&layer), RowPadding::NONE)
            .unwrap()
            .layer;
        // ExLlama: nibbles from bit 0 are elements 0,2,4,6,1,3,5,7.
        assert_eq!(
            resident.weights.bytes[..4],
            [0x31, 0x75, 0x42, 0x86],
            "{}",
            ckpt.format_name()
        );
        match &resident.zeros {
            Some(ZeroPoints::Packed(z)) => assert_eq!(z.words[0], 0x8765_4321),
            other => panic!("{other:?}"),
        }
    }
}
