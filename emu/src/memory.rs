//! Host memory standing in for the GPU's: global allocations with bounds, and LDS per workgroup.
//!
//! Allocations are placed with a wide unmapped gap between them, so a stray access never lands
//! in a neighbour: every byte read or written must fall inside one allocation, or the access is
//! an [`FaultKind::OutOfBounds`] naming the nearest allocation. This catches out-of-bounds reads,
//! which a guard band only sees when they are written back.

use crate::fault::{Access, FaultKind, Space};

/// Distance between allocations: far beyond any offset a kernel adds to a base.
const GAP: u64 = 1 << 32;
/// Where the first allocation starts (low addresses stay unmapped, so null + offset faults).
const FIRST: u64 = 1 << 40;

/// What `src_shared_base` reads: flat addresses in [`SHARED_APERTURE`, +4 GiB) are LDS
/// offsets (flat loads of `__shared__` pointers), far from every global allocation.
pub const SHARED_APERTURE: u64 = 1 << 56;

/// One allocation of global memory.
#[derive(Clone, Debug)]
pub struct Allocation {
    pub base: u64,
    pub bytes: Vec<u8>,
    /// What it holds, for fault messages (`x`, `qweight`, `kernarg of w4a16_fallback_f16`).
    pub label: String,
    /// initcheck's shadow: one flag per byte, set once the byte is written (empty unless the
    /// memory tracks initialisation, [`GlobalMemory::track_initialisation`]).
    pub initialised: Vec<bool>,
}

impl Allocation {
    /// The offset of `[address, address + len)` in this allocation, if it lies wholly inside.
    pub fn offset_of(&self, address: u64, len: usize) -> Option<usize> {
        let off = usize::try_from(address.checked_sub(self.base)?).ok()?;
        (off.checked_add(len)? <= self.bytes.len()).then_some(off)
    }
}

/// Global memory: allocations sorted by base.
#[derive(Clone, Debug, Default)]
pub struct GlobalMemory {
    allocations: Vec<Allocation>,
    /// initcheck: every allocation keeps which of its bytes were written.
    tracks_initialisation: bool,
}

impl GlobalMemory {
    /// Allocates `len` zeroed bytes and returns the base address.
    pub fn alloc(&mut self, len: usize, label: impl Into<String>) -> u64 {
        let base = self
            .allocations
            .last()
            .map(|a| (a.base + a.bytes.len() as u64 + GAP) & !0xFFFF)
            .unwrap_or(FIRST);
        let initialised = if self.tracks_initialisation {
            vec![false; len]
        } else {
            Vec::new()
        };
        self.allocations.push(Allocation {
            base,
            bytes: vec![0; len],
            label: label.into(),
            initialised,
        });
        base
    }

    /// From now on allocations start uninitialised and writes initialise their bytes (initcheck,
    /// [`crate::sanitize`]); existing allocations count as initialised.
    pub fn track_initialisation(&mut self) {
        if self.tracks_initialisation {
            return;
        }
        self.tracks_initialisation = true;
        for a in &mut self.allocations {
            a.initialised = vec![true; a.bytes.len()];
        }
    }

    pub fn tracks_initialisation(&self) -> bool {
        self.tracks_initialisation
    }

    /// Sets the initialised flags of `[address, address + len)` (bytes outside every
    /// allocation are ignored: the access that wrote them has faulted).
    pub fn mark_initialised(&mut self, address: u64, len: usize) {
        if let Some((i, off)) = self.locate(address, len) {
            let flags = &mut self.allocations[i].initialised;
            if let Some(f) = flags.get_mut(off..off + len) {
                f.fill(true);
            }
        }
    }

    /// The first byte of `[address, address + len)` never written, and its allocation's label;
    /// `None` when every byte was written or initialisation is not tracked.
    pub fn first_uninitialised(&self, address: u64, len: usize) -> Option<(u64, String)> {
        let (i, off) = self.locate(address, len)?;
        let a = &self.allocations[i];
        let p = a
            .initialised
            .get(off..off + len)?
            .iter()
            .position(|f| !*f)?;
        Some((address + p as u64, a.label.clone()))
    }

    /// Copies `len` bytes from `src` to `dst` (device to device), their initialised flags with
    /// them.
    pub fn copy(&mut self, dst: u64, src: u64, len: usize) -> Result<(), FaultKind> {
        let mut data = vec![0u8; len];
        self.read(src, &mut data, 0)?;
        let flags = self
            .locate(src, len)
            .and_then(|(i, off)| self.allocations[i].initialised.get(off..off + len))
            .map(<[bool]>::to_vec);
        self.write(dst, &data, 0)?;
        if let (Some(flags), Some((i, off))) = (flags, self.locate(dst, len))
            && let Some(f) = self.allocations[i].initialised.get_mut(off..off + len)
        {
            f.copy_from_slice(&flags);
        }
        Ok(())
    }

    /// Writes `data` at `address` leaving its bytes uninitialised for initcheck: an output the
    /// host fills with poison before a launch is not data a kernel may read.
    pub fn write_uninitialised(&mut self, address: u64, data: &[u8]) -> Result<(), FaultKind> {
        match self.locate(address, data.len()) {
            Some((i, off)) => {
                let a = &mut self.allocations[i];
                a.bytes[off..off + data.len()].copy_from_slice(data);
                if let Some(f) = a.initialised.get_mut(off..off + data.len()) {
                    f.fill(false);
                }
                Ok(())
            }
            None => Err(self.out_of_bounds(Access::Write, address, data.len(), 0)),
        }
    }

    /// Frees the allocation at `base` (unknown bases are ignored: freeing twice is harmless here).
    pub fn free(&mut self, base: u64) {
        self.allocations.retain(|a| a.base != base);
    }

