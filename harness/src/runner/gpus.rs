//! `w4a16 run --gpus all|0,1,…`: which devices of the backend a run opened its workers are
//! bound to. Parsed into [`Gpus`] at the command line; resolved to ordinals against the
//! backend's device count ([`w4a16_device::device_count`]) once the run knows its backend.
//!
//! Workers are bound by ordinal (their `WorkerSpec::device_ordinal`), not by `CUDA_VISIBLE_DEVICES`:
//! the ordinal works the same for the CUDA and the ROCm backend, keeps the parent's and the
//! workers' numbering one (the user's visibility mask applies to both alike), and the worker
//! opens exactly the device it was told to, refusing an ordinal that is not there.

use std::fmt;
use std::str::FromStr;

/// Which devices a run spreads its workers over.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Gpus {
    /// Device 0 only (the default, as before `--gpus`).
    #[default]
    First,
    /// Every device the backend sees.
    All,
    /// These ordinals, in this order (workers are dealt round-robin over them).
    List(Vec<usize>),
}

/// A `--gpus` value that cannot be used, naming what is wrong and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GpusError {
    #[error("--gpus: expected `all` or device ordinals like `0,1`, got an empty value")]
    Empty,
    #[error("--gpus: expected `all` or device ordinals like `0,1`, got {item:?} in {value:?}")]
    NotAnOrdinal { value: String, item: String },
    #[error("--gpus: device {ordinal} is listed twice in {value:?}")]
    Duplicate { value: String, ordinal: usize },
    #[error("--gpus: no {backend} device {ordinal} ({count} present, ordinals 0..{count})")]
    Missing {
        backend: &'static str,
        ordinal: usize,
        count: usize,
    },
    #[error("--gpus: the {backend} runtime reports no device")]
    NoDevice { backend: &'static str },
    #[error("--gpus {value}: device {ordinal} does not open: {reason}")]
    DoesNotOpen {
        value: String,
        ordinal: usize,
        reason: String,
    },
    #[error("--gpus {value}: device {ordinal} cannot run {target} beside {first}: {reason}")]
    Differs {
        value: String,
        ordinal: usize,
        target: String,
        first: String,
        reason: String,
    },
    /// Ordinals named for a backend without GPUs to bind (the ISA emulator, a simulated
    /// device): refused, since those GPUs would run nothing (`all` is ignored loudly instead).
    #[error(
        "--gpus {value}: {why}; only CUDA and ROCm devices are bound (leave --gpus out: --jobs sets the worker processes)"
    )]
    NothingToBind { value: String, why: String },
}

impl FromStr for Gpus {
    type Err = GpusError;

    fn from_str(value: &str) -> Result<Gpus, GpusError> {
        let trimmed = value.trim();
        if trimmed.is_empty() {
            return Err(GpusError::Empty);
        }
        if trimmed.eq_ignore_ascii_case("all") {
            return Ok(Gpus::All);
        }
        let mut ordinals = Vec::new();
        for item in trimmed.split(',') {
            let ordinal: usize = item.trim().parse().map_err(|_| GpusError::NotAnOrdinal {
                value: value.to_string(),
                item: item.to_string(),
            })?;
            if ordinals.contains(&ordinal) {
                return Err(GpusError::Duplicate {
                    value: value.to_string(),
                    ordinal,
                });
            }
            ordinals.push(ordinal);
        }
        Ok(Gpus::List(ordinals))
    }
}

impl fmt::Display for Gpus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Gpus::First => f.write_str("0"),
            Gpus::All => f.write_str("all"),
            Gpus::List(l) => {
                let items: Vec<String> = l.iter().map(usize::to_string).collect();
                f.write_str(&items.join(","))
            }
        }
    }
}

impl Gpus {
    /// The device a run opens first (to learn its backend and target).
    pub fn first(&self) -> usize {
        match self {
            Gpus::List(l) => l.first().copied().unwrap_or(0),
            Gpus::First | Gpus::All => 0,
        }
    }

