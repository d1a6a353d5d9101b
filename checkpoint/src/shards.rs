//! The safetensors shards of a model directory, memory-mapped. Headers are parsed (and their
//! offsets validated) by the `safetensors` crate at open; tensor data is copied out one tensor at
//! a time, so checking a model needs no more RAM than the layer being checked.

use crate::error::CheckpointError;
use memmap2::Mmap;
use safetensors::tensor::{Dtype, Metadata, SafeTensorError, SafeTensors};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use w4a16_reference::formats::{StoredDtype, Tensor, TensorData};

pub const INDEX_JSON: &str = "model.safetensors.index.json";

/// Name and shape of one tensor as the header states it; no data read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMeta {
    /// The safetensors dtype name (`I32`, `BF16`, …), also for dtypes this crate cannot read.
    pub dtype: String,
    /// `None` for dtypes outside I32, I64, F16, BF16, F32.
    pub stored: Option<StoredDtype>,
    pub shape: Vec<usize>,
}

fn stored(d: Dtype) -> Option<StoredDtype> {
    match d {
        Dtype::I32 => Some(StoredDtype::I32),
        Dtype::I64 => Some(StoredDtype::I64),
        Dtype::F16 => Some(StoredDtype::F16),
        Dtype::BF16 => Some(StoredDtype::Bf16),
        Dtype::F32 => Some(StoredDtype::F32),
        _ => None,
    }
}

/// One memory-mapped safetensors file with its parsed header.
#[derive(Debug)]
pub struct SafetensorsFile {
    path: PathBuf,
    name: String,
    mmap: Mmap,
    header_len: usize,
    metadata: Metadata,
}

impl SafetensorsFile {
    pub fn open(path: &Path) -> Result<Self, CheckpointError> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let file = File::open(path).map_err(|e| CheckpointError::io(path, e))?;
        // SAFETY: the map is read-only and private to this process; a checkpoint file changed
        // underneath a running check is outside what this tool promises (as for every loader
        // that maps model files).
        let mmap = unsafe { Mmap::map(&file) }.map_err(|e| CheckpointError::io(path, e))?;
        let (header_len, metadata) =
            SafeTensors::read_metadata(&mmap).map_err(|e| header_error(&name, &mmap, e))?;
        Ok(SafetensorsFile {
            path: path.to_path_buf(),
            name,
            mmap,
            header_len,
            metadata,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file name, as errors print it.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.metadata.tensors().into_keys().collect();
        names.sort();
        names
    }

    /// The file's `__metadata__` value for `key`, if it has one.
    pub fn metadata_value(&self, key: &str) -> Option<&str> {
        self.metadata
            .metadata()
            .as_ref()
            .and_then(|m| m.get(key))
            .map(String::as_str)
    }

    pub fn contains(&self, tensor: &str) -> bool {
        self.metadata.info(tensor).is_some()
    }

    pub fn meta(&self, tensor: &str) -> Option<TensorMeta> {
        self.metadata.info(tensor).map(|i| TensorMeta {
            dtype: format!("{:?}", i.dtype),
            stored: stored(i.dtype),
            shape: i.shape.clone(),
        })
    }

    /// Copies one tensor out of the map (little-endian, any alignment).
    pub fn tensor(&self, tensor: &str) -> Result<Tensor, CheckpointError> {
        let info = self
            .metadata
            .info(tensor)
            .ok_or_else(|| CheckpointError::TensorNotFound {
                tensor: format!("{}: {tensor}", self.name),
            })?;
        let Some(dtype) = stored(info.dtype) else {
            return Err(CheckpointError::UnsupportedDtype {
                shard: self.name.clone(),
                tensor: tensor.to_string(),
                got: format!("{:?}", info.dtype),
            });
        };
        let start = 8 + self.header_len + info.data_offsets.0;
        let end = 8 + self.header_len + info.data_offsets.1;
        // read_metadata validated the offsets against the file length.
        let bytes = &self.mmap[start..end];
        fn le<const W: usize, T>(b: &[u8], f: fn([u8; W]) -> T) -> Vec<T> {
            b.chunks_exact(W)
                .map(|c| f(c.try_into().expect("chunk of W")))
                .collect()
        }
        let data = match dtype {
            StoredDtype::I32 => TensorData::I32(le(bytes, i32::from_le_bytes)),
            StoredDtype::I64 => TensorData::I64(le(bytes, i64::from_le_bytes)),
            StoredDtype::U32 => TensorData::U32(le(bytes, u32::from_le_bytes)),
            StoredDtype::F16 => TensorData::F16(le(bytes, u16::from_le_bytes)),
            StoredDtype::Bf16 => TensorData::Bf16(le(bytes, u16::from_le_bytes)),
            StoredDtype::F32 => TensorData::F32(le(bytes, f32::from_le_bytes)),
        };
        self.release(start, end - start);
        Ok(Tensor::new(tensor, info.shape.clone(), data))
    }

    /// Takes a copied tensor's pages of the map out of this process: mapped pages, once read,
    /// count in the memory in use (RSS) until unmapped, so a model read one layer at a time
    /// would otherwise end holding every shard it read. The file's pages stay in the page
    /// cache; reading them again maps them again.
    fn release(&self, offset: usize, len: usize) {
        #[cfg(unix)]
        // SAFETY: the map is a read-only shared (MAP_SHARED) mapping of the file, never written:
        // MADV_DONTNEED only unmaps the range's pages (rounded out to whole pages) from this
        // process, and any later read of them, this tensor's or a neighbour's sharing a page,
        // faults the same file bytes back in. The copy above holds no reference into the map.
        let released = unsafe {
            self.mmap
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len)
        };
        // Failing to advise only leaves the pages mapped, as before.
        #[cfg(unix)]
        let _ = released;
        #[cfg(not(unix))]
        let _ = (offset, len);
    }
}

