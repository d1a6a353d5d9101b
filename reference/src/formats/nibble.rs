//! Where each of the eight 4-bit codes of one 32-bit word lives, per format.
//!
//! Every format packs eight codes per word; they differ only in which bit slot holds which
//! element. Keeping the three orders in one table means pack and unpack cannot drift apart.

/// The AWQ interleave (docs/contract.md §3): bit slot `p` holds column `AWQ_ORDER[p]`.
pub const AWQ_ORDER: [usize; 8] = [0, 2, 4, 6, 1, 3, 5, 7];

/// ExLlama shifts (docs/contract.md §2): element `2p` at bits `4p`, element `2p+1` at bits `16+4p`.
pub const EXLLAMA_SHIFTS: [u32; 8] = [0, 16, 4, 20, 8, 24, 12, 28];

/// The AWQ shifts, derived from the order table (so the table stays the single statement of
/// the interleave): element `AWQ_ORDER[p]` at bits `4p`.
const AWQ_SHIFTS: [u32; 8] = {
    let mut shifts = [0u32; 8];
    let mut slot = 0;
    while slot < 8 {
        shifts[AWQ_ORDER[slot]] = 4 * slot as u32;
        slot += 1;
    }
    shifts
};

/// Sequential: element `i` at bits `4i`.
const SEQUENTIAL_SHIFTS: [u32; 8] = [0, 4, 8, 12, 16, 20, 24, 28];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NibbleOrder {
    /// Element `i` at bits `4i` (compressed-tensors, GPTQ).
    Sequential,
    /// The resident order every kernel reads.
    ExLlama,
    /// AWQ: bit slot `p` holds element `AWQ_ORDER[p]`.
    AwqInterleaved,
}

impl NibbleOrder {
    pub const ALL: [NibbleOrder; 3] = [
        NibbleOrder::Sequential,
        NibbleOrder::ExLlama,
        NibbleOrder::AwqInterleaved,
    ];

    /// Bit offset of element `e` (0..8) inside the word.
    pub fn shift(self, e: usize) -> u32 {
        self.shifts()[e]
    }

    /// The bit offsets of elements 0..8 (a table per order: unpacking reads every code of a
    /// layer).
    pub fn shifts(self) -> &'static [u32; 8] {
        match self {
            NibbleOrder::Sequential => &SEQUENTIAL_SHIFTS,
            NibbleOrder::ExLlama => &EXLLAMA_SHIFTS,
            NibbleOrder::AwqInterleaved => &AWQ_SHIFTS,
        }
    }

    /// Packs eight codes; only the low nibble of each is kept (callers validate the range).
    pub fn pack(self, codes: [u8; 8]) -> u32 {
        codes
            .iter()
            .enumerate()
            .fold(0u32, |w, (e, &c)| w | (u32::from(c & 0xF) << self.shift(e)))
    }

    pub fn unpack(self, word: u32) -> [u8; 8] {
        let shifts = self.shifts();
        std::array::from_fn(|e| ((word >> shifts[e]) & 0xF) as u8)
    }

    /// Packs a run of codes (length a multiple of 8) into words.
    pub fn pack_run(self, codes: &[u8]) -> Vec<u32> {
        debug_assert_eq!(codes.len() % 8, 0);
        codes
            .chunks_exact(8)
            .map(|c| self.pack(c.try_into().expect("chunk of 8")))
            .collect()
    }

    /// Runs of words in parallel: a 70B-class projection holds 29 M words, and its conversion
    /// sits on check-model's critical path.
    pub fn unpack_run(self, words: &[u32]) -> Vec<u8> {
        use rayon::prelude::*;
        const RUN: usize = 1 << 14;
        let mut codes = vec![0u8; 8 * words.len()];
        codes
            .par_chunks_mut(8 * RUN)
            .zip(words.par_chunks(RUN))
            .for_each(|(out, run)| {
                for (o, &w) in out.chunks_exact_mut(8).zip(run) {
                    o.copy_from_slice(&self.unpack(w));
                }
            });
        codes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Words written out by hand from the wording of docs/contract.md §2 for codes 1..8 (element e holds e+1),
    /// so that a bug shared by pack and unpack cannot hide behind a round trip.
    #[test]
    fn spec_examples() {
        let codes = [1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(NibbleOrder::Sequential.pack(codes), 0x8765_4321);
        // ExLlama: nibbles from bit 0 up are elements 0,2,4,6,1,3,5,7.
        assert_eq!(NibbleOrder::ExLlama.pack(codes), 0x8642_7531);
        // AWQ: slots hold columns 0,2,4,6,1,3,5,7.
        assert_eq!(NibbleOrder::AwqInterleaved.pack(codes), 0x8642_7531);
    }

    #[test]
    fn every_code_in_every_slot_round_trips_alone() {
        for order in NibbleOrder::ALL {
            for e in 0..8 {
                for code in 0..16u8 {
                    // Other slots carry a distinct background so a leak into them shows.
                    let mut codes: [u8; 8] = std::array::from_fn(|i| (15 - i as u8) ^ 0x5);
                    codes[e] = code;
                    let word = order.pack(codes);
                    assert_eq!(
                        (word >> order.shift(e)) & 0xF,
                        u32::from(code),
                        "{order:?} e={e}"
                    );
                    assert_eq!(order.unpack(word), codes, "{order:?} e={e} code={code}");
                }
            }
        }
    }

    #[test]
    fn shifts_are_a_permutation_of_the_slots() {
        for order in NibbleOrder::ALL {
            let mut slots: Vec<u32> = (0..8).map(|e| order.shift(e)).collect();
            slots.sort_unstable();
            assert_eq!(
                slots,
                (0..8).map(|p| 4 * p).collect::<Vec<_>>(),
                "{order:?}"
            );
        }
    }
}
