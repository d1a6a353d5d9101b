//! A tensor copied out of a shard's map leaves none of its pages mapped in the process: read
//! pages of a map count in the memory in use (RSS) until unmapped, so a model read one layer at
//! a time would otherwise end holding every shard it read (docs/check-model.md, "At model
//! scale").

#![cfg(target_os = "linux")]

use std::path::Path;
use w4a16_checkpoint::SafetensorsFile;
use w4a16_checkpoint::writer::write_safetensors;
use w4a16_reference::formats::{Tensor, TensorData};

/// The resident kB of this process's mappings of `file` (`/proc/self/smaps`).
fn mapped_rss_kib(file: &Path) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
    let name = file.to_str().expect("a UTF-8 path");
    let mut total = 0;
    let mut in_file = false;
    for line in smaps.lines() {
        // A mapping's header line: `start-end perms offset dev inode [path]`.
        if line
            .split_whitespace()
            .next()
            .is_some_and(|a| a.contains('-'))
            && line.split_whitespace().nth(1).is_some_and(|p| p.len() == 4)
        {
            in_file = line.ends_with(name);
        } else if in_file && let Some(kib) = line.strip_prefix("Rss:") {
            total += kib
                .trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<u64>()
                .unwrap();
        }
    }
    total
}

#[test]
fn a_copied_tensor_leaves_no_page_of_its_shard_mapped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.safetensors");
    let words = 8 << 20; // 32 MiB of i32
    let data: Vec<i32> = (0..words as i32).collect();
    let tensor = Tensor::new("w", vec![words], TensorData::I32(data));
    write_safetensors(&path, &[tensor]).unwrap();
    let file = SafetensorsFile::open(&path).unwrap();
    let read = file.tensor("w").unwrap();
    let TensorData::I32(values) = &read.data else {
        panic!("read as {:?}", read.dtype());
    };
    assert_eq!(values[words - 1], words as i32 - 1, "the copy is whole");
    let kib = mapped_rss_kib(&path);
    // The header's page may stay; the 32 MiB of data may not.
    assert!(
        kib <= 64,
        "{kib} kB of the shard still mapped after the copy"
    );
}