/// The safetensors crate's header error, with a truncated file told apart from a malformed one.
fn header_error(shard: &str, bytes: &[u8], e: SafeTensorError) -> CheckpointError {
    let truncated = |detail: String| CheckpointError::Truncated {
        shard: shard.to_string(),
        detail,
    };
    match e {
        SafeTensorError::HeaderTooSmall => truncated(format!(
            "expected at least 8 bytes (the header length), got {}",
            bytes.len()
        )),
        SafeTensorError::InvalidHeaderLength => {
            let n = bytes
                .get(..8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
            truncated(format!(
                "the header claims {} bytes after the 8-byte length, the file has {} bytes in all",
                n.unwrap_or(0),
                bytes.len()
            ))
        }
        SafeTensorError::MetadataIncompleteBuffer => {
            let end = data_end(bytes);
            match end {
                Some(end) if end > bytes.len() => truncated(format!(
                    "the header's tensors end at byte {end}, the file has {} bytes",
                    bytes.len()
                )),
                Some(end) => CheckpointError::Safetensors {
                    shard: shard.to_string(),
                    detail: format!(
                        "the header's tensors end at byte {end}, but the file has {} bytes (expected the data to end at the end of the file)",
                        bytes.len()
                    ),
                },
                None => CheckpointError::Safetensors {
                    shard: shard.to_string(),
                    detail: e.to_string(),
                },
            }
        }
        other => CheckpointError::Safetensors {
            shard: shard.to_string(),
            detail: other.to_string(),
        },
    }
}

/// Where the header says the data ends (8 + header + the largest end offset), read without the
/// crate's validation, for the truncated-file message.
fn data_end(bytes: &[u8]) -> Option<usize> {
    let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?) as usize;
    let header: serde_json::Value =
        serde_json::from_slice(bytes.get(8..8usize.checked_add(n)?)?).ok()?;
    let max = header
        .as_object()?
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .filter_map(|(_, v)| v.get("data_offsets")?.get(1)?.as_u64())
        .max()
        .unwrap_or(0);
    Some(8 + n + max as usize)
}

/// All shards of a model directory, with the index (when present) checked against them both
/// ways.
#[derive(Debug)]
pub struct ShardSet {
    dir: PathBuf,
    shards: Vec<SafetensorsFile>,
    /// Tensor name → index into `shards`.
    location: BTreeMap<String, usize>,
    indexed: bool,
}

/// Files in a model directory that hold no model weights.
pub const NOT_A_SHARD: &[&str] = &[crate::oracle::ORACLE_FILE];

