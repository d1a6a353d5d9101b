//! The resident packing (docs/contract.md §2): weights along K in ExLlama order, zero points along N.

use super::nibble::NibbleOrder;

/// Packs one row of K codes (K a multiple of 8) into K/8 ExLlama words.
pub fn pack_exllama_row(codes: &[u8]) -> Vec<u32> {
    NibbleOrder::ExLlama.pack_run(codes)
}

/// Unpacks K/8 ExLlama words into K codes.
pub fn unpack_exllama_row(words: &[u32]) -> Vec<u8> {
    NibbleOrder::ExLlama.unpack_run(words)
}

/// Packs `[N, groups]` zero points into `[ceil(N/8), groups]` words: row `n` in word `n/8` at
/// bits `4·(n%8)`; when N % 8 != 0 the last word's unused high nibbles are 0.
pub fn pack_zero_points(zeros: &[u8], n: usize, groups: usize) -> Vec<u32> {
    debug_assert_eq!(zeros.len(), n * groups);
    let mut words = vec![0u32; n.div_ceil(8) * groups];
    for (r, row) in zeros.chunks_exact(groups.max(1)).enumerate().take(n) {
        for (g, &z) in row.iter().enumerate() {
            words[(r / 8) * groups + g] |= u32::from(z & 0xF) << (4 * (r % 8));
        }
    }
    words
}

/// The inverse of [`pack_zero_points`]: `[N, groups]` codes (unused nibbles are not read).
pub fn unpack_zero_points(words: &[u32], n: usize, groups: usize) -> Vec<u8> {
    let mut zeros = vec![0u8; n * groups];
    for r in 0..n {
        for g in 0..groups {
            zeros[r * groups + g] = ((words[(r / 8) * groups + g] >> (4 * (r % 8))) & 0xF) as u8;
        }
    }
    zeros
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_point_row_n_lives_in_word_n_over_8() {
        // Every code in every row slot of a [16, 3] tensor, one at a time.
        let (n, groups) = (16, 3);
        for r in 0..n {
            for g in 0..groups {
                for z in 0..16u8 {
                    let mut zeros = vec![0u8; n * groups];
                    zeros[r * groups + g] = z;
                    let words = pack_zero_points(&zeros, n, groups);
                    for (i, &w) in words.iter().enumerate() {
                        let expected = if i == (r / 8) * groups + g {
                            u32::from(z) << (4 * (r % 8))
                        } else {
                            0
                        };
                        assert_eq!(w, expected, "r={r} g={g} z={z} word {i}");
                    }
                    assert_eq!(unpack_zero_points(&words, n, groups), zeros);
                }
            }
        }
    }

    /// N % 8 != 0: ceil(N/8) rows, the last word's unused nibbles 0.
    #[test]
    fn a_ragged_n_packs_into_a_partial_last_word() {
        let (n, groups) = (13, 2);
        let zeros: Vec<u8> = (0..n * groups).map(|i| (i % 15 + 1) as u8).collect();
        let words = pack_zero_points(&zeros, n, groups);
        assert_eq!(words.len(), 2 * groups);
        for g in 0..groups {
            assert_eq!(words[groups + g] >> 20, 0, "group {g}");
        }
        assert_eq!(unpack_zero_points(&words, n, groups), zeros);
    }

    #[test]
    fn exllama_row_round_trips() {
        let codes: Vec<u8> = (0..64).map(|i| ((i * 7 + 3) % 16) as u8).collect();
        let words = pack_exllama_row(&codes);
        assert_eq!(words.len(), 8);
        assert_eq!(unpack_exllama_row(&words), codes);
    }
}
