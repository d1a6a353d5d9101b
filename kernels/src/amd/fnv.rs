//! The cache key's hash.

/// FNV-1a, 64 bit: stable across Rust versions and machines, unlike `DefaultHasher`.
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    pub(crate) fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // Length-delimit fields so ("ab","c") and ("a","bc") differ.
        self.0 ^= bytes.len() as u64;
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
    pub(crate) fn write_str(&mut self, s: &str) {
        self.write(s.as_bytes());
    }
    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}