    /// The ordinals to bind workers to, given that `backend` (its name, for the error) sees
    /// `count` devices.
    pub fn resolve(&self, backend: &'static str, count: usize) -> Result<Vec<usize>, GpusError> {
        if count == 0 {
            return Err(GpusError::NoDevice { backend });
        }
        match self {
            Gpus::First => Ok(vec![0]),
            Gpus::All => Ok((0..count).collect()),
            Gpus::List(l) if l.is_empty() => Err(GpusError::Empty),
            Gpus::List(l) => match l.iter().find(|&&o| o >= count) {
                Some(&ordinal) => Err(GpusError::Missing {
                    backend,
                    ordinal,
                    count,
                }),
                None => Ok(l.clone()),
            },
        }
    }
}

/// Which device each of `workers` workers is bound to: round-robin over `ordinals`, so every
/// listed device gets a worker when there are at least as many workers as devices.
pub fn bind(workers: usize, ordinals: &[usize]) -> Vec<usize> {
    if ordinals.is_empty() {
        return Vec::new();
    }
    (0..workers).map(|w| ordinals[w % ordinals.len()]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_all_and_lists_and_refuses_the_rest_by_name() {
        assert_eq!("all".parse::<Gpus>(), Ok(Gpus::All));
        assert_eq!("ALL".parse::<Gpus>(), Ok(Gpus::All));
        assert_eq!("1".parse::<Gpus>(), Ok(Gpus::List(vec![1])));
        assert_eq!(" 1, 0 ".parse::<Gpus>(), Ok(Gpus::List(vec![1, 0])));
        assert_eq!("".parse::<Gpus>(), Err(GpusError::Empty));
        let e = "0,x".parse::<Gpus>().unwrap_err();
        assert_eq!(
            e,
            GpusError::NotAnOrdinal {
                value: "0,x".into(),
                item: "x".into()
            }
        );
        assert!(e.to_string().contains("\"x\""), "{e}");
        assert!(matches!(
            "0,".parse::<Gpus>(),
            Err(GpusError::NotAnOrdinal { .. })
        ));
        assert!(matches!(
            "-1".parse::<Gpus>(),
            Err(GpusError::NotAnOrdinal { .. })
        ));
        assert_eq!(
            "0,1,0".parse::<Gpus>(),
            Err(GpusError::Duplicate {
                value: "0,1,0".into(),
                ordinal: 0
            })
        );
        for g in [Gpus::All, Gpus::List(vec![2, 0])] {
            assert_eq!(g.to_string().parse::<Gpus>(), Ok(g));
        }
    }

    #[test]
    fn resolves_against_the_device_count() {
        assert_eq!(Gpus::First.resolve("CUDA", 2), Ok(vec![0]));
        assert_eq!(Gpus::All.resolve("CUDA", 3), Ok(vec![0, 1, 2]));
        assert_eq!(Gpus::List(vec![1]).resolve("CUDA", 2), Ok(vec![1]));
        let e = Gpus::List(vec![0, 2]).resolve("CUDA", 2).unwrap_err();
        assert_eq!(
            e,
            GpusError::Missing {
                backend: "CUDA",
                ordinal: 2,
                count: 2
            }
        );
        assert_eq!(
            e.to_string(),
            "--gpus: no CUDA device 2 (2 present, ordinals 0..2)"
        );
        assert_eq!(
            Gpus::All.resolve("ROCm", 0),
            Err(GpusError::NoDevice { backend: "ROCm" })
        );
        assert_eq!(Gpus::List(vec![1, 0]).first(), 1);
        assert_eq!(Gpus::All.first(), 0);
    }

    #[test]
    fn workers_are_bound_round_robin() {
        assert_eq!(bind(5, &[0, 1]), vec![0, 1, 0, 1, 0]);
        assert_eq!(bind(2, &[3]), vec![3, 3]);
        assert_eq!(bind(3, &[]), Vec::<usize>::new());
    }
}
