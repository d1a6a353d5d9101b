//! racecheck's shadow: per LDS byte, the last write and the reads of the latest epoch, tagged
//! with the workgroup they belong to (a new workgroup sees every byte fresh without a clear).

use super::{Clock, Kind, Site, What};

/// One access as the shadow keeps it.
#[derive(Clone, Copy, Debug, Default)]
struct Stamp {
    at: u64,
    wave: u16,
    lane: u8,
    /// Barriers the wave had signalled when it accessed.
    signals: u32,
}

#[derive(Clone, Copy, Debug, Default)]
struct Byte {
    /// The workgroup generation this byte's shadow belongs to (0: never touched).
    generation: u32,
    writer: Option<Stamp>,
    /// Waves (bit per wave index, modulo 64) that read with `read_signals`, and two of them of
    /// different waves (the one to name is the one not of the writer).
    readers: u64,
    read_signals: u32,
    reader: [Stamp; 2],
}

/// The shadow of a workgroup's LDS.
#[derive(Debug, Default)]
pub(super) struct RaceShadow {
    bytes: Vec<Byte>,
    generation: u32,
}

/// Whether `earlier` happens before an access by the wave of `now`.
#[inline]
fn ordered(earlier: &Stamp, now: Clock) -> bool {
    earlier.wave as usize == now.wave || earlier.signals < now.waits
}

impl RaceShadow {
    pub(super) fn begin(&mut self, lds_bytes: usize, generation: u32) {
        if self.bytes.len() < lds_bytes {
            self.bytes.resize(lds_bytes, Byte::default());
        }
        self.generation = generation;
    }

    /// Records an access of `len` bytes at `address`; the first conflict, with the pair of
    /// instruction addresses that names it.
    pub(super) fn access(
        &mut self,
        now: Clock,
        kind: Kind,
        at: u64,
        lane: u8,
        address: u32,
        len: usize,
    ) -> Option<(What, (u64, u64))> {
        let stamp = Stamp {
            at,
            wave: now.wave as u16,
            lane,
            signals: now.signals,
        };
        let start = address as usize;
        let end = (start + len).min(self.bytes.len());
        let mut found = None;
        for (i, b) in self.bytes[start.min(end)..end].iter_mut().enumerate() {
            if b.generation != self.generation {
                *b = Byte {
                    generation: self.generation,
                    ..Byte::default()
                };
            }
            if found.is_none() {
                found = conflict(b, now, kind).map(|(k, other)| (k, other, start + i));
            }
            match kind {
                Kind::Write => {
                    b.writer = Some(stamp);
                    b.readers = 0;
                }
                Kind::Read => {
                    let bit = 1u64 << (now.wave % 64);
                    if b.readers == 0 || now.signals > b.read_signals {
                        b.readers = bit;
                        b.read_signals = now.signals;
                        b.reader = [stamp; 2];
                    } else if now.signals == b.read_signals {
                        if b.readers & bit == 0 && b.reader[0].wave == b.reader[1].wave {
                            b.reader[1] = stamp;
                        }
                        b.readers |= bit;
                    }
                }
            }
        }
        let (other_kind, other, byte) = found?;
        let site = |s: &Stamp| Site {
            at: s.at,
            mnemonic: String::new(),
            wave: s.wave as usize,
            lane: s.lane,
        };
        Some((
            What::Race {
                earlier: (other_kind, site(&other)),
                later: (kind, site(&stamp)),
                address: byte as u32,
            },
            (other.at, at),
        ))
    }
}

/// The access of another wave that `kind` by `now` conflicts with, if any.
#[inline]
fn conflict(b: &Byte, now: Clock, kind: Kind) -> Option<(Kind, Stamp)> {
    if let Some(w) = &b.writer
        && !ordered(w, now)
    {
        return Some((Kind::Write, *w));
    }
    if kind == Kind::Write && b.readers != 0 && b.read_signals >= now.waits {
        let others = b.readers & !(1u64 << (now.wave % 64));
        if others != 0 {
            let reader = if b.reader[0].wave as usize != now.wave {
                b.reader[0]
            } else {
                b.reader[1]
            };
            return Some((Kind::Read, reader));
        }
    }
    None
}
