//! initcheck's LDS shadow: per byte, the workgroup generation that last wrote it (a byte whose
//! tag is not the running workgroup's is uninitialised, so a new workgroup needs no clear).

#[derive(Debug, Default)]
pub(super) struct LdsInit {
    written: Vec<u32>,
    generation: u32,
}

impl LdsInit {
    pub(super) fn begin(&mut self, lds_bytes: usize, generation: u32) {
        if self.written.len() < lds_bytes {
            self.written.resize(lds_bytes, 0);
        }
        self.generation = generation;
    }

    /// The bytes `[address, address + len)` are written.
    #[inline]
    pub(super) fn mark(&mut self, address: u32, len: usize) {
        let start = (address as usize).min(self.written.len());
        let end = (start + len).min(self.written.len());
        self.written[start..end].fill(self.generation);
    }

    /// The first byte of `[address, address + len)` nothing has written, if one is.
    #[inline]
    pub(super) fn first_unset(&self, address: u32, len: usize) -> Option<u32> {
        let start = (address as usize).min(self.written.len());
        let end = (start + len).min(self.written.len());
        self.written[start..end]
            .iter()
            .position(|g| *g != self.generation)
            .map(|i| (start + i) as u32)
    }
}
