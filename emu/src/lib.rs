//! An ISA-level emulator for the kernel set's gfx11 / gfx12 code objects: the machine code that
//! runs on the users' GPUs, executed on the host without AMD hardware.
//!
//! The pipeline: `program` loads a clang-built code object (kernel descriptors, kernarg layout)
//! and `parse` turns LLVM's disassembly of it into typed [`inst::Inst`]s; `dispatch` runs a grid
//! of workgroups as wave32 waves over `memory` (bounded global allocations, LDS per workgroup),
//! with `exec` giving each instruction its ISA semantics and `num` the floating-point rules;
//! `sanitize` watches a launch's LDS and global accesses (racecheck, initcheck) when asked.

pub mod blocks;
pub mod counters;
pub mod coverage;
pub mod dispatch;
pub mod display;
pub mod exec;
pub mod fault;
pub mod inst;
pub mod kernarg;
pub mod lines;
pub mod machine;
pub mod memory;
pub mod num;
pub mod parse;
pub mod program;
pub mod sanitize;
pub mod wave;
