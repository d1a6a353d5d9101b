//! Typed instructions: what `parse` makes of LLVM's disassembly of a code object, and what
//! `exec` runs. One [`Inst`] per machine instruction, operands in assembly order (destinations
//! first), with the encoding words kept so a test can check the typed form against the bytes.

/// The ISA generation: decides counters (`vmcnt`/`lgkmcnt` vs `loadcnt`/`dscnt`/`kmcnt`),
/// WMMA operand layouts and register numbers of the specials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Gen {
    /// RDNA3 / RDNA3.5: gfx1100, gfx1151.
    Gfx11,
    /// RDNA4: gfx1201.
    Gfx12,
}

impl Gen {
    /// The generation of a `gfx…` target name, or `None` for a target this emulator does not run.
    pub fn of_target(gfx: &str) -> Option<Gen> {
        match gfx {
            "gfx1100" | "gfx1101" | "gfx1102" | "gfx1150" | "gfx1151" => Some(Gen::Gfx11),
            "gfx1200" | "gfx1201" => Some(Gen::Gfx12),
            _ => None,
        }
    }
}

w4a16_reference::named_enum! {
    #[names_only]
    /// Every instruction of the kernel set's code objects, by mnemonic without its encoding
    /// suffix (`_e32`/`_e64`, which [`Form`] keeps) and with VOPD halves named as their VOP2
    /// counterparts (`v_dual_mov_b32` is [`Op::VMovB32`] in [`Form::Dual`]).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Op {
        BufferGl0Inv = "buffer_gl0_inv",
        DsBpermuteB32 = "ds_bpermute_b32",
        DsLoad2addrB32 = "ds_load_2addr_b32",
        DsLoadB128 = "ds_load_b128",
        DsLoadB32 = "ds_load_b32",
        DsStoreB128 = "ds_store_b128",
        DsStoreB16 = "ds_store_b16",
        DsStoreB32 = "ds_store_b32",
        DsStoreB64 = "ds_store_b64",
        DsStoreB96 = "ds_store_b96",
        FlatLoadB32 = "flat_load_b32",
        FlatLoadU16 = "flat_load_u16",
        GlobalInv = "global_inv",
        GlobalLoadB128 = "global_load_b128",
        GlobalLoadB32 = "global_load_b32",
        GlobalLoadU16 = "global_load_u16",
        GlobalStoreB128 = "global_store_b128",
        GlobalStoreB16 = "global_store_b16",
        GlobalStoreB32 = "global_store_b32",
        GlobalWb = "global_wb",
        SAbsI32 = "s_abs_i32",
        SAddCoCiU32 = "s_add_co_ci_u32",
        SAddCoI32 = "s_add_co_i32",
        SAddI32 = "s_add_i32",
        SAddNcU64 = "s_add_nc_u64",
        SAddU32 = "s_add_u32",
        SAddcU32 = "s_addc_u32",
        SAddkCoI32 = "s_addk_co_i32",
        SAddkI32 = "s_addk_i32",
        SAndB32 = "s_and_b32",
        SAndNot1B32 = "s_and_not1_b32",
        SAndNot1SaveexecB32 = "s_and_not1_saveexec_b32",
        SAndSaveexecB32 = "s_and_saveexec_b32",
        SAshrI32 = "s_ashr_i32",
        SBarrier = "s_barrier",
        SBarrierSignal = "s_barrier_signal",
        SBarrierWait = "s_barrier_wait",
        SBfeU32 = "s_bfe_u32",
        SBitcmp0B32 = "s_bitcmp0_b32",
        SBitcmp0B64 = "s_bitcmp0_b64",
        SBitcmp1B32 = "s_bitcmp1_b32",
        SBitcmp1B64 = "s_bitcmp1_b64",
        SBitset0B32 = "s_bitset0_b32",
        SBranch = "s_branch",
        SCbranchExecnz = "s_cbranch_execnz",
        SCbranchExecz = "s_cbranch_execz",
        SCbranchScc0 = "s_cbranch_scc0",
        SCbranchScc1 = "s_cbranch_scc1",
        SCbranchVccnz = "s_cbranch_vccnz",
        SCbranchVccz = "s_cbranch_vccz",
        SClause = "s_clause",
        SCmpEqU32 = "s_cmp_eq_u32",
        SCmpEqU64 = "s_cmp_eq_u64",
        SCmpGeF32 = "s_cmp_ge_f32",
        SCmpGeI32 = "s_cmp_ge_i32",
        SCmpGeU32 = "s_cmp_ge_u32",
        SCmpGtI32 = "s_cmp_gt_i32",
        SCmpGtU32 = "s_cmp_gt_u32",
        SCmpLeU32 = "s_cmp_le_u32",
        SCmpLgU32 = "s_cmp_lg_u32",
        SCmpLgU64 = "s_cmp_lg_u64",
        SCmpLtI32 = "s_cmp_lt_i32",
        SCmpLtU32 = "s_cmp_lt_u32",
        SCmpkEqI32 = "s_cmpk_eq_i32",
        SCmpkGtU32 = "s_cmpk_gt_u32",
        SCmpkLtU32 = "s_cmpk_lt_u32",
        SCodeEnd = "s_code_end",
        SCselectB32 = "s_cselect_b32",
        SCvtF32U32 = "s_cvt_f32_u32",
        SCvtU32F32 = "s_cvt_u32_f32",
        SDelayAlu = "s_delay_alu",
        SEndpgm = "s_endpgm",
        SFmaakF32 = "s_fmaak_f32",
        SLoadB128 = "s_load_b128",
        SLoadB256 = "s_load_b256",
        SLoadB32 = "s_load_b32",
        SLoadB512 = "s_load_b512",
        SLoadB64 = "s_load_b64",
        SLoadU16 = "s_load_u16",
        SLshlB32 = "s_lshl_b32",
        SLshlB64 = "s_lshl_b64",
        SLshrB32 = "s_lshr_b32",
        SMinI32 = "s_min_i32",
        SMinU32 = "s_min_u32",
        SMovB32 = "s_mov_b32",
        SMovB64 = "s_mov_b64",
        SMovkI32 = "s_movk_i32",
        SMulF32 = "s_mul_f32",
        SMulHiI32 = "s_mul_hi_i32",
        SMulHiU32 = "s_mul_hi_u32",
        SMulI32 = "s_mul_i32",
        SMulU64 = "s_mul_u64",
        SMulkI32 = "s_mulk_i32",
        SNop = "s_nop",
        SNotB32 = "s_not_b32",
        SOrB32 = "s_or_b32",
        SOrSaveexecB32 = "s_or_saveexec_b32",
        SSendmsg = "s_sendmsg",
        SSetInstPrefetchDistance = "s_set_inst_prefetch_distance",
        SSubCoI32 = "s_sub_co_i32",
        SSubI32 = "s_sub_i32",
        STruncF32 = "s_trunc_f32",
        SWaitBvhcnt = "s_wait_bvhcnt",
        SWaitDscnt = "s_wait_dscnt",
        SWaitKmcnt = "s_wait_kmcnt",
        SWaitLoadcnt = "s_wait_loadcnt",
        SWaitLoadcntDscnt = "s_wait_loadcnt_dscnt",
        SWaitSamplecnt = "s_wait_samplecnt",
        SWaitStorecnt = "s_wait_storecnt",
        SWaitStorecntDscnt = "s_wait_storecnt_dscnt",
        SWaitcnt = "s_waitcnt",
        SWaitcntDepctr = "s_waitcnt_depctr",
        SWaitcntVscnt = "s_waitcnt_vscnt",
        SXorB32 = "s_xor_b32",
        VAdd3U32 = "v_add3_u32",
        VAddCoCiU32 = "v_add_co_ci_u32",
        VAddCoU32 = "v_add_co_u32",
        VAddF16 = "v_add_f16",
        VAddF32 = "v_add_f32",
        VAddLshlU32 = "v_add_lshl_u32",
        VAddNcU32 = "v_add_nc_u32",
        VAndB32 = "v_and_b32",
        VAndOrB32 = "v_and_or_b32",
        VAshrrevI32 = "v_ashrrev_i32",
        VBfeI32 = "v_bfe_i32",
        VBfeU32 = "v_bfe_u32",
        VCmpEqU32 = "v_cmp_eq_u32",
        VCmpGeF32 = "v_cmp_ge_f32",
        VCmpGeI32 = "v_cmp_ge_i32",
        VCmpGeU32 = "v_cmp_ge_u32",
        VCmpGtI32 = "v_cmp_gt_i32",
        VCmpGtU32 = "v_cmp_gt_u32",
        VCmpLeI32 = "v_cmp_le_i32",
        VCmpLeU32 = "v_cmp_le_u32",
        VCmpLtI32 = "v_cmp_lt_i32",
        VCmpLtU32 = "v_cmp_lt_u32",
        VCmpNeU32 = "v_cmp_ne_u32",
        VCmpxEqU32 = "v_cmpx_eq_u32",
        VCmpxGtI32 = "v_cmpx_gt_i32",
        VCmpxGtU32 = "v_cmpx_gt_u32",
        VCmpxLtI32 = "v_cmpx_lt_i32",
        VCmpxNeU64 = "v_cmpx_ne_u64",
        VCndmaskB32 = "v_cndmask_b32",
        VCvtF16F32 = "v_cvt_f16_f32",
        VCvtF32F16 = "v_cvt_f32_f16",
        VCvtF32I32 = "v_cvt_f32_i32",
        VCvtF32U32 = "v_cvt_f32_u32",
        VCvtU32F32 = "v_cvt_u32_f32",
        VDot2F32F16 = "v_dot2_f32_f16",
        VDot2accF32F16 = "v_dot2acc_f32_f16",
        VFmaF32 = "v_fma_f32",
        VFmaMixF32 = "v_fma_mix_f32",
        VFmacF32 = "v_fmac_f32",
        VLshlAddU32 = "v_lshl_add_u32",
        VLshlOrB32 = "v_lshl_or_b32",
        VLshlrevB32 = "v_lshlrev_b32",
        VLshlrevB64 = "v_lshlrev_b64",
        VLshrrevB32 = "v_lshrrev_b32",
        VMadCoI64I32 = "v_mad_co_i64_i32",
        VMadCoU64U32 = "v_mad_co_u64_u32",
        VMadI64I32 = "v_mad_i64_i32",
        VMadU32U24 = "v_mad_u32_u24",
        VMadU64U32 = "v_mad_u64_u32",
        VMaxI32 = "v_max_i32",
        VMbcntLoU32B32 = "v_mbcnt_lo_u32_b32",
        VMed3I32 = "v_med3_i32",
        VMin3I32 = "v_min3_i32",
        VMinI32 = "v_min_i32",
        VMovB32 = "v_mov_b32",
        VMulF32 = "v_mul_f32",
        VMulHiU32 = "v_mul_hi_u32",
        VMulLoU32 = "v_mul_lo_u32",
        VMulU32U24 = "v_mul_u32_u24",
        VNotB32 = "v_not_b32",
        VOr3B32 = "v_or3_b32",
        VOrB32 = "v_or_b32",
        VPkAddF16 = "v_pk_add_f16",
        VPkFmaF16 = "v_pk_fma_f16",
        VPkMulF16 = "v_pk_mul_f16",
        VRcpIflagF32 = "v_rcp_iflag_f32",
        VReadfirstlaneB32 = "v_readfirstlane_b32",
        VSubF32 = "v_sub_f32",
        VSubNcU32 = "v_sub_nc_u32",
        VSubrevNcU32 = "v_subrev_nc_u32",
        VTruncF32 = "v_trunc_f32",
        VWmmaF3216x16x16Bf16 = "v_wmma_f32_16x16x16_bf16",
        VWmmaF3216x16x16F16 = "v_wmma_f32_16x16x16_f16",
        VXorB32 = "v_xor_b32",
    }
}