impl ShardSet {
    /// `model.safetensors.index.json` when present (its weight_map decides which shards count),
    /// else every `*.safetensors` of the directory (the oracle file aside).
    pub fn open(dir: &Path) -> Result<ShardSet, CheckpointError> {
        let index_path = dir.join(INDEX_JSON);
        if index_path.exists() {
            return Self::open_indexed(dir, &index_path);
        }
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(|e| CheckpointError::io(dir, e))? {
            let entry = entry.map_err(|e| CheckpointError::io(dir, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(".safetensors") && !NOT_A_SHARD.contains(&name.as_str()) {
                files.push(entry.path());
            }
        }
        files.sort();
        if files.is_empty() {
            return Err(CheckpointError::NoShards {
                dir: dir.to_path_buf(),
            });
        }
        let mut set = ShardSet {
            dir: dir.to_path_buf(),
            shards: Vec::new(),
            location: BTreeMap::new(),
            indexed: false,
        };
        for path in files {
            let shard = SafetensorsFile::open(&path)?;
            let i = set.shards.len();
            for name in shard.names() {
                if let Some(&j) = set.location.get(&name) {
                    return Err(CheckpointError::DuplicateTensor {
                        tensor: name,
                        first: set.shards[j].name.clone(),
                        second: shard.name.clone(),
                    });
                }
                set.location.insert(name, i);
            }
            set.shards.push(shard);
        }
        Ok(set)
    }

    fn open_indexed(dir: &Path, index_path: &Path) -> Result<ShardSet, CheckpointError> {
        let text =
            std::fs::read_to_string(index_path).map_err(|e| CheckpointError::io(index_path, e))?;
        let json_err = |detail: String| CheckpointError::ConfigJson {
            file: INDEX_JSON.to_string(),
            detail,
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| json_err(e.to_string()))?;
        let map = value
            .get("weight_map")
            .and_then(|m| m.as_object())
            .ok_or_else(|| {
                json_err("expected an object \"weight_map\": {tensor: shard file}".into())
            })?;
        let mut weight_map: BTreeMap<String, String> = BTreeMap::new();
        for (tensor, shard) in map {
            let shard = shard.as_str().ok_or_else(|| {
                json_err(format!(
                    "weight_map.{tensor}: expected a shard file name, got {shard}"
                ))
            })?;
            weight_map.insert(tensor.clone(), shard.to_string());
        }
        let mut set = ShardSet {
            dir: dir.to_path_buf(),
            shards: Vec::new(),
            location: BTreeMap::new(),
            indexed: true,
        };
        let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
        for (tensor, shard) in &weight_map {
            let i = match by_name.get(shard) {
                Some(&i) => i,
                None => {
                    let path = dir.join(shard);
                    if !path.is_file() {
                        return Err(CheckpointError::IndexShardMissing {
                            index: INDEX_JSON.into(),
                            shard: shard.clone(),
                            tensor: tensor.clone(),
                        });
                    }
                    set.shards.push(SafetensorsFile::open(&path)?);
                    by_name.insert(shard.clone(), set.shards.len() - 1);
                    set.shards.len() - 1
                }
            };
            if !set.shards[i].contains(tensor) {
                return Err(CheckpointError::TensorNotInShard {
                    index: INDEX_JSON.into(),
                    tensor: tensor.clone(),
                    shard: shard.clone(),
                });
            }
            set.location.insert(tensor.clone(), i);
        }
        for shard in &set.shards {
            for name in shard.names() {
                if weight_map.get(&name) != Some(&shard.name) {
                    return Err(CheckpointError::TensorNotInIndex {
                        shard: shard.name.clone(),
                        tensor: name,
                        index: INDEX_JSON.into(),
                    });
                }
            }
        }
        Ok(set)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn is_indexed(&self) -> bool {
        self.indexed
    }

    pub fn shards(&self) -> &[SafetensorsFile] {
        &self.shards
    }

    /// Every tensor name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.location.keys().map(String::as_str)
    }

    pub fn shard_of(&self, tensor: &str) -> Option<&SafetensorsFile> {
        self.location.get(tensor).map(|&i| &self.shards[i])
    }

    /// The shard's file name, or `?` for a tensor that is not there (errors print it).
    pub fn shard_name(&self, tensor: &str) -> String {
        self.shard_of(tensor)
            .map_or_else(|| "?".to_string(), |s| s.name.clone())
    }

    pub fn meta(&self, tensor: &str) -> Option<TensorMeta> {
        self.shard_of(tensor)?.meta(tensor)
    }

    /// Copies one tensor into a reference [`Tensor`] named by its full name.
    pub fn tensor(&self, tensor: &str) -> Result<Tensor, CheckpointError> {
        match self.shard_of(tensor) {
            Some(s) => s.tensor(tensor),
            None => Err(CheckpointError::TensorNotFound {
                tensor: tensor.to_string(),
            }),
        }
    }
}
