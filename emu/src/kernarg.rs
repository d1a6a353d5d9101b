//! The kernarg segment of a launch: the caller's explicit argument bytes at offset 0, then the
//! hidden arguments the HIP runtime fills (code object v5, LLVM AMDGPUUsage "Hidden Kernel
//! Arguments"), at the offsets the kernel's metadata gives.
//!
//! A hidden argument the emulator cannot give a correct value (a printf buffer, a heap, a
//! queue) is a typed error rather than a zero the kernel would dereference.

use crate::dispatch::Dims;
use crate::fault::FaultKind;
use crate::memory::GlobalMemory;
use crate::program::Kernel;
use crate::wave::POISON;

fn abi(detail: String) -> FaultKind {
    FaultKind::Abi { detail }
}

/// HIP launches are always three-dimensional (`hipLaunchKernel` takes `dim3`s).
const GRID_DIMS: u16 = 3;

/// The segment's bytes: `explicit` at 0, hidden arguments per `kernel.meta.hidden_args`, the
/// rest zero; `kernel.meta.kernarg_segment_size` long.
pub fn build(kernel: &Kernel, explicit: &[u8], dims: &Dims) -> Result<Vec<u8>, FaultKind> {
    let size = kernel.meta.kernarg_segment_size;
    let described = kernel.descriptor.kernarg_size;
    if described != 0 && described != size {
        return Err(abi(format!(
            "kernel descriptor says {described} B of kernargs, the metadata {size} B"
        )));
    }
    let first_hidden = kernel
        .meta
        .hidden_args
        .iter()
        .map(|(o, _, _)| *o)
        .min()
        .unwrap_or(size);
    if explicit.len() > first_hidden as usize {
        return Err(abi(format!(
            "{} B of explicit arguments, but the kernel's {size} B segment has room for {first_hidden} B before its hidden arguments",
            explicit.len()
        )));
    }
    let mut seg = vec![0u8; size as usize];
    seg[..explicit.len()].copy_from_slice(explicit);
    for (offset, len, kind) in &kernel.meta.hidden_args {
        let value = hidden(kind, dims)?;
        let bytes = value.to_le_bytes();
        let want = value.len();
        if *len as usize != want {
            return Err(abi(format!(
                "hidden argument `{kind}` is {len} B in the metadata, expected {want} B"
            )));
        }
        let slot = seg
            .get_mut(*offset as usize..*offset as usize + want)
            .ok_or_else(|| {
                abi(format!(
                    "hidden argument `{kind}` at {offset} (+{want} B) is outside the {size} B segment"
                ))
            })?;
        slot.copy_from_slice(&bytes[..want]);
    }
    Ok(seg)
}

/// A hidden argument's value, sized as the ABI says.
enum Value {
    U16(u16),
    U32(u32),
    U64(u64),
}

impl Value {
    fn len(&self) -> usize {
        match self {
            Value::U16(_) => 2,
            Value::U32(_) => 4,
            Value::U64(_) => 8,
        }
    }
    fn to_le_bytes(&self) -> [u8; 8] {
        let mut b = [0u8; 8];
        match *self {
            Value::U16(v) => b[..2].copy_from_slice(&v.to_le_bytes()),
            Value::U32(v) => b[..4].copy_from_slice(&v.to_le_bytes()),
            Value::U64(v) => b = v.to_le_bytes(),
        }
        b
    }
}

fn hidden(kind: &str, dims: &Dims) -> Result<Value, FaultKind> {
    let axis = |s: &str| match s {
        "x" => Some(0),
        "y" => Some(1),
        "z" => Some(2),
        _ => None,
    };
    let group = |i: usize| {
        u16::try_from(dims.block[i]).map_err(|_| {
            abi(format!(
                "workgroup size {} does not fit `hidden_group_size` (u16)",
                dims.block[i]
            ))
        })
    };
    if let Some((name, a)) = kind.rsplit_once('_')
        && let Some(i) = axis(a)
    {
        return match name {
            "hidden_block_count" => Ok(Value::U32(dims.grid[i])),
            "hidden_group_size" => Ok(Value::U16(group(i)?)),
            // The grid is whole workgroups (HIP's grid is counted in blocks): no partial group.
            "hidden_remainder" => Ok(Value::U16(0)),
            "hidden_global_offset" => Ok(Value::U64(0)),
            _ => Err(abi(format!("unknown hidden argument `{kind}`"))),
        };
    }
    match kind {
        "hidden_grid_dims" => Ok(Value::U16(GRID_DIMS)),
        "hidden_dynamic_lds_size" => Ok(Value::U32(dims.dynamic_lds)),
        // The high half of the flat address where LDS starts (src_shared_base).
        "hidden_shared_base" => Ok(Value::U32((crate::memory::SHARED_APERTURE >> 32) as u32)),
        "hidden_tool_correlation_id" => Ok(Value::U64(0)),
        _ => Err(abi(format!(
            "hidden argument `{kind}` needs runtime state the emulator does not provide"
        ))),
    }
}

