//! Failure artifacts (ARCHITECTURE.md rule 9): inputs, reference and output of a failed check, as JSON,
//! so the failure can be studied without rerunning it. Large tensors are left out (the case id
//! and seed rebuild them exactly).

use serde::Serialize;
use std::path::{Path, PathBuf};
use w4a16_reference::gemm::Reference;
use w4a16_reference::layer::{Activations, QuantizedLayer};

/// Tensors with more elements than this are described, not dumped.
const MAX_DUMPED_ELEMENTS: usize = 1 << 20;

#[derive(Serialize)]
struct Artifact<'a> {
    case_id: &'a str,
    check: &'a str,
    detail: &'a str,
    m: usize,
    n: usize,
    k: usize,
    group: usize,
    dtype: &'a str,
    x_bits: Option<&'a [u16]>,
    q: Option<&'a [u8]>,
    zeros: Option<&'a [u8]>,
    scale_bits: Option<&'a [u16]>,
    bias_bits: Option<&'a [u16]>,
    y_bits: Option<&'a [u16]>,
    reference_y: Option<&'a [f64]>,
    reference_a: Option<&'a [f64]>,
}

fn small<T>(v: &[T]) -> Option<&[T]> {
    (v.len() <= MAX_DUMPED_ELEMENTS).then_some(v)
}

/// A file name from a case id and check: `/` and other separators become `__`.
pub fn file_name(case_id: &str, check: &str) -> String {
    let clean = |s: &str| {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_=.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect::<String>()
    };
    format!("{}__{}.json", clean(case_id), clean(check))
}

#[allow(clippy::too_many_arguments)]
pub fn write(
    dir: &Path,
    case_id: &str,
    check: &str,
    detail: &str,
    x: &Activations,
    layer: &QuantizedLayer,
    y_bits: &[u16],
    reference: Option<&Reference>,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let a = Artifact {
        case_id,
        check,
        detail,
        m: x.m,
        n: layer.shape.n,
        k: layer.shape.k,
        group: layer.shape.group,
        dtype: layer.dtype.name(),
        x_bits: small(&x.data),
        q: small(&layer.q),
        zeros: layer.zeros.as_deref().and_then(small),
        scale_bits: small(&layer.scales),
        bias_bits: layer.bias.as_deref(),
        y_bits: small(y_bits),
        reference_y: reference.and_then(|r| small(&r.y)),
        reference_a: reference.and_then(|r| small(&r.a)),
    };
    let path = dir.join(file_name(case_id, check));
    std::fs::write(
        &path,
        serde_json::to_vec(&a).map_err(std::io::Error::other)?,
    )?;
    Ok(path)
}
