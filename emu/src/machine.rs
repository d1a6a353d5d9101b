//! The declared machine of each AMD target (compute units, clocks, memory bandwidth, WMMA and
//! VALU rates), each figure with its source, and a **model** of a launch's time from its
//! [`Counters`]. The model is a roofline-style bound (the slowest of memory, WMMA, VALU and LDS
//! at their peak rates), not a measurement, and everything that shows it says "model".

use crate::counters::Counters;

/// One declared figure and where it comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Figure {
    pub value: f64,
    pub source: &'static str,
}

/// A target's machine as AMD's product pages declare it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Machine {
    pub gfx: &'static str,
    pub product: &'static str,
    pub compute_units: Figure,
    /// Peak (boost) engine clock, MHz.
    pub clock_mhz: Figure,
    /// Peak memory bandwidth, GB/s.
    pub memory_gbps: Figure,
    /// Dense fp16/bf16 matrix (WMMA) FLOP per CU per clock.
    pub wmma_flop_per_cu_clk: Figure,
    /// wave32 VALU instructions issued per CU per clock (two SIMD32, one each; VOPD
    /// dual issue not counted).
    pub valu_wave_insts_per_cu_clk: Figure,
    /// LDS bytes per CU per clock.
    pub lds_bytes_per_cu_clk: Figure,
}

const RDNA3_VALU: Figure = Figure {
    value: 2.0,
    source: "AMD RDNA3 ISA Reference Guide §1 (a CU has two SIMD32 units; one wave32 VALU instruction per SIMD per clock)",
};
const LDS_RATE: Figure = Figure {
    value: 128.0,
    source: "model assumption: 32 banks × 4 B per clock per CU (docs/perf-counters.md, the LDS bank model)",
};

/// The three targets' machines.
pub const MACHINES: [Machine; 3] = [
    Machine {
        gfx: "gfx1100",
        product: "AMD Radeon RX 7900 XTX",
        compute_units: Figure {
            value: 96.0,
            source: "amd.com product page, Radeon RX 7900 XTX: 96 compute units",
        },
        clock_mhz: Figure {
            value: 2500.0,
            source: "amd.com product page, Radeon RX 7900 XTX: boost clock up to 2500 MHz",
        },
        memory_gbps: Figure {
            value: 960.0,
            source: "amd.com product page, Radeon RX 7900 XTX: 384-bit GDDR6 at 20 Gbps, 960 GB/s",
        },
        wmma_flop_per_cu_clk: Figure {
            value: 512.0,
            source: "amd.com product page, RX 7900 XTX: 122.8 TFLOPS peak FP16 = 96 CU × 2.5 GHz × 512",
        },
        valu_wave_insts_per_cu_clk: RDNA3_VALU,
        lds_bytes_per_cu_clk: LDS_RATE,
    },
    Machine {
        gfx: "gfx1151",
        product: "AMD Ryzen AI Max+ 395 (Radeon 8060S, Strix Halo)",
        compute_units: Figure {
            value: 40.0,
            source: "amd.com product page, Ryzen AI Max+ 395: Radeon 8060S, 40 graphics cores (CUs)",
        },
        clock_mhz: Figure {
            value: 2900.0,
            source: "amd.com product page, Ryzen AI Max+ 395: graphics frequency up to 2900 MHz",
        },
        memory_gbps: Figure {
            value: 256.0,
            source: "amd.com product page, Ryzen AI Max+ 395: 256-bit LPDDR5X-8000 (8000 MT/s × 32 B = 256 GB/s)",
        },
        wmma_flop_per_cu_clk: Figure {
            value: 512.0,
            source: "RDNA3.5 keeps RDNA3's WMMA rate (512 dense FP16 FLOP/CU/clk): an assumption, as for gfx1100",
        },
        valu_wave_insts_per_cu_clk: RDNA3_VALU,
        lds_bytes_per_cu_clk: LDS_RATE,
    },
    Machine {
        gfx: "gfx1201",
        product: "AMD Radeon RX 9070 XT",
        compute_units: Figure {
            value: 64.0,
            source: "amd.com product page, Radeon RX 9070 XT: 64 compute units",
        },
        clock_mhz: Figure {
            value: 2970.0,
            source: "amd.com product page, Radeon RX 9070 XT: boost clock up to 2970 MHz",
        },
        memory_gbps: Figure {
            value: 640.0,
            source: "amd.com product page, Radeon RX 9070 XT: 256-bit GDDR6 at 20 Gbps (640 GB/s)",
        },
        wmma_flop_per_cu_clk: Figure {
            value: 1024.0,
            source: "amd.com product page, RX 9070 XT: 194.7 TFLOPS dense FP16 matrix = 64 CU × 2.97 GHz × 1024",
        },
        valu_wave_insts_per_cu_clk: Figure {
            value: 2.0,
            source: "AMD RDNA4 ISA Reference Guide §1 (two SIMD32 per CU, as RDNA3)",
        },
        lds_bytes_per_cu_clk: LDS_RATE,
    },
];

