//! Poison and guard (ARCHITECTURE.md rule 7): an output buffer is laid out as
//! `guard | payload | guard`, the payload filled with the dtype's NaN poison and the guards
//! with a position-dependent byte pattern. After the launch the downloaded buffer tells what
//! the kernel wrote: every logical element, nothing between rows, nothing outside.

use crate::tensor::TensorView;

/// Bytes of guard band on each side of an output.
pub const GUARD_BYTES: usize = 4096;

/// The guard pattern at byte `i` of a band. Position-dependent, so a kernel that copies one
/// part of a guard over another still shows, and never a repeating u16 that looks like data.
pub fn guard_byte(i: usize) -> u8 {
    (0xA5u8 ^ (i as u8).wrapping_mul(0x3B)).rotate_left((i >> 8) as u32 & 7)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GuardSide {
    Before,
    After,
}

/// Bytes of one guard band that changed: offsets are from the start of that band.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GuardViolation {
    pub side: GuardSide,
    pub first: usize,
    pub last: usize,
    pub bytes_changed: usize,
}

impl std::fmt::Display for GuardViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let side = match self.side {
            GuardSide::Before => "before",
            GuardSide::After => "after",
        };
        write!(
            f,
            "{} bytes written into the guard band {side} the output (band bytes {}..={})",
            self.bytes_changed, self.first, self.last
        )
    }
}

/// Where an output sits in its guarded buffer and which u16 elements are logical.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputLayout {
    pub guard_bytes: usize,
    /// Bytes behind the output's base (the view's `bytes_available`, rounded up to a u16).
    pub payload_bytes: usize,
    pub byte_offset: usize,
    pub rows: usize,
    pub cols: usize,
    /// Elements between rows.
    pub row_stride: usize,
    pub poison: u16,
}

/// What the kernel did to its output buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputReport {
    /// The logical `[rows, cols]` elements, compact.
    pub bits: Vec<u16>,
    /// The whole payload as u16 (padding included), for callers that feed it on unchanged.
    pub strided: Vec<u16>,
    pub guard_violations: Vec<GuardViolation>,
    /// u16 slots of the payload outside the logical elements that no longer hold the poison.
    pub stray_writes: usize,
    /// Logical elements still holding the exact poison bits (never written).
    pub unwritten: usize,
}

impl OutputReport {
    /// No write outside the logical output.
    pub fn confined(&self) -> bool {
        self.guard_violations.is_empty() && self.stray_writes == 0
    }
}

impl OutputLayout {
    /// The layout for a 2-D output view of 2-byte elements.
    pub fn for_view(view: &TensorView, poison: u16) -> Self {
        OutputLayout {
            guard_bytes: GUARD_BYTES,
            payload_bytes: view.bytes_available.next_multiple_of(2),
            byte_offset: view.byte_offset,
            rows: view.shape.first().copied().unwrap_or(0),
            cols: view.shape.get(1).copied().unwrap_or(1),
            row_stride: view.strides.first().copied().unwrap_or(0),
            poison,
        }
    }

    /// The layout for [`super::Allocation::Exact`]: no guard bands, and the payload ends at the
    /// view's last element (`required_bytes`), so a write past it leaves the allocation.
    pub fn exact_for_view(view: &TensorView, poison: u16) -> Self {
        OutputLayout {
            guard_bytes: 0,
            payload_bytes: view
                .required_bytes()
                .unwrap_or(view.bytes_available)
                .next_multiple_of(2),
            ..Self::for_view(view, poison)
        }
    }

    pub fn total_bytes(&self) -> usize {
        2 * self.guard_bytes + self.payload_bytes
    }

    /// Byte offset of the output's base inside the guarded buffer.
    pub fn base_offset(&self) -> usize {
        self.guard_bytes
    }

