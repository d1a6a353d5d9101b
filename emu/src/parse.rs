//! LLVM's disassembly, parsed into typed instructions. `llvm-objdump -d --mcpu=gfx…` prints one
//! instruction per line with its encoding in a trailing comment:
//!
//! ```text
//!   v_min3_i32 v1, s4, s5, v1            // 000000001F14: D61A0001 04040A04
//! ```
//!
//! [`parse_line`] reads such a line (address and words from the comment); [`parse_asm`] reads
//! the instruction text alone (tests and hand-written kernels).

use crate::inst::{Const, Form, Inst, Mods, Op, Operand, Special, SrcMods, Waitcnt};

/// Why a line is not an instruction this emulator can represent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("instruction `{mnemonic}` at {addr:#x} is not in the emulator's instruction set")]
    UnknownInstruction { mnemonic: String, addr: u64 },
    #[error("cannot read operand `{token}` of `{text}`")]
    BadOperand { token: String, text: String },
    #[error("cannot read modifier `{token}` of `{text}`")]
    BadModifier { token: String, text: String },
    #[error("no encoding comment (`// ADDRESS: WORDS`) in `{line}`")]
    NoEncoding { line: String },
}

/// Parses one disassembly line with its `// ADDRESS: WORDS` comment.
pub fn parse_line(line: &str) -> Result<Inst, ParseError> {
    let (text, comment) = line
        .split_once("//")
        .ok_or_else(|| ParseError::NoEncoding {
            line: line.trim().to_string(),
        })?;
    let no_encoding = || ParseError::NoEncoding {
        line: line.trim().to_string(),
    };
    let (addr, rest) = comment.trim().split_once(':').ok_or_else(no_encoding)?;
    let addr = u64::from_str_radix(addr.trim(), 16).map_err(|_| no_encoding())?;
    let words = rest
        .split_whitespace()
        .take_while(|w| !w.starts_with('<'))
        .map(|w| u32::from_str_radix(w, 16).map_err(|_| no_encoding()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut inst = parse_at(text.trim(), addr)?;
    inst.words = words;
    Ok(inst)
}

/// Parses the text of one instruction (`v_add_f32_e32 v1, v2, v3`), at address 0, no words.
pub fn parse_asm(text: &str) -> Result<Inst, ParseError> {
    parse_at(text.trim(), 0)
}

fn parse_at(text: &str, addr: u64) -> Result<Inst, ParseError> {
    if let Some((x, y)) = text.split_once("::") {
        let mut inst = parse_single(x.trim(), addr, text)?;
        let second = parse_single(y.trim(), addr, text)?;
        inst.dual = Some(Box::new(second));
        return Ok(inst);
    }
    parse_single(text, addr, text)
}

/// The op and form of a mnemonic as printed.
pub fn op_of(mnemonic: &str) -> Option<(Op, Form)> {
    let (name, form) = if let Some(base) = mnemonic.strip_suffix("_e32") {
        (base.to_string(), Form::E32)
    } else if let Some(base) = mnemonic.strip_suffix("_e64") {
        (base.to_string(), Form::E64)
    } else if let Some(base) = mnemonic.strip_prefix("v_dual_") {
        (format!("v_{base}"), Form::Dual)
    } else {
        (mnemonic.to_string(), Form::Plain)
    };
    Op::parse(&name).map(|op| (op, form))
}

/// Instructions whose arguments do not change results: kept verbatim.
fn is_hint(op: Op) -> bool {
    matches!(
        op,
        Op::SDelayAlu | Op::SSendmsg | Op::SSetInstPrefetchDistance | Op::SWaitcntDepctr
    )
}

fn parse_single(text: &str, addr: u64, whole: &str) -> Result<Inst, ParseError> {
    let (mnemonic, args) = match text.split_once(char::is_whitespace) {
        Some((m, a)) => (m, a.trim()),
        None => (text, ""),
    };
    let (op, form) = op_of(mnemonic).ok_or_else(|| ParseError::UnknownInstruction {
        mnemonic: mnemonic.to_string(),
        addr,
    })?;
    let mut inst = Inst {
        addr,
        words: Vec::new(),
        op,
        form,
        operands: Vec::new(),
        mods: Mods::default(),
        dual: None,
    };
    if is_hint(op) {
        if !args.is_empty() {
            inst.mods.verbatim.push(args.to_string());
        }
        return Ok(inst);
    }
    let tokens = tokens(args);
    let mut in_operands = true;
    for (token, comma) in tokens {
        if in_operands && !is_modifier(&token) {
            inst.operands
                .push(operand(&token).ok_or_else(|| ParseError::BadOperand {
                    token: token.clone(),
                    text: whole.to_string(),
                })?);
            if !comma {
                in_operands = false;
            }
            continue;
        }
        in_operands = false;
        modifier(&mut inst.mods, &token).ok_or_else(|| ParseError::BadModifier {
            token: token.clone(),
            text: whole.to_string(),
        })?;
    }
    Ok(inst)
}

/// Whitespace-separated tokens (brackets and parentheses kept whole), each with whether a comma
/// followed it.
fn tokens(args: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i32;
    let flush = |cur: &mut String, comma: bool, out: &mut Vec<(String, bool)>| {
        if !cur.is_empty() {
            out.push((std::mem::take(cur), comma));
        } else if comma && let Some(last) = out.last_mut() {
            last.1 = true;
        }
    };
    for c in args.chars() {
        match c {
            '[' | '(' => {
                depth += 1;
                cur.push(c);
            }
            ']' | ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => flush(&mut cur, true, &mut out),
            c if c.is_whitespace() && depth == 0 => flush(&mut cur, false, &mut out),
            c => cur.push(c),
        }
    }
    flush(&mut cur, false, &mut out);
    out
}

fn is_modifier(token: &str) -> bool {
    let bare = token.trim_start_matches(['-', '|']);
    (token.contains(':') && !bare.starts_with("v[") && !bare.starts_with("s["))
        || token.contains('(')
        || matches!(token, "glc" | "slc" | "dlc" | "nv" | "clamp" | "gds")
}

fn register(token: &str) -> Option<Operand> {
    let none = SrcMods::default();
    let special = match token {
        "vcc_lo" => Some(Special::VccLo),
        "vcc_hi" => Some(Special::VccHi),
        "vcc" => Some(Special::Vcc),
        "m0" => Some(Special::M0),
        "null" => Some(Special::Null),
        "exec_lo" => Some(Special::ExecLo),
        "exec_hi" => Some(Special::ExecHi),
        "exec" => Some(Special::Exec),
        "scc" => Some(Special::Scc),
        "src_shared_base" => Some(Special::SrcSharedBase),
        "src_private_base" => Some(Special::SrcPrivateBase),
        t => t
            .strip_prefix("ttmp")
            .and_then(|n| n.parse::<u8>().ok())
            .filter(|n| *n < 16)
            .map(Special::Ttmp),
    };
    if let Some(reg) = special {
        return Some(Operand::Special { reg, mods: none });
    }
    let (kind, rest) = token.split_at_checked(1)?;
    let (first, count) =
        if let Some(range) = rest.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            let (a, b) = range.split_once(':')?;
            let (a, b): (u16, u16) = (a.parse().ok()?, b.parse().ok()?);
            (a, u8::try_from(b.checked_sub(a)? + 1).ok()?)
        } else {
            (rest.parse().ok()?, 1)
        };
    match kind {
        "v" => Some(Operand::Vgpr {
            first,
            count,
            mods: none,
        }),
        "s" => Some(Operand::Sgpr {
            first,
            count,
            mods: none,
        }),
        _ => None,
    }
}

fn constant(token: &str) -> Option<Const> {
    if let Some(hex) = token.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16)
            .ok()
            .map(|v| Const::Int(v as i64));
    }
    if let Some(hex) = token.strip_prefix("-0x") {
        return u64::from_str_radix(hex, 16)
            .ok()
            .map(|v| Const::Int(-(v as i64)));
    }
    if let Ok(v) = token.parse::<i64>() {
        return Some(Const::Int(v));
    }
    if token.contains('.') {
        return token.parse::<f64>().ok().map(Const::Float);
    }
    None
}