/// How the mnemonic was spelled around the [`Op`]: the suffix the disassembler printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// No suffix (SALU, SMEM, memory, VOP3-only and VOP3P instructions).
    Plain,
    /// `_e32`: the 32-bit VOP1/VOP2/VOPC encoding; implicit VCC operands are printed anyway.
    E32,
    /// `_e64`: the VOP3 encoding of a VOP1/VOP2/VOPC instruction.
    E64,
    /// A half of a VOPD dual-issue pair (`v_dual_…`).
    Dual,
}

/// A scalar register outside s0..s105, by its gfx11/gfx12 operand number (the same on both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    VccLo,
    VccHi,
    /// `vcc`: the 64-bit pair (VCC_LO, VCC_HI).
    Vcc,
    M0,
    Null,
    ExecLo,
    ExecHi,
    /// `exec`: the 64-bit pair (EXEC_LO, EXEC_HI).
    Exec,
    Scc,
    /// A trap-handler temporary; gfx12 places workgroup ids in ttmp7/ttmp9 (indices 108..=123).
    Ttmp(u8),
    /// `src_shared_base`: the 64-bit base of the flat aperture that maps to LDS.
    SrcSharedBase,
    /// `src_private_base`: the flat aperture of scratch.
    SrcPrivateBase,
}

