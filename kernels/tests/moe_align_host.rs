//! `moe_align` run on the CPU: the text of `kernels/hip/moe_align.hip` compiled as host C++ with
//! `tests/moe_align_host/block.h` in place of `compat.h` (one block as MA_THREADS host threads,
//! `__shared__` as statics, `sync_block` a barrier), so that its algorithm is checked here without
//! a GPU. Every expected value comes from a plain counting loop written here, not from the kernel:
//! experts ascending, each expert's slots ascending, each run padded with the sentinel to a
//! multiple of block_m, one expert id per block (through the map), and the padded length. The
//! kernel is also checked to write nothing past the padded length (the contract leaves those
//! entries unspecified; this implementation leaves them alone) nor past its capacity.
//!
//! Needs a host C++ compiler (`c++`, else clang++-19 of the AMD toolchain): without one this is a
//! loud skip, a failure under `W4A16_REQUIRE=amd-toolchain`.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use w4a16_kernels::set::{MOE_ALIGN_THREADS, moe_align_capacity};
use w4a16_kernels::source::{self, SourceFile};

const POISON: i32 = 0xDEAD_BEEF_u32 as i32;

/// Loud skip, or a failure when `W4A16_REQUIRE` names `amd-toolchain`.
fn skip_or_fail(reason: &str) {
    w4a16_require::skip_or_fail(&w4a16_require::Skip {
        requirement: w4a16_require::Requirement::AmdToolchain,
        reason: reason.to_owned(),
    });
}

/// moe_align.hip with the host block in place of compat.h, then the driver.
fn translation_unit() -> String {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/moe_align_host");
    let block = std::fs::read_to_string(here.join("block.h")).unwrap();
    let driver = std::fs::read_to_string(here.join("driver.cpp")).unwrap();
    let kernel = source::splice_compat(
        SourceFile::MoeAlign.name(),
        SourceFile::MoeAlign.embedded(),
        &block,
    )
    .unwrap();
    format!("{kernel}\n{driver}")
}

/// The compiled driver, once per test binary; `Err` is the reason to skip.
fn driver() -> &'static Result<PathBuf, String> {
    static DRIVER: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DRIVER.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("w4a16-moe-align-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("moe_align_host.cpp");
        std::fs::write(&src, translation_unit()).unwrap();
        let out = dir.join("moe_align_host");
        let mut tried = Vec::new();
        for cxx in ["c++", "clang++-19", "/usr/lib/llvm-19/bin/clang++"] {
            let res = Command::new(cxx)
                .args(["-std=c++17", "-O2", "-pthread", "-Wall", "-Werror"])
                .arg("-Wno-unknown-pragmas")
                .arg(&src)
                .arg("-o")
                .arg(&out)
                .output();
            match res {
                Ok(o) if o.status.success() => return Ok(out),
                Ok(o) => panic!(
                    "{cxx} could not compile {}:\n{}",
                    src.display(),
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => tried.push(format!("{cxx}: {e}")),
            }
        }
        Err(format!("no host C++ compiler ({})", tried.join("; ")))
    })
}

/// One launch: the routing and the buffers' sizes.
#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    ids: Vec<i32>,
    experts: usize,
    block_m: usize,
    map: Option<Vec<i32>>,
    /// `None`: the declared capacity.
    capacity: Option<usize>,
}

/// What the kernel left in its three outputs (capacity plus the guard entries).
#[derive(Debug)]
struct Out {
    ntpp: i32,
    sorted: Vec<i32>,
    blocks: Vec<i32>,
}

const GUARD: usize = 5;

impl Case {
    fn capacity(&self) -> usize {
        self.capacity.unwrap_or_else(|| {
            moe_align_capacity(self.ids.len(), self.experts, self.block_m)
                .unwrap()
                .sorted
        })
    }

    fn line(&self) -> String {
        let mut l = format!(
            "{} {} {} {} {GUARD} {}",
            self.ids.len(),
            self.experts,
            self.block_m,
            self.capacity(),
            u8::from(self.map.is_some())
        );
        for v in self.ids.iter().chain(self.map.iter().flatten()) {
            l.push_str(&format!(" {v}"));
        }
        l
    }

