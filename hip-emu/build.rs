//! Links the cdylib as `libamdhip64.so.5` (its soname) with HIP's symbol version, so a binary
//! built against Debian's runtime loads it in place through `LD_LIBRARY_PATH`.

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=hip_4.2.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libamdhip64.so.5");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/hip_4.2.map");
}
