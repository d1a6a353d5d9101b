//! Pristine device copies of launch inputs, found by their content: a layer's weights (and a
//! batch's X) go up once and every later launch that takes the same bytes gets a fresh buffer
//! filled by a device-to-device copy instead of another host upload. The checked launch flow
//! stays as it was — every launch has its own input buffers of the same sizes, so a kernel that
//! writes into its inputs spoils only its own launch — while the bytes crossing the host link
//! fall from every input of every launch to each distinct input once. The pristine copies are
//! never bound to a kernel.

use std::collections::VecDeque;

/// Inputs smaller than this are uploaded as they are: the hash and the copy would cost about
/// what the upload does.
pub const MIN_CACHED_BYTES: usize = 1 << 20;

/// An input's identity: its length and the 128-bit XXH3 of its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InputKey {
    len: usize,
    hash: u128,
}

impl InputKey {
    pub fn of(bytes: &[u8]) -> InputKey {
        InputKey {
            len: bytes.len(),
            hash: xxhash_rust::xxh3::xxh3_128(bytes),
        }
    }

    /// The key of `len` bytes a generator makes from `fields` alone (an output's poison and
    /// guard bands), found without making them; hashed in a domain of its own.
    pub fn described(len: usize, fields: &[u64]) -> InputKey {
        let mut bytes = b"w4a16 described bytes".to_vec();
        bytes.extend(fields.iter().flat_map(|f| f.to_le_bytes()));
        InputKey {
            len,
            hash: xxhash_rust::xxh3::xxh3_128(&bytes),
        }
    }

    /// The 128-bit XXH3 of `values` as little-endian bytes (what an upload of them sends): on
    /// a little-endian host the values' own bytes, with no copy.
    pub fn hash_u16(values: &[u16]) -> u128 {
        xxhash_rust::xxh3::xxh3_128(&crate::launch::HostBytes::U16(values).le_bytes())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The keys of host slices hashed during one rotating benchmark. Its copies all borrow the same
/// host bytes for the whole call, so there a slice's address and length name its content and
/// each distinct input is hashed once instead of once per copy. Made per call and dropped with
/// it: outside such a borrow, an address says nothing about the bytes behind it.
#[derive(Default)]
pub struct HashedSlices(Vec<(usize, usize, InputKey)>);

impl HashedSlices {
    /// `bytes`' key, hashed the first time this call sees the slice.
    pub fn key_of(&mut self, bytes: &[u8]) -> InputKey {
        let at = (bytes.as_ptr() as usize, bytes.len());
        if let Some(&(_, _, key)) = self.0.iter().find(|(p, l, _)| (*p, *l) == at) {
            return key;
        }
        let key = InputKey::of(bytes);
        self.0.push((at.0, at.1, key));
        key
    }
}

/// Pristine copies by content, the least recently used evicted first past `cap_bytes`.
pub struct InputCache<B> {
    entries: VecDeque<(InputKey, B)>,
    bytes: usize,
    cap_bytes: usize,
    min_bytes: usize,
    /// Launch inputs served from a pristine copy, and uploaded (to become one).
    pub hits: u64,
    pub misses: u64,
}

impl<B> InputCache<B> {
    pub fn new(cap_bytes: usize, min_bytes: usize) -> Self {
        InputCache {
            entries: VecDeque::new(),
            bytes: 0,
            cap_bytes,
            min_bytes,
            hits: 0,
            misses: 0,
        }
    }

    /// Whether an input of `len` bytes goes through the cache.
    pub fn takes(&self, len: usize) -> bool {
        len >= self.min_bytes && len <= self.cap_bytes
    }

    /// Whether a pristine copy of `key` is kept (no use counted).
    pub fn contains(&self, key: &InputKey) -> bool {
        self.entries.iter().any(|(k, _)| k == key)
    }

    /// The pristine copy of `key`, now the most recently used.
    pub fn get(&mut self, key: &InputKey) -> Option<&B> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        let entry = self.entries.remove(i)?;
        self.entries.push_back(entry);
        self.hits += 1;
        self.entries.back().map(|(_, b)| b)
    }

    /// Keeps `buf` as the pristine copy of `key`, evicting the least recently used past the cap.
    pub fn insert(&mut self, key: InputKey, buf: B) -> &B {
        self.misses += 1;
        self.bytes += key.len;
        self.entries.push_back((key, buf));
        while self.bytes > self.cap_bytes && self.entries.len() > 1 {
            if let Some((k, _)) = self.entries.pop_front() {
                self.bytes -= k.len;
            }
        }
        &self.entries.back().expect("just pushed").1
    }

    /// Bytes held in pristine copies.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_seen_again_in_one_call_keeps_its_key_and_another_slice_gets_its_own() {
        let a = vec![7u8; 64];
        let b = vec![7u8; 64];
        let mut hashed = HashedSlices::default();
        assert_eq!(hashed.key_of(&a), InputKey::of(&a));
        assert_eq!(hashed.key_of(&a), InputKey::of(&a));
        // Equal bytes elsewhere: hashed on their own, and (being equal) the same key.
        assert_eq!(hashed.key_of(&b), InputKey::of(&b));
        assert_eq!(hashed.0.len(), 2);
        // A shorter view of the same bytes is another slice.
        assert_eq!(hashed.key_of(&a[..32]), InputKey::of(&a[..32]));
        assert_ne!(hashed.key_of(&a[..32]), InputKey::of(&a));
    }

    #[test]
    fn the_same_bytes_are_found_and_the_least_recently_used_go_first() {
        let a = vec![1u8; 64];
        let b = vec![2u8; 64];
        let c = vec![3u8; 64];
        let mut cache = InputCache::new(128, 16);
        assert!(cache.takes(16) && cache.takes(128) && !cache.takes(15) && !cache.takes(129));
        let (ka, kb, kc) = (InputKey::of(&a), InputKey::of(&b), InputKey::of(&c));
        assert_ne!(ka, kb);
        assert_eq!(ka, InputKey::of(&a.clone()));
        assert!(cache.get(&ka).is_none());
        cache.insert(ka, "a");
        cache.insert(kb, "b");
        assert_eq!(cache.get(&ka), Some(&"a"), "a is now the most recent");
        cache.insert(kc, "c");
        assert_eq!(cache.bytes(), 128);
        assert!(cache.get(&kb).is_none(), "b was the least recently used");
        assert_eq!(cache.get(&ka), Some(&"a"));
        assert_eq!(cache.get(&kc), Some(&"c"));
        assert_eq!((cache.hits, cache.misses), (3, 3));
        let words = [0x1234u16, 0xABCD, 7];
        let le: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(InputKey::hash_u16(&words), InputKey::of(&le).hash);
        // Same length, one byte apart: another input.
        let mut a2 = a.clone();
        a2[63] = 9;
        assert_ne!(InputKey::of(&a2), ka);
    }
}