    /// The expected outputs, by counting: (sorted entries, block experts, padded length).
    fn expected(&self) -> (Vec<i32>, Vec<i32>, usize) {
        let slots = self.ids.len() as i32;
        let (mut sorted, mut blocks) = (Vec::new(), Vec::new());
        for e in 0..self.experts {
            let run: Vec<i32> = (0..slots)
                .filter(|&s| self.ids[s as usize] == e as i32)
                .collect();
            if run.is_empty() {
                continue;
            }
            let padded = run.len().div_ceil(self.block_m) * self.block_m;
            sorted.extend(&run);
            sorted.resize(sorted.len() + padded - run.len(), slots);
            let id = self.map.as_ref().map_or(e as i32, |m| m[e]);
            blocks.resize(blocks.len() + padded / self.block_m, id);
        }
        let n = sorted.len();
        (sorted, blocks, n)
    }
}

fn run(cases: &[Case]) -> Option<Vec<Out>> {
    let exe = match driver() {
        Ok(p) => p,
        Err(reason) => {
            skip_or_fail(reason);
            return None;
        }
    };
    let mut child = Command::new(exe)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("running the moe_align driver");
    let input: String = cases.iter().map(|c| c.line() + "\n").collect();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(
        out.status.success(),
        "driver failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let outs: Vec<Out> = text
        .lines()
        .map(|l| {
            let parts: Vec<&str> = l.split('|').collect();
            let ints = |s: &str| -> Vec<i32> {
                s.split_whitespace().map(|w| w.parse().unwrap()).collect()
            };
            Out {
                ntpp: parts[0].trim().parse().unwrap(),
                sorted: ints(parts[1]),
                blocks: ints(parts[2]),
            }
        })
        .collect();
    assert_eq!(outs.len(), cases.len());
    Some(outs)
}

/// The kernel's outputs are exactly the counted ones, and nothing else was written.
fn check(case: &Case, out: &Out) {
    let (sorted, blocks, ntpp) = case.expected();
    let cap = case.capacity();
    let name = case.name;
    assert_eq!(out.ntpp as usize, ntpp, "{name}: num_tokens_post_padded");
    assert_eq!(out.sorted.len(), cap + GUARD);
    assert_eq!(&out.sorted[..ntpp], &sorted[..], "{name}: sorted_token_ids");
    assert!(
        out.sorted[ntpp..].iter().all(|&v| v == POISON),
        "{name}: entries past the padded length were written"
    );
    let nb = ntpp / case.block_m;
    assert_eq!(&out.blocks[..nb], &blocks[..], "{name}: expert_ids");
    assert!(
        out.blocks[nb..].iter().all(|&v| v == POISON),
        "{name}: block ids past the padded length were written"
    );
}

/// splitmix64: deterministic routings.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n as u64) as usize
    }
    /// `tokens × top_k` ids, each token's `top_k` experts distinct (as a router's top-k).
    fn routing(&mut self, tokens: usize, top_k: usize, experts: usize) -> Vec<i32> {
        let mut ids = Vec::with_capacity(tokens * top_k);
        for _ in 0..tokens {
            let mut row: Vec<i32> = Vec::new();
            while row.len() < top_k {
                let e = self.below(experts) as i32;
                if !row.contains(&e) {
                    row.push(e);
                }
            }
            ids.extend(row);
        }
        ids
    }
}

fn case(name: &'static str, ids: Vec<i32>, experts: usize, block_m: usize) -> Case {
    Case {
        name,
        ids,
        experts,
        block_m,
        map: None,
        capacity: None,
    }
}

#[test]
fn the_block_runs_as_many_threads_as_declared() {
    let tu = translation_unit();
    assert!(tu.contains(&format!("#define MA_THREADS {MOE_ALIGN_THREADS}")));
    assert!(!tu.lines().any(|l| l.trim() == source::COMPAT_INCLUDE));
}