/// Builds the segment and places it in `global`, returning its address. The allocation runs
/// 64 B (poisoned) past the segment, as a runtime's kernarg pool would: a wide scalar load at
/// the segment's end reads past it without a fault, and its extra registers hold poison.
pub fn place(
    global: &mut GlobalMemory,
    kernel: &Kernel,
    explicit: &[u8],
    dims: &Dims,
) -> Result<u64, FaultKind> {
    let seg = build(kernel, explicit, dims)?;
    let len = seg.len().div_ceil(64) * 64 + 64;
    let mut bytes: Vec<u8> = POISON
        .to_le_bytes()
        .iter()
        .copied()
        .cycle()
        .take(len)
        .collect();
    bytes[..seg.len()].copy_from_slice(&seg);
    let base = global.alloc(len, format!("kernarg of {}", kernel.name));
    global.write(base, &bytes, 0)?;
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inst::Gen;
    use crate::program::{KernelDescriptor, KernelMeta};

    fn kernel(size: u32, hidden: &[(u32, u32, &str)]) -> Kernel {
        Kernel::new(
            "k".into(),
            Gen::Gfx11,
            KernelDescriptor::default(),
            KernelMeta {
                kernarg_segment_size: size,
                hidden_args: hidden
                    .iter()
                    .map(|(o, s, k)| (*o, *s, k.to_string()))
                    .collect(),
                ..KernelMeta::default()
            },
            vec![],
            Default::default(),
        )
    }

    fn dims() -> Dims {
        Dims {
            grid: [5, 6, 7],
            block: [64, 2, 1],
            dynamic_lds: 1024,
        }
    }

    /// The v5 layout clang emits after 16 B of explicit arguments.
    const V5: &[(u32, u32, &str)] = &[
        (16, 4, "hidden_block_count_x"),
        (20, 4, "hidden_block_count_y"),
        (24, 4, "hidden_block_count_z"),
        (28, 2, "hidden_group_size_x"),
        (30, 2, "hidden_group_size_y"),
        (32, 2, "hidden_group_size_z"),
        (34, 2, "hidden_remainder_x"),
        (36, 2, "hidden_remainder_y"),
        (38, 2, "hidden_remainder_z"),
        (56, 8, "hidden_global_offset_x"),
        (64, 8, "hidden_global_offset_y"),
        (72, 8, "hidden_global_offset_z"),
        (80, 2, "hidden_grid_dims"),
        (96, 4, "hidden_dynamic_lds_size"),
    ];

    #[test]
    fn hidden_arguments_follow_the_metadata_offsets() {
        let k = kernel(272, V5);
        let seg = build(&k, &[0xAB; 16], &dims()).unwrap();
        assert_eq!(seg.len(), 272);
        let u32_at = |o: usize| u32::from_le_bytes(seg[o..o + 4].try_into().unwrap());
        let u16_at = |o: usize| u16::from_le_bytes(seg[o..o + 2].try_into().unwrap());
        assert_eq!(&seg[..16], &[0xAB; 16]);
        assert_eq!((u32_at(16), u32_at(20), u32_at(24)), (5, 6, 7));
        assert_eq!((u16_at(28), u16_at(30), u16_at(32)), (64, 2, 1));
        assert_eq!((u16_at(34), u16_at(36), u16_at(38)), (0, 0, 0));
        assert_eq!(u16_at(80), 3);
        assert_eq!(u32_at(96), 1024);
        assert!(seg[40..56].iter().all(|b| *b == 0));
    }

    #[test]
    fn bad_layouts_and_unprovidable_arguments_are_typed_errors() {
        let k = kernel(272, V5);
        assert!(matches!(
            build(&k, &[0; 17], &dims()),
            Err(FaultKind::Abi { .. })
        ));
        let k = kernel(24, &[(16, 8, "hidden_printf_buffer")]);
        let err = build(&k, &[], &dims()).unwrap_err();
        assert!(err.to_string().contains("hidden_printf_buffer"), "{err}");
        let k = kernel(24, &[(16, 2, "hidden_block_count_x")]);
        assert!(build(&k, &[], &dims()).is_err());
        let k = kernel(18, &[(16, 4, "hidden_block_count_x")]);
        assert!(build(&k, &[], &dims()).is_err());
        let k = kernel(24, &[(16, 4, "hidden_block_count_w")]);
        assert!(build(&k, &[], &dims()).is_err());
    }

    #[test]
    fn placed_segments_are_readable_and_padded_with_poison() {
        let k = kernel(40, &[(16, 4, "hidden_block_count_x")]);
        let mut g = GlobalMemory::default();
        let at = place(&mut g, &k, &[1, 2, 3, 4], &dims()).unwrap();
        let mut b = [0u8; 4];
        g.read(at + 16, &mut b, 0).unwrap();
        assert_eq!(u32::from_le_bytes(b), 5);
        g.read(at + 64, &mut b, 0).unwrap();
        assert_eq!(u32::from_le_bytes(b), POISON);
        assert!(g.read(at + 128, &mut b, 0).is_err());
    }
}