impl Special {
    /// Index in [`crate::wave::Wave::sgpr`] of the (first) register; `None` for SCC, which is a
    /// bit, not a register.
    pub fn sgpr_index(self) -> Option<usize> {
        use crate::wave::sreg;
        match self {
            Special::VccLo | Special::Vcc => Some(sreg::VCC_LO),
            Special::VccHi => Some(sreg::VCC_HI),
            Special::M0 => Some(sreg::M0),
            Special::Null => Some(sreg::NULL),
            Special::ExecLo | Special::Exec => Some(sreg::EXEC_LO),
            Special::ExecHi => Some(sreg::EXEC_HI),
            Special::Ttmp(n) => Some(sreg::TTMP0 + n as usize),
            Special::Scc | Special::SrcSharedBase | Special::SrcPrivateBase => None,
        }
    }

    /// Registers covered: 2 for the 64-bit pairs, 1 otherwise.
    pub fn count(self) -> u8 {
        match self {
            Special::Vcc | Special::Exec | Special::SrcSharedBase | Special::SrcPrivateBase => 2,
            _ => 1,
        }
    }

    pub fn name(self) -> String {
        let name = match self {
            Special::VccLo => "vcc_lo",
            Special::VccHi => "vcc_hi",
            Special::Vcc => "vcc",
            Special::M0 => "m0",
            Special::Null => "null",
            Special::ExecLo => "exec_lo",
            Special::ExecHi => "exec_hi",
            Special::Exec => "exec",
            Special::Scc => "scc",
            Special::Ttmp(n) => return format!("ttmp{n}"),
            Special::SrcSharedBase => "src_shared_base",
            Special::SrcPrivateBase => "src_private_base",
        };
        name.to_string()
    }
}