/// The hand-made routings (E ∈ {8, 64, 128, 257}, top_k ∈ {1, 2, 6, 8}, T = 1, T not a multiple
/// of block_m), hand-made ones (empty experts, every token on one expert, one token routed to the
/// same expert twice), several windows of experts and several chunks of slots.
#[test]
fn sorted_runs_blocks_and_padding_are_the_counted_ones() {
    let mut rng = Rng(11);
    let mut cases = Vec::new();
    for (tokens, top_k, experts, bm) in [
        (1usize, 1usize, 8usize, 16usize),
        (1, 8, 257, 16),
        (5, 2, 8, 16),
        (33, 6, 64, 32),
        (100, 8, 128, 64),
        (64, 8, 257, 16),
        (300, 2, 257, 64),
        (33, 6, 600, 32),
    ] {
        let ids = rng.routing(tokens, top_k, experts);
        cases.push(case("random", ids, experts, bm));
    }
    // Every token on one expert, more slots than one chunk of MA_THREADS.
    cases.push(case("one-expert", vec![5; 700], 64, 64));
    // Empty experts: only 0 and the last.
    let ids = (0..40).map(|s| if s % 3 == 0 { 7 } else { 0 }).collect();
    cases.push(case("empty-experts", ids, 8, 16));
    // One token routed to the same expert twice (top_k = 2), and to a third one.
    cases.push(case("same-expert-twice", vec![3, 3, 1, 3, 2, 2], 4, 16));
    // Ids a router never gives (validation refuses them): in no block.
    cases.push(case("out-of-range", vec![-1, 2, 9, 2, 8, 0], 8, 16));
    // One expert, one block size larger than the slots.
    cases.push(case("tiny", vec![0], 1, 64));
    let Some(outs) = run(&cases) else { return };
    for (c, o) in cases.iter().zip(&outs) {
        check(c, o);
    }
}

/// Under an expert map the runs still follow the global ids; the blocks carry the local id, −1
/// for experts held elsewhere.
#[test]
fn expert_ids_go_through_the_map() {
    let mut rng = Rng(7);
    let mut cases = Vec::new();
    for experts in [8usize, 257] {
        let map: Vec<i32> = (0..experts)
            .map(|e| if e % 2 == 0 { (e / 2) as i32 } else { -1 })
            .collect();
        cases.push(Case {
            map: Some(map),
            ..case("every-other", rng.routing(50, 4, experts), experts, 16)
        });
    }
    let Some(outs) = run(&cases) else { return };
    for (c, o) in cases.iter().zip(&outs) {
        check(c, o);
        assert!(
            o.blocks.contains(&-1),
            "{}: no block held elsewhere",
            c.name
        );
    }
}

/// A capacity smaller than the routing needs (validation never launches one): nothing is
/// written at or past it.
#[test]
fn nothing_is_written_past_the_capacity() {
    let c = Case {
        capacity: Some(32),
        ..case("short", vec![0; 40], 2, 16)
    };
    let Some(outs) = run(std::slice::from_ref(&c)) else {
        return;
    };
    let o = &outs[0];
    assert!(
        o.sorted[32..].iter().all(|&v| v == POISON),
        "{:?}",
        o.sorted
    );
    assert!(o.blocks[2..].iter().all(|&v| v == POISON), "{:?}", o.blocks);
    assert_eq!(&o.sorted[..32], &(0..32).collect::<Vec<i32>>()[..]);
}

/// The same routing twice gives the same bits (no atomics, a fixed order).
#[test]
fn two_runs_are_identical() {
    let mut rng = Rng(3);
    let c = case("repeat", rng.routing(200, 8, 257), 257, 32);
    let Some(outs) = run(&[c.clone(), c.clone()]) else {
        return;
    };
    assert_eq!(outs[0].sorted, outs[1].sorted);
    assert_eq!(outs[0].blocks, outs[1].blocks);
    check(&c, &outs[0]);
}
