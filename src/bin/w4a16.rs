//! The `w4a16` command line (in progress).
fn main() {}
