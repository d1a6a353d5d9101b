//! Launch-ABI conformance: the argument list declared in Rust (`kernels/src/set/args.rs`) against
//! each code object's kernel-argument metadata. Launch packing uses `arg_offsets` of the
//! declaration, so any disagreement here is a kernel reading the wrong bytes on the device.

use super::{KernelArg, KernelInfo};
use std::fmt;
use w4a16_kernels::decl::{ArgDecl, ArgKind, arg_offsets};
use w4a16_kernels::{KernelId, set};

/// The declared argument list of a kernel's HIP entry points (`None` for `dense`, which has
/// no HIP source).
pub fn declared_args(kernel: KernelId) -> Option<&'static [ArgDecl]> {
    let d = set::decl(kernel);
    d.source_file.map(|_| d.args)
}

/// One disagreement between declaration and code object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgProblem {
    Count {
        expected: usize,
        got: usize,
    },
    Name {
        index: usize,
        expected: &'static str,
        got: String,
    },
    Kind {
        index: usize,
        name: &'static str,
        expected: &'static str,
        got: String,
    },
    Offset {
        index: usize,
        name: &'static str,
        expected: usize,
        got: u32,
    },
    Size {
        index: usize,
        name: &'static str,
        expected: usize,
        got: u32,
    },
    /// The compiler proved an access the declaration rules out (a write to an input, or an
    /// output never written).
    Access {
        index: usize,
        name: &'static str,
        declared: &'static str,
        got: String,
    },
    /// Explicit arguments extend past the kernel-argument segment.
    Segment {
        declared_end: usize,
        segment: u32,
    },
}

impl fmt::Display for ArgProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgProblem::Count { expected, got } => {
                write!(f, "explicit argument count: expected {expected}, got {got}")
            }
            ArgProblem::Name {
                index,
                expected,
                got,
            } => {
                write!(f, "arg {index}: name: expected {expected:?}, got {got:?}")
            }
            ArgProblem::Kind {
                index,
                name,
                expected,
                got,
            } => {
                write!(
                    f,
                    "arg {index} ({name}): kind: expected {expected}, got {got}"
                )
            }
            ArgProblem::Offset {
                index,
                name,
                expected,
                got,
            } => {
                write!(
                    f,
                    "arg {index} ({name}): offset: expected {expected}, got {got}"
                )
            }
            ArgProblem::Size {
                index,
                name,
                expected,
                got,
            } => {
                write!(
                    f,
                    "arg {index} ({name}): size: expected {expected}, got {got}"
                )
            }
            ArgProblem::Access {
                index,
                name,
                declared,
                got,
            } => {
                write!(
                    f,
                    "arg {index} ({name}): declared {declared}, but the code object's access is {got}"
                )
            }
            ArgProblem::Segment {
                declared_end,
                segment,
            } => write!(
                f,
                "declared arguments end at byte {declared_end}, past the {segment}-byte kernel-argument segment"
            ),
        }
    }
}

/// Every way one entry's code-object arguments differ from the declaration.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct AbiMismatch {
    pub entry: String,
    pub target: String,
    pub problems: Vec<ArgProblem>,
}

impl fmt::Display for AbiMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "launch ABI mismatch: kernel {} on {}:",
            self.entry, self.target
        )?;
        for p in &self.problems {
            write!(f, "\n  {p}")?;
        }
        Ok(())
    }
}

fn kind_name(a: &ArgDecl) -> &'static str {
    match a.kind {
        ArgKind::Pointer { .. } => "pointer (global_buffer)",
        ArgKind::I32(_) => "i32 (by_value)",
    }
}

fn got_kind(a: &KernelArg) -> String {
    match &a.address_space {
        Some(space) if !a.is_global_buffer() => format!("{} ({space})", a.value_kind),
        _ => a.value_kind.clone(),
    }
}

