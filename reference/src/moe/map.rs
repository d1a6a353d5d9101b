//! The expert map of expert parallelism: which global experts live on this device and under
//! which local id. Weights, scales and zero points hold the local experts only; a slot routed to
//! an expert that is not local gets a block of expert −1, whose rows the GEMM writes as zeros.

crate::named_enum! {
    /// How a case maps global experts to local ones.
    /// Case files spell it as [`MapKind::name`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum MapKind {
        /// Every expert is local, under its own index (the same as no map, but through the map path).
        All = "all",
        /// Even experts are local (`local = e/2`), odd experts are mapped away (−1).
        EveryOther = "every-other",
    }
}

impl MapKind {}

/// `local_of[e]` = local id of global expert `e`, or −1 when it is not local. Local ids are
/// `0..E_local`, each used once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExpertMap {
    pub local_of: Vec<i32>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    #[error("expert map: expected E ≥ 1 entries, got 0")]
    NoExperts,
    #[error("expert map: ids are i32, so E ≤ {max}; got {experts}", max = i32::MAX)]
    TooManyExperts { experts: usize },
    #[error("expert map: entry {expert} holds {got}, expected −1 or a local id 0..{locals}")]
    LocalIdOutOfRange {
        expert: usize,
        got: i32,
        locals: usize,
    },
    #[error("expert map: local id {local} given to experts {first} and {second}, expected once")]
    LocalIdTwice {
        local: i32,
        first: usize,
        second: usize,
    },
}

impl ExpertMap {
    /// The map of `kind` over `experts` global experts.
    pub fn new(kind: MapKind, experts: usize) -> Result<Self, MapError> {
        if experts == 0 {
            return Err(MapError::NoExperts);
        }
        if experts > i32::MAX as usize {
            return Err(MapError::TooManyExperts { experts });
        }
        let local_of = (0..experts)
            .map(|e| match kind {
                MapKind::All => e as i32,
                MapKind::EveryOther if e % 2 == 0 => (e / 2) as i32,
                MapKind::EveryOther => -1,
            })
            .collect();
        Ok(ExpertMap { local_of })
    }

    /// A hand-written map, checked: entries are −1 or local ids `0..E_local` used once each,
    /// where `E_local` is the number of entries ≠ −1.
    pub fn from_local_of(local_of: Vec<i32>) -> Result<Self, MapError> {
        let map = ExpertMap { local_of };
        map.validate()?;
        Ok(map)
    }

    pub fn validate(&self) -> Result<(), MapError> {
        let experts = self.local_of.len();
        if experts == 0 {
            return Err(MapError::NoExperts);
        }
        if experts > i32::MAX as usize {
            return Err(MapError::TooManyExperts { experts });
        }
        let locals = self.local_experts();
        let mut owner: Vec<Option<usize>> = vec![None; locals];
        for (expert, &got) in self.local_of.iter().enumerate() {
            if got == -1 {
                continue;
            }
            if got < 0 || got as usize >= locals {
                return Err(MapError::LocalIdOutOfRange {
                    expert,
                    got,
                    locals,
                });
            }
            if let Some(first) = owner[got as usize].replace(expert) {
                return Err(MapError::LocalIdTwice {
                    local: got,
                    first,
                    second: expert,
                });
            }
        }
        Ok(())
    }

    /// Global expert count `E`.
    pub fn experts(&self) -> usize {
        self.local_of.len()
    }

    /// `E_local`: entries that are not −1.
    pub fn local_experts(&self) -> usize {
        self.local_of.iter().filter(|&&l| l != -1).count()
    }

    /// The local id of global expert `e`, `None` when it is mapped away (call on a validated map).
    pub fn local(&self, e: usize) -> Option<usize> {
        let l = self.local_of[e];
        (l >= 0).then_some(l as usize)
    }

    /// The global expert of each local id.
    pub fn global_of_local(&self) -> Vec<usize> {
        let mut g = vec![0; self.local_experts()];
        for (e, &l) in self.local_of.iter().enumerate() {
            if l >= 0 {
                g[l as usize] = e;
            }
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_other_keeps_the_even_experts() {
        let m = ExpertMap::new(MapKind::EveryOther, 5).unwrap();
        assert_eq!(m.local_of, [0, -1, 1, -1, 2]);
        assert_eq!(m.local_experts(), 3);
        assert_eq!(m.global_of_local(), [0, 2, 4]);
        assert!(m.validate().is_ok());
        assert_eq!(ExpertMap::new(MapKind::All, 0), Err(MapError::NoExperts));
    }

    #[test]
    fn hand_written_maps_are_checked() {
        assert_eq!(
            ExpertMap::from_local_of(vec![0, 2, -1]),
            Err(MapError::LocalIdOutOfRange {
                expert: 1,
                got: 2,
                locals: 2
            })
        );
        assert_eq!(
            ExpertMap::from_local_of(vec![1, -1, 1]),
            Err(MapError::LocalIdTwice {
                local: 1,
                first: 0,
                second: 2
            })
        );
        assert_eq!(
            ExpertMap::from_local_of(vec![0, -3]),
            Err(MapError::LocalIdOutOfRange {
                expert: 1,
                got: -3,
                locals: 2
            })
        );
        assert!(ExpertMap::from_local_of(vec![1, -1, 0]).is_ok());
    }
}