fn with_mods(op: Operand, m: SrcMods) -> Operand {
    match op {
        Operand::Sgpr { first, count, .. } => Operand::Sgpr {
            first,
            count,
            mods: m,
        },
        Operand::Vgpr { first, count, .. } => Operand::Vgpr {
            first,
            count,
            mods: m,
        },
        Operand::Special { reg, .. } => Operand::Special { reg, mods: m },
        Operand::Const { value, .. } => Operand::Const { value, mods: m },
        Operand::Off => Operand::Off,
    }
}

/// One operand: a register, special, constant or `off`, with `-` and `|…|` modifiers.
pub fn operand(token: &str) -> Option<Operand> {
    if token == "off" {
        return Some(Operand::Off);
    }
    if let Some(c) = constant(token) {
        return Some(Operand::Const {
            value: c,
            mods: SrcMods::default(),
        });
    }
    let (neg, rest) = match token.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, token),
    };
    let (abs, inner) = match rest.strip_prefix('|').and_then(|r| r.strip_suffix('|')) {
        Some(i) => (true, i),
        None => (false, rest),
    };
    let base = register(inner).or_else(|| {
        constant(inner).map(|value| Operand::Const {
            value,
            mods: SrcMods::default(),
        })
    })?;
    Some(with_mods(base, SrcMods { neg, abs }))
}