/// A constant operand as the disassembler printed it. Its bits depend on the operand's width,
/// which only the instruction knows: see [`Const::bits32`] and friends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Const {
    /// An inline integer (−16..=64) or a literal printed in decimal or hex. Sign-extends to 64
    /// bits for 64-bit operands.
    Int(i64),
    /// An inline float constant (±0.5, ±1.0, ±2.0, ±4.0, 1/(2π)), encoded per operand width.
    Float(f64),
}

impl Const {
    /// The operand's value as a 32-bit operand (f32 encoding for floats).
    pub fn bits32(self) -> u32 {
        match self {
            Const::Int(v) => v as u32,
            Const::Float(f) => (f as f32).to_bits(),
        }
    }
    /// As a 16-bit operand (f16 encoding for floats); integer values keep their low 16 bits.
    pub fn bits16(self) -> u16 {
        match self {
            Const::Int(v) => v as u16,
            Const::Float(f) => half::f16::from_f64(f).to_bits(),
        }
    }
    /// As a 64-bit operand (f64 encoding for floats, integers sign-extended).
    pub fn bits64(self) -> u64 {
        match self {
            Const::Int(v) => v as u64,
            Const::Float(f) => f.to_bits(),
        }
    }
}

/// Source modifiers of a VOP3 operand: `-v1`, `|v1|`, `-|v1|`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SrcMods {
    pub neg: bool,
    pub abs: bool,
}