    /// Guard, poisoned payload, guard.
    pub fn initial_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.total_bytes());
        out.extend((0..self.guard_bytes).map(guard_byte));
        let start = out.len();
        out.resize(start + self.payload_bytes, 0);
        let p = self.poison.to_le_bytes();
        out[start..]
            .chunks_exact_mut(2)
            .for_each(|c| c.copy_from_slice(&p));
        out.extend((0..self.guard_bytes).map(guard_byte));
        out
    }

    /// Guard, `payload` (u16, little-endian; the poison past its end), guard: the buffer a
    /// kernel that wrote exactly `payload` leaves.
    pub fn bytes_with_payload(&self, payload: &[u16]) -> Vec<u8> {
        let mut out = self.initial_bytes();
        let start = self.guard_bytes;
        out[start..start + self.payload_bytes]
            .chunks_exact_mut(2)
            .zip(payload)
            .for_each(|(c, v)| c.copy_from_slice(&v.to_le_bytes()));
        out
    }

    /// The payload a kernel that wrote `[rows, cols]` of `bits` (compact) and nothing else
    /// leaves: each element at its row, the poison everywhere else. `None` where the rows do
    /// not lie whole inside the payload or `bits` is not `rows × cols` long.
    pub fn payload_of(&self, bits: &[u16]) -> Option<Vec<u16>> {
        if bits.len() != self.rows * self.cols {
            return None;
        }
        let cols = self.cols;
        self.payload_with_rows(|r, out| out.copy_from_slice(&bits[r * cols..(r + 1) * cols]))
    }

    /// As [`Self::payload_of`], each row written in place by `row(r, out)` (in parallel):
    /// the expected copy of a 10⁸-weight layer goes straight into its payload, never held
    /// compact beside it.
    pub fn payload_with_rows(&self, row: impl Fn(usize, &mut [u16]) + Sync) -> Option<Vec<u16>> {
        use rayon::prelude::*;
        let mut payload = vec![self.poison; self.payload_bytes / 2];
        let base = self.rows_in_place(payload.len())?;
        if self.rows == 0 || self.cols == 0 {
            return Some(payload);
        }
        // Row r starts at base + r·stride; each chunk of `stride` elements from `base` holds
        // one row at its head (the last chunk may be shorter, but holds `cols`).
        payload[base..]
            .par_chunks_mut(self.row_stride.max(self.cols))
            .take(self.rows)
            .enumerate()
            .for_each(|(r, chunk)| row(r, &mut chunk[..self.cols]));
        Some(payload)
    }

    /// As [`Self::initial_bytes`], with `fill(row, col)` overriding the poison of logical
    /// elements (a bias prefill for `beta = 1` GEMMs).
    pub fn initial_bytes_with(&self, fill: impl Fn(usize, usize) -> Option<u16>) -> Vec<u8> {
        let mut out = self.initial_bytes();
        for r in 0..self.rows {
            for c in 0..self.cols {
                if let Some(v) = fill(r, c) {
                    let at = self.guard_bytes + self.element_byte(r, c);
                    out[at..at + 2].copy_from_slice(&v.to_le_bytes());
                }
            }
        }
        out
    }

    fn element_byte(&self, r: usize, c: usize) -> usize {
        self.byte_offset + (r * self.row_stride + c) * 2
    }

    /// Reads back a downloaded buffer. Short buffers are treated as fully overwritten tails.
    pub fn inspect(&self, buf: &[u8]) -> OutputReport {
        let band = |start: usize, side| -> Option<GuardViolation> {
            let mut first = None;
            let mut last = 0;
            let mut changed = 0;
            for i in 0..self.guard_bytes {
                if buf.get(start + i) != Some(&guard_byte(i)) {
                    first.get_or_insert(i);
                    last = i;
                    changed += 1;
                }
            }
            first.map(|first| GuardViolation {
                side,
                first,
                last,
                bytes_changed: changed,
            })
        };
        let guard_violations: Vec<GuardViolation> = [
            band(0, GuardSide::Before),
            band(self.guard_bytes + self.payload_bytes, GuardSide::After),
        ]
        .into_iter()
        .flatten()
        .collect();

        let payload = buf
            .get(self.guard_bytes..(self.guard_bytes + self.payload_bytes).min(buf.len()))
            .unwrap_or(&[]);
        let strided = self.payload_elements(payload);

        let (bits, unwritten, stray_writes) = match self.rows_in_place(strided.len()) {
            Some(base) => self.read_rows(&strided, base),
            None => self.read_elements(&strided),
        };
        OutputReport {
            bits,
            strided,
            guard_violations,
            stray_writes,
            unwritten,
        }
    }

    /// Where row 0 starts in the payload (in elements) when every row lies whole inside it,
    /// rows apart by at least their length and element-aligned: the layout of every view a
    /// kernel writes. `None` sends the rest to [`Self::read_elements`].
    fn rows_in_place(&self, payload_elements: usize) -> Option<usize> {
        if !self.byte_offset.is_multiple_of(2) || (self.rows > 1 && self.row_stride < self.cols) {
            return None;
        }
        let base = self.byte_offset / 2;
        let end = match self.rows {
            0 => base,
            r => base + (r - 1) * self.row_stride + self.cols,
        };
        (end <= payload_elements).then_some(base)
    }

    /// The payload as elements, a missing tail read as overwritten (not the poison); in
    /// parallel chunks (a dequant copy is 10⁸ elements).
    fn payload_elements(&self, payload: &[u8]) -> Vec<u16> {
        use rayon::prelude::*;
        const CHUNK: usize = 1 << 16;
        let mut strided = vec![!self.poison; self.payload_bytes / 2];
        let have = (payload.len() / 2).min(strided.len());
        strided[..have]
            .par_chunks_mut(CHUNK)
            .zip(payload[..2 * have].par_chunks(2 * CHUNK))
            .for_each(|(out, bytes)| {
                for (o, c) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *o = u16::from_le_bytes([c[0], c[1]]);
                }
            });
        strided
    }

    /// The logical elements row by row, the poison left in them, and the non-poison values
    /// between and around the rows (stray writes): what [`Self::read_elements`] finds, rows
    /// in parallel.
    fn read_rows(&self, strided: &[u16], base: usize) -> (Vec<u16>, usize, usize) {
        use rayon::prelude::*;
        let poison = self.poison;
        let count = |s: &[u16], want: bool| s.iter().filter(|&&v| (v == poison) == want).count();
        let (rows, cols, stride) = (self.rows, self.cols, self.row_stride);
        let mut bits = vec![0u16; rows * cols];
        if cols > 0 {
            bits.par_chunks_mut(cols).enumerate().for_each(|(r, out)| {
                let start = base + r * stride;
                out.copy_from_slice(&strided[start..start + cols]);
            });
        }
        // Each row with the gap after it (to the next row's start, or the payload's end).
        let (unwritten, stray_after) = (0..rows)
            .into_par_iter()
            .map(|r| {
                let start = base + r * stride;
                let next = if r + 1 < rows {
                    start + stride
                } else {
                    strided.len()
                };
                let gap = &strided[(start + cols).min(next)..next];
                (
                    count(&strided[start..start + cols], true),
                    count(gap, false),
                )
            })
            .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        let before = if rows == 0 { strided.len() } else { base };
        let stray = stray_after + count(&strided[..before.min(strided.len())], false);
        (bits, unwritten, stray)
    }

    /// Element by element, for any layout: each logical element's value (the poison where it
    /// lies past the payload), the poison left, and the non-poison values outside them.
    fn read_elements(&self, strided: &[u16]) -> (Vec<u16>, usize, usize) {
        let mut logical = vec![false; strided.len()];
        let mut bits = Vec::with_capacity(self.rows * self.cols);
        let mut unwritten = 0;
        for r in 0..self.rows {
            for c in 0..self.cols {
                let slot = self.element_byte(r, c) / 2;
                let v = strided.get(slot).copied().unwrap_or(self.poison);
                if let Some(l) = logical.get_mut(slot) {
                    *l = true;
                }
                if v == self.poison {
                    unwritten += 1;
                }
                bits.push(v);
            }
        }
        let stray_writes = strided
            .iter()
            .zip(&logical)
            .filter(|(v, l)| !**l && **v != self.poison)
            .count();
        (bits, unwritten, stray_writes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{ElemType, TensorView};

    fn layout() -> OutputLayout {
        // Y [3, 5] with row stride 8: 2·8 + 5 = 21 elements = 42 bytes
        OutputLayout::for_view(&TensorView::matrix(ElemType::F16, 3, 5, 8, 42), 0x7E01)
    }

    fn write(buf: &mut [u8], l: &OutputLayout, r: usize, c: usize, v: u16) {
        let at = l.base_offset() + l.element_byte(r, c);
        buf[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }

    /// Rows land at their stride, the poison stays between them and after the last; the rows
    /// written in place equal the compact copy placed; a copy of the wrong length is refused.
    #[test]
    fn payload_places_rows_at_their_stride() {
        let l = layout();
        let bits: Vec<u16> = (1..=15).collect();
        let p = l.payload_of(&bits).unwrap();
        assert_eq!(p.len(), 21);
        for (i, &v) in p.iter().enumerate() {
            let (r, c) = (i / 8, i % 8);
            let want = if c < 5 {
                (r * 5 + c + 1) as u16
            } else {
                0x7E01
            };
            assert_eq!(v, want, "element {i}");
        }
        let rows = l.payload_with_rows(|r, out| {
            for (c, o) in out.iter_mut().enumerate() {
                *o = (r * 5 + c + 1) as u16;
            }
        });
        assert_eq!(rows.as_ref(), Some(&p));
        assert_eq!(l.payload_of(&bits[1..]), None);
        // An offset view: the rows start behind the offset.
        let off = OutputLayout {
            byte_offset: 4,
            payload_bytes: 46,
            ..l.clone()
        };
        let p = off.payload_of(&bits).unwrap();
        assert_eq!((p[0], p[1], p[2], p[10]), (0x7E01, 0x7E01, 1, 6));
    }

    #[test]
    fn untouched_buffer_is_all_unwritten_and_confined() {
        let l = layout();
        let rep = l.inspect(&l.initial_bytes());
        assert!(rep.confined());
        assert_eq!(rep.unwritten, 15);
        assert_eq!(rep.bits, vec![0x7E01; 15]);
    }

    #[test]
    fn full_write_is_clean_and_compacted() {
        let l = layout();
        let mut buf = l.initial_bytes();
        for r in 0..3 {
            for c in 0..5 {
                write(&mut buf, &l, r, c, (r * 10 + c) as u16);
            }
        }
        let rep = l.inspect(&buf);
        assert!(rep.confined());
        assert_eq!(rep.unwritten, 0);
        assert_eq!(rep.bits[7], 12);
        assert_eq!(
            rep.strided[8], 10,
            "row 1 starts at element 8 of the payload"
        );
    }

    #[test]
    fn writes_past_either_end_hit_the_guards() {
        let l = layout();
        let mut buf = l.initial_bytes();
        let after = l.guard_bytes + l.payload_bytes;
        buf[after] ^= 0xFF;
        buf[after + 9] ^= 0x01;
        buf[l.guard_bytes - 1] ^= 0x80;
        let rep = l.inspect(&buf);
        assert_eq!(rep.guard_violations.len(), 2);
        let a = rep
            .guard_violations
            .iter()
            .find(|g| g.side == GuardSide::After)
            .unwrap();
        assert_eq!((a.first, a.last, a.bytes_changed), (0, 9, 2));
        let b = rep
            .guard_violations
            .iter()
            .find(|g| g.side == GuardSide::Before)
            .unwrap();
        assert_eq!((b.first, b.bytes_changed), (GUARD_BYTES - 1, 1));
        assert!(!rep.confined());
    }

    #[test]
    fn writes_into_row_padding_are_stray() {
        let l = layout();
        let mut buf = l.initial_bytes();
        // element 6 of row 0 lies in the padding between row 0 (cols 0..5) and row 1 (at 8)
        let at = l.base_offset() + 6 * 2;
        buf[at..at + 2].copy_from_slice(&0u16.to_le_bytes());
        let rep = l.inspect(&buf);
        assert!(rep.guard_violations.is_empty());
        assert_eq!(rep.stray_writes, 1);
        assert!(!rep.confined());
    }

    #[test]
    fn truncated_download_counts_as_damaged() {
        let l = layout();
        let buf = l.initial_bytes();
        let rep = l.inspect(&buf[..l.guard_bytes + 10]);
        assert!(
            rep.guard_violations
                .iter()
                .any(|g| g.side == GuardSide::After && g.bytes_changed == GUARD_BYTES)
        );
    }

    #[test]
    fn prefill_overrides_only_logical_elements() {
        let l = layout();
        let buf = l.initial_bytes_with(|r, c| Some((r * 5 + c) as u16));
        let rep = l.inspect(&buf);
        assert_eq!(rep.unwritten, 0);
        assert_eq!(rep.stray_writes, 0);
        assert_eq!(rep.bits, (0..15).collect::<Vec<u16>>());
    }

    #[test]
    fn an_exact_layout_has_no_slack_and_still_sees_stray_writes() {
        // Y [3, 5], row stride 8, 42 bytes behind the base: the extent is (2·8 + 5)·2 = 42.
        let view = TensorView::matrix(ElemType::F16, 3, 5, 8, 64);
        let l = OutputLayout::exact_for_view(&view, 0x7E01);
        assert_eq!(
            (l.guard_bytes, l.payload_bytes, l.total_bytes()),
            (0, 42, 42)
        );
        assert_eq!(l.base_offset(), 0);
        let mut buf = l.initial_bytes();
        write(&mut buf, &l, 2, 4, 7);
        let at = 6 * 2; // row 0's padding
        buf[at..at + 2].copy_from_slice(&0u16.to_le_bytes());
        let rep = l.inspect(&buf);
        assert!(rep.guard_violations.is_empty());
        assert_eq!((rep.stray_writes, rep.unwritten), (1, 14));
        assert_eq!(*rep.bits.last().unwrap(), 7);
    }

    #[test]
    fn guard_pattern_is_not_periodic_in_u16() {
        let words: std::collections::HashSet<u16> = (0..GUARD_BYTES / 2)
            .map(|i| u16::from_le_bytes([guard_byte(2 * i), guard_byte(2 * i + 1)]))
            .collect();
        assert!(
            words.len() > 64,
            "guard pattern should not be a short repeating word"
        );
    }

    /// Row by row reads what element by element reads, on every small layout: element-aligned
    /// or not, rows apart by more, exactly or less than their length (overlapping), whole in
    /// the payload or running past it, with the poison, stray values and written values
    /// anywhere.
    #[test]
    fn reading_rows_agrees_with_reading_elements() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut fast = 0;
        for _ in 0..20_000 {
            let cols = next(6);
            let l = OutputLayout {
                guard_bytes: 0,
                payload_bytes: 2 * next(40),
                byte_offset: next(9),
                rows: next(5),
                cols,
                row_stride: (cols + next(4)).saturating_sub(1),
                poison: 0x7E01,
            };
            let strided: Vec<u16> = (0..l.payload_bytes / 2)
                .map(|_| [0x7E01, 0x7E01, 0x3C00, 0x0000][next(4)])
                .collect();
            let general = l.read_elements(&strided);
            if let Some(base) = l.rows_in_place(strided.len()) {
                assert_eq!(l.read_rows(&strided, base), general, "{l:?}");
                fast += 1;
            }
        }
        assert!(fast > 5_000, "the row path ran {fast} times");
    }
}