/// Checks one entry. Names are compared when the code object records them
/// (`-fhip-kernel-arg-name`); they are the only thing that tells two swapped i32 apart.
pub fn check(
    entry: &str,
    target: &str,
    decl: &[ArgDecl],
    kernel: &KernelInfo,
) -> Result<(), AbiMismatch> {
    let (offsets, end) = arg_offsets(decl);
    let mut problems = Vec::new();
    if decl.len() != kernel.args.len() {
        problems.push(ArgProblem::Count {
            expected: decl.len(),
            got: kernel.args.len(),
        });
    }
    for (index, ((d, off), got)) in decl.iter().zip(&offsets).zip(&kernel.args).enumerate() {
        if let Some(n) = &got.name
            && n != d.name
        {
            problems.push(ArgProblem::Name {
                index,
                expected: d.name,
                got: n.clone(),
            });
        }
        let kind_ok = match d.kind {
            ArgKind::Pointer { .. } => got.is_global_buffer(),
            ArgKind::I32(_) => got.is_by_value(),
        };
        if !kind_ok {
            problems.push(ArgProblem::Kind {
                index,
                name: d.name,
                expected: kind_name(d),
                got: got_kind(got),
            });
        }
        if *off != got.offset as usize {
            problems.push(ArgProblem::Offset {
                index,
                name: d.name,
                expected: *off,
                got: got.offset,
            });
        }
        if d.size() != got.size as usize {
            problems.push(ArgProblem::Size {
                index,
                name: d.name,
                expected: d.size(),
                got: got.size,
            });
        }
        if let (ArgKind::Pointer { writes, .. }, Some(access)) = (d.kind, &got.actual_access) {
            let contradicts = if writes {
                access == "read_only"
            } else {
                access != "read_only"
            };
            if contradicts {
                let declared = if writes {
                    "an output (written)"
                } else {
                    "an input (read only)"
                };
                problems.push(ArgProblem::Access {
                    index,
                    name: d.name,
                    declared,
                    got: access.clone(),
                });
            }
        }
    }
    if end > kernel.kernarg_segment_size as usize {
        problems.push(ArgProblem::Segment {
            declared_end: end,
            segment: kernel.kernarg_segment_size,
        });
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(AbiMismatch {
            entry: entry.to_owned(),
            target: target.to_owned(),
            problems,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What clang emits for a declaration, built from the declaration itself.
    fn mirror(decl: &[ArgDecl]) -> KernelInfo {
        let (offsets, end) = arg_offsets(decl);
        KernelInfo {
            name: "w4a16_skinny_f16".into(),
            symbol: String::new(),
            vgpr_count: 1,
            sgpr_count: 1,
            agpr_count: None,
            vgpr_spill_count: 0,
            sgpr_spill_count: 0,
            lds_bytes: 0,
            scratch_bytes: 0,
            uses_dynamic_stack: false,
            wavefront_size: 32,
            max_flat_workgroup_size: 256,
            kernarg_segment_size: end as u32 + 256,
            args: decl
                .iter()
                .zip(offsets)
                .map(|(d, off)| KernelArg {
                    name: Some(d.name.to_owned()),
                    offset: off as u32,
                    size: d.size() as u32,
                    value_kind: if d.is_pointer() {
                        "global_buffer"
                    } else {
                        "by_value"
                    }
                    .into(),
                    address_space: d.is_pointer().then(|| "global".to_owned()),
                    actual_access: None,
                })
                .collect(),
            hidden_args: vec![],
        }
    }

    #[test]
    fn the_gemm_declaration_matches_its_mirror() {
        let k = mirror(&set::GEMM_ARGS);
        check("w4a16_skinny_f16", "gfx1151", &set::GEMM_ARGS, &k).unwrap();
        assert_eq!(k.args[6].offset, 48, "six pointers then m");
    }

    #[test]
    fn swapped_scalars_are_caught_by_name() {
        let k = mirror(&set::GEMM_ARGS);
        let mut wrong = set::GEMM_ARGS;
        wrong.swap(6, 7);
        let e = check("w4a16_skinny_f16", "gfx1151", &wrong, &k).unwrap_err();
        assert_eq!(
            e.to_string(),
            "launch ABI mismatch: kernel w4a16_skinny_f16 on gfx1151:\n  arg 6: name: expected \"n\", got \"m\"\n  arg 7: name: expected \"m\", got \"n\""
        );
    }

    #[test]
    fn an_i32_declared_as_pointer_shifts_everything_after() {
        let k = mirror(&set::DEQUANT_ARGS);
        let mut wrong = set::DEQUANT_ARGS;
        wrong[4] = ArgDecl {
            name: "n",
            kind: ArgKind::Pointer {
                role: w4a16_kernels::TensorRole::X,
                writes: false,
                nullable: false,
            },
        };
        let e = check("w4a16_dequant_f16", "gfx1100", &wrong, &k).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("arg 4 (n): kind: expected pointer (global_buffer), got by_value"),
            "{text}"
        );
        assert!(
            text.contains("arg 4 (n): size: expected 8, got 4"),
            "{text}"
        );
        assert!(
            text.contains("arg 5 (k): offset: expected 40, got 36"),
            "{text}"
        );
    }

    #[test]
    fn count_and_access_mismatches() {
        let mut k = mirror(&set::GEMM_ARGS);
        k.args.pop();
        k.args[0].actual_access = Some("read_write".into());
        k.args[5].actual_access = Some("read_only".into());
        let e = check("w4a16_fused_bf16", "gfx1201", &set::GEMM_ARGS, &k).unwrap_err();
        assert_eq!(
            e.problems[0],
            ArgProblem::Count {
                expected: 14,
                got: 13
            }
        );
        assert!(
            e.problems.iter().any(
                |p| matches!(p, ArgProblem::Access { index: 0, got, .. } if got == "read_write")
            )
        );
        assert!(e.problems.iter().any(|p| matches!(p, ArgProblem::Access { index: 5, declared, .. } if declared.contains("output"))));
    }
}