/// `[1,0,1]` as a bit mask (element i is bit i).
fn bits(list: &str) -> Option<u8> {
    let inner = list.strip_prefix('[')?.strip_suffix(']')?;
    let mut m = 0u8;
    for (i, b) in inner.split(',').enumerate() {
        match b.trim() {
            "0" => {}
            "1" => m |= 1 << i,
            _ => return None,
        }
    }
    Some(m)
}

fn count_in(token: &str, name: &str) -> Option<u8> {
    token
        .strip_prefix(name)?
        .strip_prefix('(')?
        .strip_suffix(')')?
        .parse()
        .ok()
}

fn number(v: &str) -> Option<i64> {
    match v.strip_prefix("0x") {
        Some(h) => i64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

fn modifier(mods: &mut Mods, token: &str) -> Option<()> {
    if let Some((key, value)) = token.split_once(':') {
        match key {
            "offset" => mods.offset = number(value)? as i32,
            "offset0" => mods.offset0 = number(value)? as u8,
            "offset1" => mods.offset1 = number(value)? as u8,
            "op_sel" => mods.op_sel = Some(bits(value)?),
            "op_sel_hi" => mods.op_sel_hi = Some(bits(value)?),
            "neg_lo" => mods.neg_lo = bits(value)?,
            "neg_hi" => mods.neg_hi = bits(value)?,
            "th" | "scope" => mods.verbatim.push(token.to_string()),
            _ => return None,
        }
        return Some(());
    }
    for (name, slot) in [("vmcnt", 0), ("expcnt", 1), ("lgkmcnt", 2)] {
        if let Some(n) = count_in(token, name) {
            let w = mods.waitcnt.get_or_insert(Waitcnt::default());
            match slot {
                0 => w.vmcnt = Some(n),
                1 => w.expcnt = Some(n),
                _ => w.lgkmcnt = Some(n),
            }
            return Some(());
        }
    }
    match token {
        "clamp" => mods.clamp = true,
        "glc" | "slc" | "dlc" | "nv" => mods.verbatim.push(token.to_string()),
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(first: u16, count: u8) -> Operand {
        Operand::Vgpr {
            first,
            count,
            mods: SrcMods::default(),
        }
    }

    #[test]
    fn an_objdump_line_gives_op_operands_address_and_words() {
        let i = parse_line(
            "\tv_min3_i32 v1, s4, s5, v1                                  // 000000001F14: D61A0001 04040A04",
        )
        .unwrap();
        assert_eq!((i.op, i.form, i.addr), (Op::VMin3I32, Form::Plain, 0x1F14));
        assert_eq!(i.words, vec![0xD61A0001, 0x04040A04]);
        assert_eq!(i.operands.len(), 4);
        assert_eq!(i.size(), 8);
        let b = parse_line(
            "\ts_cbranch_vccnz 245   // 000000001F20: BFA400F5 <w4a16_fallback_f16+0x3f8>",
        )
        .unwrap();
        assert_eq!(b.words, vec![0xBFA400F5]);
        assert_eq!(
            b.operands,
            vec![Operand::Const {
                value: Const::Int(245),
                mods: SrcMods::default()
            }]
        );
    }

    #[test]
    fn modifiers_and_source_modifiers_are_typed() {
        let i = parse_asm("v_pk_fma_f16 v10, v10, v33, v34 neg_lo:[0,0,1] neg_hi:[0,0,1]").unwrap();
        assert_eq!(
            (i.mods.neg_lo, i.mods.neg_hi, i.mods.op_sel_hi),
            (4, 4, None)
        );
        let i = parse_asm("v_pk_add_f16 v17, 0xe400, v12 op_sel_hi:[0,1]").unwrap();
        assert_eq!(i.mods.op_sel_hi, Some(2));
        let i = parse_asm("v_cmp_ge_f32_e64 s3, |v10|, v8").unwrap();
        assert!(matches!(
            i.operands[1],
            Operand::Vgpr {
                mods: SrcMods {
                    abs: true,
                    neg: false
                },
                ..
            }
        ));
        let i = parse_asm("v_fma_f32 v10, -v9, v8, 0x46800000").unwrap();
        assert!(matches!(
            i.operands[1],
            Operand::Vgpr {
                mods: SrcMods { neg: true, .. },
                ..
            }
        ));
        let i = parse_asm("ds_load_2addr_b32 v[15:16], v6 offset0:2 offset1:3").unwrap();
        assert_eq!(
            (i.operands[0], i.mods.offset0, i.mods.offset1),
            (v(15, 2), 2, 3)
        );
        let i = parse_asm("global_load_b128 v[4:7], v[1:2], off th:TH_LOAD_NT").unwrap();
        assert_eq!(i.operands, vec![v(4, 4), v(1, 2), Operand::Off]);
        let i = parse_asm("s_waitcnt vmcnt(1) lgkmcnt(0)").unwrap();
        assert_eq!(
            i.mods.waitcnt,
            Some(Waitcnt {
                vmcnt: Some(1),
                expcnt: None,
                lgkmcnt: Some(0)
            })
        );
        let i = parse_asm("s_delay_alu instid0(VALU_DEP_1) | instskip(NEXT) | instid1(VALU_DEP_1)")
            .unwrap();
        assert_eq!(i.op, Op::SDelayAlu);
        let i = parse_asm("v_mad_u64_u32 v[10:11], null, s13, v20, v[17:18]").unwrap();
        assert_eq!(i.operands.len(), 5);
        let i = parse_asm("s_add_co_i32 s13, s14, -1").unwrap();
        assert_eq!(
            i.operands[2],
            Operand::Const {
                value: Const::Int(-1),
                mods: SrcMods::default()
            }
        );
        let i = parse_asm("v_mul_f32_e32 v1, 0.5, v2").unwrap();
        assert_eq!(
            i.operands[1],
            Operand::Const {
                value: Const::Float(0.5),
                mods: SrcMods::default()
            }
        );
    }

    #[test]
    fn a_dual_issue_pair_is_one_instruction_with_two_halves() {
        let i = parse_asm("v_dual_mov_b32 v23, 0 :: v_dual_lshlrev_b32 v42, 9, v31").unwrap();
        assert_eq!((i.op, i.form), (Op::VMovB32, Form::Dual));
        let y = i.dual.as_ref().unwrap();
        assert_eq!((y.op, y.form), (Op::VLshlrevB32, Form::Dual));
        assert_eq!(i.mnemonic(), "v_dual_mov_b32");
    }

    #[test]
    fn unknown_mnemonics_and_bad_operands_are_typed_errors() {
        assert!(matches!(
            parse_line("\tv_frobnicate v1, v2   // 0000000010: 12345678"),
            Err(ParseError::UnknownInstruction { addr: 0x10, .. })
        ));
        assert!(matches!(
            parse_asm("v_mov_b32_e32 v1, q7"),
            Err(ParseError::BadOperand { .. })
        ));
    }
}
