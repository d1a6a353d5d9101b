use super::*;

#[test]
fn isa_versions_follow_major_minor_stepping() {
    assert_eq!(isa_version(Target::Gfx1100), Some(11000));
    assert_eq!(isa_version(Target::Gfx1151), Some(11501));
    assert_eq!(isa_version(Target::Gfx1201), Some(12001));
    assert_eq!(isa_version(Target::Gfx942), Some(9402));
    assert_eq!(isa_version(Target::Sm90), None);
}

#[test]
fn target_lists_parse_and_reject_non_amd() {
    assert_eq!(
        parse_targets("gfx1151, gfx1100,gfx1151").unwrap(),
        vec![Target::Gfx1151, Target::Gfx1100]
    );
    let err = parse_targets("gfx1100,sm_90").unwrap_err().to_string();
    assert!(
        err.contains("\"sm_90\"") && err.contains("gfx1201"),
        "{err}"
    );
    assert!(
        matches!(parse_targets("gfx9000"), Err(AmdBuildError::BadTargets { entry, .. }) if entry == "gfx9000")
    );
}

#[test]
fn missing_toolchain_names_what_and_where() {
    let empty = std::env::temp_dir().join(format!("w4a16-no-toolchain-{}", std::process::id()));
    let search = ToolchainSearch {
        rocm_roots: vec![empty.join("rocm")],
        bin_dirs: vec![empty.join("bin")],
        include_dirs: vec![empty.join("include")],
        bitcode_dirs: vec![empty.join("bitcode")],
    };
    match Toolchain::discover_in(&search) {
        Err(AmdBuildError::ToolchainMissing { what, looked_in }) => {
            assert!(what.contains("clang++-19"), "{what}");
            assert_eq!(looked_in, vec![empty.join("rocm"), empty.join("bin")]);
        }
        other => panic!("expected ToolchainMissing, got {other:?}"),
    }
}

#[test]
fn each_source_folder_builds_into_a_cache_of_its_own() {
    let b = Builder::new(
        Toolchain {
            flavor: Flavor::Rocm {
                root: PathBuf::from("/opt/rocm"),
            },
            clang: PathBuf::from("/opt/rocm/llvm/bin/clang"),
            objdump: PathBuf::from("/opt/rocm/llvm/bin/llvm-objdump"),
            version: "clang 19".into(),
        },
        PathBuf::from("/cache"),
    );
    let a = b.for_source_dir(Path::new("/work/mutant-a/src")).cache_dir;
    let a2 = b.for_source_dir(Path::new("/work/mutant-a/src")).cache_dir;
    let other = b.for_source_dir(Path::new("/work/mutant-b/src")).cache_dir;
    assert_eq!(a, a2);
    assert_ne!(a, other);
    assert!(
        a.starts_with("/cache/from-kernel-sources"),
        "{}",
        a.display()
    );
}

#[test]
fn fnv_is_length_delimited() {
    let mut a = Fnv1a::new();
    a.write_str("ab");
    a.write_str("c");
    let mut b = Fnv1a::new();
    b.write_str("a");
    b.write_str("bc");
    assert_ne!(a.finish(), b.finish());
}