/// FLOP of one `v_wmma_f32_16x16x16_*`: 16·16·16 multiply-adds.
pub const WMMA_FLOP: f64 = 2.0 * 16.0 * 16.0 * 16.0;

/// A launch's modelled time and which part bounds it. A **model**: not a measurement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelTime {
    pub memory_us: f64,
    pub wmma_us: f64,
    pub valu_us: f64,
    pub lds_us: f64,
}

impl ModelTime {
    /// The bound: the slowest part.
    pub fn us(&self) -> f64 {
        self.memory_us
            .max(self.wmma_us)
            .max(self.valu_us)
            .max(self.lds_us)
    }

    /// Which part bounds the model (`memory`, `wmma`, `valu`, `lds`).
    pub fn bound_by(&self) -> &'static str {
        let t = self.us();
        if t == self.memory_us {
            "memory"
        } else if t == self.wmma_us {
            "wmma"
        } else if t == self.valu_us {
            "valu"
        } else {
            "lds"
        }
    }
}

impl Machine {
    /// The declared machine of `gfx`, if it is one of the three.
    pub fn of(gfx: &str) -> Option<&'static Machine> {
        MACHINES.iter().find(|m| m.gfx == gfx)
    }

    /// The model time of a launch that counted `c`: global bytes at the memory bandwidth,
    /// WMMA FLOP at the matrix rate, VALU issues (WMMA excluded) and LDS bytes plus bank-conflict
    /// cycles at the whole GPU's rates.
    pub fn model(&self, c: &Counters) -> ModelTime {
        let clk_hz = self.clock_mhz.value * 1e6;
        let cus = self.compute_units.value;
        let us = |seconds: f64| seconds * 1e6;
        let bytes = (c.global_read_bytes + c.global_write_bytes) as f64;
        ModelTime {
            memory_us: us(bytes / (self.memory_gbps.value * 1e9)),
            wmma_us: us(
                c.wmma as f64 * WMMA_FLOP / (self.wmma_flop_per_cu_clk.value * cus * clk_hz)
            ),
            valu_us: us(c.valu.saturating_sub(c.wmma) as f64
                / (self.valu_wave_insts_per_cu_clk.value * cus * clk_hz)),
            lds_us: us((c.lds_bytes as f64 / self.lds_bytes_per_cu_clk.value
                + c.lds_bank_conflict as f64)
                / (cus * clk_hz)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_target_has_a_machine_and_a_memory_bound_copy_is_bytes_over_bandwidth() {
        for gfx in ["gfx1100", "gfx1151", "gfx1201"] {
            let m = Machine::of(gfx).unwrap();
            assert!(!m.compute_units.source.is_empty());
        }
        let m = Machine::of("gfx1151").unwrap();
        let c = Counters {
            global_read_bytes: 256_000,
            ..Counters::default()
        };
        let t = m.model(&c);
        assert!((t.us() - 1.0).abs() < 1e-9, "{t:?}");
        assert_eq!(t.bound_by(), "memory");
    }
}
