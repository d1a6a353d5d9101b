//! No GPU backend: every device check is a loud skip that says why (ARCHITECTURE.md rule 4).

use w4a16_require::{Requirement, Skip};

/// The skip a machine without any usable backend reports.
pub fn open() -> Skip {
    open_with(&[])
}

/// As [`open`], listing what each backend said.
pub fn open_with(reasons: &[String]) -> Skip {
    let why = if reasons.is_empty() {
        "no backend was tried".to_string()
    } else {
        reasons.join("; ")
    };
    Skip {
        requirement: Requirement::Gpu,
        reason: format!("no GPU backend available: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_names_every_reason() {
        let s = open_with(&[
            "cuda: libcuda.so not found".into(),
            "rocm: not built".into(),
        ]);
        assert_eq!(s.requirement, Requirement::Gpu);
        assert_eq!(
            s.reason,
            "no GPU backend available: cuda: libcuda.so not found; rocm: not built"
        );
    }
}