    pub fn allocation(&self, base: u64) -> Option<&Allocation> {
        self.allocations.iter().find(|a| a.base == base)
    }

    pub fn allocation_mut(&mut self, base: u64) -> Option<&mut Allocation> {
        self.allocations.iter_mut().find(|a| a.base == base)
    }

    /// The allocation holding every byte of `[address, address + len)`, if one does: lets a
    /// wave's accesses be checked against one allocation with integer compares.
    pub fn holding(&self, address: u64, len: usize) -> Option<&Allocation> {
        self.locate(address, len).map(|(i, _)| &self.allocations[i])
    }

    /// [`GlobalMemory::holding`], writable.
    pub fn holding_mut(&mut self, address: u64, len: usize) -> Option<&mut Allocation> {
        self.locate(address, len)
            .map(|(i, _)| &mut self.allocations[i])
    }

    fn locate(&self, address: u64, len: usize) -> Option<(usize, usize)> {
        let i = self
            .allocations
            .partition_point(|a| a.base <= address)
            .checked_sub(1)?;
        let a = &self.allocations[i];
        let off = (address - a.base) as usize;
        (off.checked_add(len)? <= a.bytes.len()).then_some((i, off))
    }

    fn out_of_bounds(&self, access: Access, address: u64, len: usize, lane: u8) -> FaultKind {
        let nearest = self
            .allocations
            .iter()
            .map(|a| {
                let end = a.base + a.bytes.len() as u64;
                let (distance, text) = if address < a.base {
                    (a.base - address, format!("{} B before", a.base - address))
                } else {
                    (
                        address + len as u64 - end,
                        format!("{} B past the end of", address + len as u64 - end),
                    )
                };
                (
                    distance,
                    format!("{text} `{}` at {:#x}, {} B", a.label, a.base, a.bytes.len()),
                )
            })
            .min_by_key(|(d, _)| *d)
            .map(|(_, t)| t);
        FaultKind::OutOfBounds {
            space: Space::Global,
            access,
            address,
            bytes: len as u32,
            lane,
            nearest,
        }
    }

    /// Reads `out.len()` bytes at `address` for `lane`.
    pub fn read(&self, address: u64, out: &mut [u8], lane: u8) -> Result<(), FaultKind> {
        match self.locate(address, out.len()) {
            Some((i, off)) => {
                out.copy_from_slice(&self.allocations[i].bytes[off..off + out.len()]);
                Ok(())
            }
            None => Err(self.out_of_bounds(Access::Read, address, out.len(), lane)),
        }
    }

    /// Writes `data` at `address` for `lane` (initialising the bytes, when tracked).
    pub fn write(&mut self, address: u64, data: &[u8], lane: u8) -> Result<(), FaultKind> {
        match self.locate(address, data.len()) {
            Some((i, off)) => {
                let a = &mut self.allocations[i];
                a.bytes[off..off + data.len()].copy_from_slice(data);
                if let Some(f) = a.initialised.get_mut(off..off + data.len()) {
                    f.fill(true);
                }
                Ok(())
            }
            None => Err(self.out_of_bounds(Access::Write, address, data.len(), lane)),
        }
    }
}

/// A workgroup's LDS: the kernel's static size plus the launch's dynamic size. Its contents are
/// undefined at start on hardware, so it starts poisoned here.
#[derive(Clone, Debug)]
pub struct Lds {
    pub bytes: Vec<u8>,
}

impl Lds {
    pub fn new(len: usize) -> Lds {
        let mut bytes = crate::wave::POISON.to_le_bytes().repeat(len.div_ceil(4));
        bytes.truncate(len);
        Lds { bytes }
    }

    fn check(
        &self,
        access: Access,
        address: u32,
        len: usize,
        lane: u8,
    ) -> Result<usize, FaultKind> {
        let a = address as usize;
        if a.checked_add(len)
            .is_some_and(|end| end <= self.bytes.len())
        {
            Ok(a)
        } else {
            Err(FaultKind::OutOfBounds {
                space: Space::Lds,
                access,
                address: address as u64,
                bytes: len as u32,
                lane,
                nearest: Some(format!("the workgroup has {} B of LDS", self.bytes.len())),
            })
        }
    }

    pub fn read(&self, address: u32, out: &mut [u8], lane: u8) -> Result<(), FaultKind> {
        let a = self.check(Access::Read, address, out.len(), lane)?;
        out.copy_from_slice(&self.bytes[a..a + out.len()]);
        Ok(())
    }

    pub fn write(&mut self, address: u32, data: &[u8], lane: u8) -> Result<(), FaultKind> {
        let a = self.check(Access::Write, address, data.len(), lane)?;
        self.bytes[a..a + data.len()].copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accesses_inside_pass_and_one_byte_past_faults_naming_the_allocation() {
        let mut m = GlobalMemory::default();
        let a = m.alloc(16, "x");
        let b = m.alloc(8, "w");
        m.write(a + 12, &[1, 2, 3, 4], 0).unwrap();
        let mut out = [0u8; 4];
        m.read(a + 12, &mut out, 0).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        let err = m.read(a + 13, &mut out, 5).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("1 B past the end of `x`"), "{text}");
        assert!(text.contains("lane 5"), "{text}");
        assert!(m.read(b - 1, &mut [0u8; 1], 0).is_err());
        assert!(m.read(0x40, &mut [0u8; 1], 0).is_err());
    }

    #[test]
    fn lds_bounds_are_the_workgroups_size() {
        let mut l = Lds::new(64);
        l.write(60, &[9; 4], 0).unwrap();
        assert!(l.write(61, &[9; 4], 3).is_err());
    }
}