/// One operand, in assembly order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Operand {
    /// `s5` (count 1) or `s[4:11]` (count 8).
    Sgpr {
        first: u16,
        count: u8,
        mods: SrcMods,
    },
    /// `v1` (count 1) or `v[0:7]` (count 8).
    Vgpr {
        first: u16,
        count: u8,
        mods: SrcMods,
    },
    Special {
        reg: Special,
        mods: SrcMods,
    },
    Const {
        value: Const,
        mods: SrcMods,
    },
    /// `off`: a global access without a scalar base.
    Off,
}

/// Counts of an `s_waitcnt` (gfx11): `None` for a counter the instruction does not wait on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Waitcnt {
    pub vmcnt: Option<u8>,
    pub expcnt: Option<u8>,
    pub lgkmcnt: Option<u8>,
}

/// Everything printed after the operands.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Mods {
    /// `offset:N` (memory), signed for global/scalar, unsigned for LDS.
    pub offset: i32,
    /// `offset0:`/`offset1:` of `ds_*_2addr_*`, in elements.
    pub offset0: u8,
    pub offset1: u8,
    /// `op_sel:[…]`, bit i for operand i (the destination's bit is the last printed).
    pub op_sel: Option<u8>,
    /// `op_sel_hi:[…]` when printed; each op decides its default when not.
    pub op_sel_hi: Option<u8>,
    pub neg_lo: u8,
    pub neg_hi: u8,
    pub clamp: bool,
    /// `s_waitcnt`'s counters.
    pub waitcnt: Option<Waitcnt>,
    /// Tokens that do not change results (cache policy `glc slc dlc`, `th:…`, `scope:…`,
    /// `s_delay_alu`'s and `s_sendmsg`'s arguments), kept verbatim for printing.
    pub verbatim: Vec<String>,
}

/// One machine instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Inst {
    /// Byte address in the code object (as the disassembler printed it).
    pub addr: u64,
    /// The encoding as printed by the disassembler, in 32-bit words (1–3, literal included).
    /// A VOPD pair's words sit on its first half.
    pub words: Vec<u32>,
    pub op: Op,
    pub form: Form,
    pub operands: Vec<Operand>,
    pub mods: Mods,
    /// The Y half of a VOPD pair (`… :: v_dual_…`); both halves read before either writes.
    pub dual: Option<Box<Inst>>,
}

impl Inst {
    /// Bytes the instruction occupies (the next instruction starts there).
    pub fn size(&self) -> u64 {
        4 * self.words.len() as u64
    }

    /// The mnemonic as the disassembler spells it.
    pub fn mnemonic(&self) -> String {
        let name = self.op.name();
        match self.form {
            Form::Plain => name.to_string(),
            Form::E32 => format!("{name}_e32"),
            Form::E64 => format!("{name}_e64"),
            Form::Dual => format!("v_dual_{}", name.trim_start_matches("v_")),
        }
    }
}
