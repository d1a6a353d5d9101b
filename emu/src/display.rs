//! Instructions printed back as assembly that `llvm-mc` accepts and encodes to the same bytes
//! (the agreement test checks this on every instruction of the code objects). Faults quote an
//! instruction this way.

use crate::inst::{Const, Form, Inst, Mods, Op, Operand, SrcMods};
use std::fmt;

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_single(self, f)?;
        if let Some(y) = &self.dual {
            f.write_str(" :: ")?;
            write_single(y, f)?;
        }
        Ok(())
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (inner, mods) = match *self {
            Operand::Off => return f.write_str("off"),
            Operand::Sgpr { first, count, mods } => (range('s', first, count), mods),
            Operand::Vgpr { first, count, mods } => (range('v', first, count), mods),
            Operand::Special { reg, mods } => (reg.name(), mods),
            Operand::Const { value, mods } => (value.to_string(), mods),
        };
        with_mods(f, &inner, mods)
    }
}

impl fmt::Display for Const {
    /// Inline integers in decimal, larger ones in hex (as the disassembler prints literals);
    /// floats with a decimal point and the digits that read back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Const::Int(v) if (-16..=64).contains(&v) || v < 0 => write!(f, "{v}"),
            Const::Int(v) => write!(f, "{v:#x}"),
            Const::Float(x) => write!(f, "{x:?}"),
        }
    }
}

fn range(kind: char, first: u16, count: u8) -> String {
    if count == 1 {
        format!("{kind}{first}")
    } else {
        format!("{kind}[{first}:{}]", first as u32 + count as u32 - 1)
    }
}

fn with_mods(f: &mut fmt::Formatter<'_>, inner: &str, mods: SrcMods) -> fmt::Result {
    let neg = if mods.neg { "-" } else { "" };
    if mods.abs {
        write!(f, "{neg}|{inner}|")
    } else {
        write!(f, "{neg}{inner}")
    }
}

/// VOP3P-encoded ops (and WMMA): their `op_sel`/`op_sel_hi`/`neg_*` lists have one element per
/// source; VOP3's `op_sel` has one more, for the destination.
fn is_vop3p(op: Op) -> bool {
    let name = op.name();
    ["v_pk_", "v_fma_mix", "v_dot2_", "v_wmma_"]
        .iter()
        .any(|p| name.starts_with(p))
}

fn write_single(inst: &Inst, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(&inst.mnemonic())?;
    for (i, op) in inst.operands.iter().enumerate() {
        f.write_str(if i == 0 { " " } else { ", " })?;
        write!(f, "{op}")?;
    }
    let list_len = if is_vop3p(inst.op) && inst.form == Form::Plain {
        inst.operands.len().saturating_sub(1)
    } else {
        inst.operands.len()
    };
    write_mods(&inst.mods, list_len, f)
}

fn write_mods(m: &Mods, list_len: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if m.offset0 != 0 {
        write!(f, " offset0:{}", m.offset0)?;
    }
    if m.offset1 != 0 {
        write!(f, " offset1:{}", m.offset1)?;
    }
    if m.offset != 0 {
        write!(f, " offset:{}", m.offset)?;
    }
    if let Some(w) = m.waitcnt {
        for (name, count) in [
            ("vmcnt", w.vmcnt),
            ("expcnt", w.expcnt),
            ("lgkmcnt", w.lgkmcnt),
        ] {
            if let Some(n) = count {
                write!(f, " {name}({n})")?;
            }
        }
    }
    let lists = [
        ("op_sel", m.op_sel),
        ("op_sel_hi", m.op_sel_hi),
        ("neg_lo", Some(m.neg_lo).filter(|b| *b != 0)),
        ("neg_hi", Some(m.neg_hi).filter(|b| *b != 0)),
    ];
    for (name, bits) in lists {
        if let Some(bits) = bits {
            let len = list_len.max(8 - bits.leading_zeros() as usize).max(1);
            let items: Vec<&str> = (0..len)
                .map(|i| if bits >> i & 1 == 1 { "1" } else { "0" })
                .collect();
            write!(f, " {name}:[{}]", items.join(","))?;
        }
    }
    if m.clamp {
        f.write_str(" clamp")?;
    }
    for v in &m.verbatim {
        write!(f, " {v}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::parse::parse_asm;

    /// Text the disassembler prints comes back unchanged (integers above 64 in hex) and reads back
    /// as the same instruction.
    #[test]
    fn disassembler_text_prints_back_as_itself() {
        for text in [
            "v_min3_i32 v1, s4, s5, v1",
            "v_pk_fma_f16 v10, v10, v33, v34 neg_lo:[0,0,1] neg_hi:[0,0,1]",
            "v_pk_add_f16 v17, 0xe400, v12 op_sel_hi:[0,1]",
            "v_fma_mix_f32 v1, v2, v3, v4 op_sel_hi:[1,0,0]",
            "v_cmp_ge_f32_e64 s3, |v10|, v8",
            "v_fma_f32 v10, -v9, -|v8|, 0x46800000",
            "ds_load_2addr_b32 v[15:16], v6 offset0:2 offset1:3",
            "global_load_b128 v[4:7], v[1:2], off offset:-16 th:TH_LOAD_NT",
            "global_load_b32 v1, v[2:3], off offset:4 slc dlc",
            "s_waitcnt vmcnt(1) lgkmcnt(0)",
            "s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)",
            "v_mad_u64_u32 v[10:11], null, s13, v20, v[17:18]",
            "s_add_co_i32 s13, s14, -1",
            "v_mul_f32_e32 v1, 0.15915494, v2",
            "v_mul_f32_e32 v1, 1.0, v2",
            "v_mul_f32_e32 v1, -0.5, v2",
            "s_cbranch_execz 0xba",
            "s_endpgm",
            "v_dual_mov_b32 v23, 0 :: v_dual_lshlrev_b32 v42, 9, v31",
            "s_mov_b32 s2, ttmp9",
        ] {
            let inst = parse_asm(text).unwrap();
            assert_eq!(inst.to_string(), text);
            assert_eq!(parse_asm(&inst.to_string()).unwrap(), inst, "{text}");
        }
    }
}
