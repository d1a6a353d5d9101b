//! The prefill dequant option (docs/contract.md §5): both command-line forms, refusals of unknown keys and
//! values, the retired flag's messages, and the startup memory check.

use w4a16_cases::ModelDescription;
use w4a16_kernels::Target;
use w4a16_select::config::{
    ConfigError, KernelConfig, PREFILL_DEQUANT_KEY, PrefillDequant, StartupMemoryError,
    StartupRequest, check_startup_memory, parse_args,
};

const GIB: u64 = 1 << 30;
/// docs/contract.md §5's activation headroom, written from the spec rather than read from the crate's
/// constant, so a headroom written as 4·10⁹ bytes (or any other drift) fails these tests.
const SPEC_HEADROOM: u64 = 4 * 1024 * 1024 * 1024;

fn parse(args: &[&str]) -> Result<(PrefillDequant, Vec<String>), ConfigError> {
    parse_args(args).map(|p| (p.config.prefill_dequant, p.rest))
}

fn err(args: &[&str]) -> ConfigError {
    parse(args).expect_err("must be refused")
}

#[test]
fn the_default_is_disable_and_other_arguments_pass_through_in_order() {
    let (v, rest) = parse(&["run", "--suite", "field", "--jobs", "4"]).unwrap();
    assert_eq!(v, PrefillDequant::Disable);
    assert_eq!(
        KernelConfig::default().prefill_dequant,
        PrefillDequant::Disable
    );
    assert_eq!(rest, ["run", "--suite", "field", "--jobs", "4"]);
}

#[test]
fn the_json_form_is_accepted_with_a_space_or_an_equals_sign() {
    let json = r#"{"rdna_hybrid_w4a16_prefill_dequant": "enable"}"#;
    let (v, rest) = parse(&["run", "--kernel-config", json, "--suite", "field"]).unwrap();
    assert_eq!(v, PrefillDequant::Enable);
    assert_eq!(rest, ["run", "--suite", "field"]);
    let eq = format!("--kernel-config={json}");
    assert_eq!(parse(&[eq.as_str()]).unwrap().0, PrefillDequant::Enable);
    let off = r#"{"rdna_hybrid_w4a16_prefill_dequant": "disable"}"#;
    assert_eq!(
        parse(&["--kernel-config", off]).unwrap().0,
        PrefillDequant::Disable
    );
    assert_eq!(
        parse(&["--kernel-config", "{}"]).unwrap().0,
        PrefillDequant::Disable
    );
    assert_eq!(
        KernelConfig::from_json(json).unwrap().prefill_dequant,
        PrefillDequant::Enable
    );
}

#[test]
fn the_dotted_form_is_accepted_with_a_space_or_an_equals_sign() {
    let (v, rest) = parse(&[
        "select",
        "--kernel-config.rdna_hybrid_w4a16_prefill_dequant",
        "enable",
        "--m",
        "256",
    ])
    .unwrap();
    assert_eq!(v, PrefillDequant::Enable);
    assert_eq!(rest, ["select", "--m", "256"]);
    assert_eq!(
        parse(&["--kernel-config.rdna_hybrid_w4a16_prefill_dequant=enable"])
            .unwrap()
            .0,
        PrefillDequant::Enable
    );
    assert_eq!(
        parse(&["--kernel-config.rdna_hybrid_w4a16_prefill_dequant=disable"])
            .unwrap()
            .0,
        PrefillDequant::Disable
    );
}

#[test]
fn unknown_keys_are_refused_in_both_forms() {
    match err(&[
        "--kernel-config",
        r#"{"rdna_hybrid_w4a16_prefill_dequant": "enable", "split_k": "4"}"#,
    ]) {
        ConfigError::UnknownKey { key, .. } => assert_eq!(key, "split_k"),
        e => panic!("wrong error {e}"),
    }
    let e = err(&[
        "--kernel-config.rdna_hybrid_w4a16_prefill_deqaunt",
        "enable",
    ]);
    assert!(
        matches!(&e, ConfigError::UnknownKey { key, .. } if key == "rdna_hybrid_w4a16_prefill_deqaunt"),
        "{e}"
    );
    assert!(
        e.to_string().contains(PREFILL_DEQUANT_KEY),
        "the message names the real key: {e}"
    );
}

#[test]
fn unknown_values_are_refused_in_both_forms() {
    for bad in [r#""on""#, "true", "1", r#""hard""#, "null"] {
        let json = format!(r#"{{"rdna_hybrid_w4a16_prefill_dequant": {bad}}}"#);
        let e = err(&["--kernel-config", &json]);
        assert!(matches!(e, ConfigError::BadValue { .. }), "{bad}: {e}");
        assert!(
            e.to_string().contains("expected \"enable\" or \"disable\""),
            "{e}"
        );
    }
    let e = err(&[
        "--kernel-config.rdna_hybrid_w4a16_prefill_dequant",
        "Enable",
    ]);
    assert!(
        matches!(&e, ConfigError::BadValue { value, .. } if value == "\"Enable\""),
        "{e}"
    );
}

#[test]
fn malformed_json_and_missing_values_are_refused() {
    for bad in [
        "enable",
        "[1]",
        "{\"rdna_hybrid_w4a16_prefill_dequant\": ",
        "\"x\"",
    ] {
        assert!(
            matches!(
                err(&["--kernel-config", bad]),
                ConfigError::NotAnObject { .. }
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        err(&["--kernel-config"]),
        ConfigError::MissingValue { .. }
    ));
    assert!(matches!(
        err(&["--kernel-config", "--suite"]),
        ConfigError::MissingValue { .. }
    ));
    assert!(matches!(
        err(&["--kernel-config.rdna_hybrid_w4a16_prefill_dequant"]),
        ConfigError::MissingValue { .. }
    ));
}

#[test]
fn contradicting_settings_are_refused_and_repeats_are_not() {
    let e = err(&[
        "--kernel-config",
        r#"{"rdna_hybrid_w4a16_prefill_dequant": "enable"}"#,
        "--kernel-config.rdna_hybrid_w4a16_prefill_dequant",
        "disable",
    ]);
    assert!(matches!(e, ConfigError::Conflict { .. }), "{e}");
    let ok = parse(&[
        "--kernel-config.rdna_hybrid_w4a16_prefill_dequant=enable",
        "--kernel-config",
        r#"{"rdna_hybrid_w4a16_prefill_dequant": "enable"}"#,
    ]);
    assert_eq!(ok.unwrap().0, PrefillDequant::Enable);
}

#[test]
fn arguments_after_a_double_dash_are_left_alone() {
    let (v, rest) = parse(&[
        "run",
        "--",
        "--kernel-config.rdna_hybrid_w4a16_prefill_dequant",
        "enable",
    ])
    .unwrap();
    assert_eq!(v, PrefillDequant::Disable);
    assert_eq!(
        rest,
        [
            "run",
            "--",
            "--kernel-config.rdna_hybrid_w4a16_prefill_dequant",
            "enable"
        ]
    );
}

fn retired(args: &[&str]) -> String {
    match err(args) {
        e @ ConfigError::Retired { .. } => e.to_string(),
        e => panic!("{args:?}: expected the retired-flag refusal, got {e}"),
    }
}

#[test]
fn the_retired_flag_hard_shows_the_new_spelling() {
    for args in [
        &["--w4a16-prefill-dequant", "hard"][..],
        &["--w4a16-prefill-dequant=hard"],
    ] {
        let m = retired(args);
        assert!(m.contains("--w4a16-prefill-dequant was retired"), "{m}");
        assert!(
            m.contains("--kernel-config.rdna_hybrid_w4a16_prefill_dequant enable"),
            "{m}"
        );
    }
}

#[test]
fn the_retired_flag_off_says_nothing_is_needed() {
    let m = retired(&["run", "--w4a16-prefill-dequant", "off"]);
    assert!(m.contains("`off` needs nothing"), "{m}");
    assert!(m.contains("drop the flag"), "{m}");
    assert!(
        !m.contains("--kernel-config.rdna_hybrid_w4a16_prefill_dequant enable"),
        "off must not suggest enabling: {m}"
    );
}

#[test]
fn the_retired_flag_soft_has_no_equivalent() {
    let m = retired(&["--w4a16-prefill-dequant=soft"]);
    assert!(m.contains("`soft` has no equivalent"), "{m}");
}

#[test]
fn the_retired_flag_is_refused_without_or_with_a_strange_value() {
    for args in [
        &["--w4a16-prefill-dequant"][..],
        &["--w4a16-prefill-dequant", "on"],
    ] {
        let m = retired(args);
        assert!(
            m.contains("hard → enable, off → nothing, soft → no equivalent"),
            "{m}"
        );
    }
}

fn qwen3_8b() -> ModelDescription {
    ModelDescription::load(
        &w4a16_cases::locate(None)
            .expect("the cases folder")
            .join("models/qwen3-8b.toml"),
    )
    .unwrap()
}

/// The startup memory check's terms recomputed here from the description (not through the harness's code).
fn expected_terms(
    m: &ModelDescription,
    target: Target,
    enabled: bool,
    max_model_len: u64,
) -> (u64, u64, u64) {
    let gfx11 = matches!(target, Target::Gfx1100 | Target::Gfx1151);
    let wave32 = target != Target::Gfx942;
    let mut resident = 0;
    let mut dense = 0;
    for l in &m.linears {
        let (n, k, g) = (l.shape.n as u64, l.shape.k as u64, l.shape.group as u64);
        let row = k / 2 + if gfx11 && (k / 2) % 1024 == 0 { 128 } else { 0 };
        let zeros = n.div_ceil(8) * (k / g) * 4;
        resident += (n * row + n * (k / g) * 2 + zeros) * m.layers;
        if enabled && wave32 {
            let drow = 2 * k + if gfx11 && (2 * k) % 2048 == 0 { 128 } else { 0 };
            dense += n * drow * m.layers;
        }
    }
    let kv = 2 * m.layers * m.kv_heads * m.head_dim * max_model_len * 2;
    (resident, dense, kv)
}

fn request(
    model: &ModelDescription,
    target: Target,
    device: u64,
    util: f64,
    len: Option<u64>,
) -> StartupRequest<'_> {
    StartupRequest {
        model,
        target,
        device_memory_bytes: device,
        gpu_memory_utilization: util,
        max_model_len: len,
    }
}

#[test]
fn the_startup_memory_check_counts_weights_padded_dense_cache_headroom_and_one_request_of_kv() {
    let m = qwen3_8b();
    let enable = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    for target in Target::ALL {
        let r = check_startup_memory(&enable, &request(&m, target, 192 * GIB, 0.9, None)).unwrap();
        let (resident, dense, kv) = expected_terms(&m, target, true, m.max_model_len);
        assert_eq!(
            (r.resident_bytes, r.dense_cache_bytes, r.kv_bytes),
            (resident, dense, kv),
            "{target}"
        );
        assert_eq!(r.needed_bytes, resident + dense + SPEC_HEADROOM + kv);
        assert_eq!(r.allowed_bytes, (0.9 * (192 * GIB) as f64) as u64);
        assert!(r.checked && r.fits());
    }
    let gfx942 =
        check_startup_memory(&enable, &request(&m, Target::Gfx942, 192 * GIB, 0.9, None)).unwrap();
    assert_eq!(
        gfx942.dense_cache_bytes, 0,
        "no hybrid on wave64, so no cache"
    );
    let padded =
        check_startup_memory(&enable, &request(&m, Target::Gfx1151, 192 * GIB, 0.9, None)).unwrap();
    let unpadded =
        check_startup_memory(&enable, &request(&m, Target::Gfx1201, 192 * GIB, 0.9, None)).unwrap();
    assert!(
        padded.dense_cache_bytes > unpadded.dense_cache_bytes,
        "gfx11 dense rows carry the cliff padding"
    );
}

/// Qwen3-8B (36 layers; qkv 4096→6144, o 4096→4096, gate_up 4096→24576, down 12288→4096;
/// asym G = 128; bf16; 8 KV heads × 128; 40960 tokens), worked out by hand from docs/contract.md §5:
/// - gfx1151 weight rows 2048 B and 6144 B are multiples of 1024 → +128 B; dense rows 8192 B
///   and 24576 B are multiples of 2048 → +128 B. gfx1201 pads nothing.
/// - resident = Σ N·row + N·(K/G)·2 + (N/8)·(K/G)·4, times 36: 3,787,849,728 B (gfx1151),
///   3,608,543,232 B (gfx1201); dense cache 14,070,841,344 B / 13,891,534,848 B;
/// - KV = 2·36·8·128·40960·2 = 6,039,797,760 B; headroom 4 GiB = 4,294,967,296 B.
#[test]
fn the_startup_memory_of_qwen3_8b_matches_the_hand_computed_totals() {
    let m = qwen3_8b();
    let enable = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    for (target, resident, dense, needed) in [
        (
            Target::Gfx1151,
            3_787_849_728u64,
            14_070_841_344u64,
            28_193_456_128u64,
        ),
        (
            Target::Gfx1201,
            3_608_543_232,
            13_891_534_848,
            27_834_843_136,
        ),
    ] {
        let r = check_startup_memory(&enable, &request(&m, target, 192 * GIB, 0.9, None)).unwrap();
        assert_eq!(r.resident_bytes, resident, "{target}");
        assert_eq!(r.dense_cache_bytes, dense, "{target}");
        assert_eq!(r.kv_bytes, 6_039_797_760, "{target}");
        assert_eq!(r.headroom_bytes, 4_294_967_296, "{target}");
        assert_eq!(r.needed_bytes, needed, "{target}");
    }
}

#[test]
fn the_startup_memory_check_fails_exactly_when_it_does_not_fit() {
    let m = qwen3_8b();
    let enable = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    let (resident, dense, kv) = expected_terms(&m, Target::Gfx1100, true, m.max_model_len);
    let needed = resident + dense + SPEC_HEADROOM + kv;
    // Device memory such that utilization 1.0 gives exactly `needed`, then one byte less.
    assert!(
        check_startup_memory(&enable, &request(&m, Target::Gfx1100, needed, 1.0, None)).is_ok()
    );
    let e = check_startup_memory(
        &enable,
        &request(&m, Target::Gfx1100, needed - 1, 1.0, None),
    )
    .unwrap_err();
    let StartupMemoryError::DoesNotFit(report) = &e else {
        panic!("wrong error {e}")
    };
    assert_eq!(report.needed_bytes, needed);
    let msg = e.to_string();
    for part in [
        PREFILL_DEQUANT_KEY,
        "raise gpu_memory_utilization",
        "lower max_model_len",
        &needed.to_string(),
        "qwen3-8b",
        "gfx1100",
    ] {
        assert!(
            msg.to_lowercase().contains(&part.to_lowercase()),
            "message lacks {part:?}: {msg}"
        );
    }
}

#[test]
fn a_shorter_max_model_len_or_a_higher_utilization_makes_it_fit() {
    let m = qwen3_8b();
    let enable = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    let (resident, dense, kv_full) = expected_terms(&m, Target::Gfx1151, true, m.max_model_len);
    let (_, _, kv_short) = expected_terms(&m, Target::Gfx1151, true, 4096);
    let needed_full = resident + dense + SPEC_HEADROOM + kv_full;
    let needed_short = resident + dense + SPEC_HEADROOM + kv_short;
    // A device where the full context misses at 0.9 but fits at 1.0, and 4096 tokens fit at 0.9.
    let device = (needed_full as f64 / 0.95) as u64;
    assert!(
        (0.9 * device as f64) < needed_full as f64 && needed_short as f64 <= 0.9 * device as f64
    );
    assert!(
        check_startup_memory(&enable, &request(&m, Target::Gfx1151, device, 0.9, None)).is_err()
    );
    let short = check_startup_memory(
        &enable,
        &request(&m, Target::Gfx1151, device, 0.9, Some(4096)),
    )
    .unwrap();
    assert_eq!(short.kv_bytes, kv_short);
    assert!(
        check_startup_memory(&enable, &request(&m, Target::Gfx1151, device, 1.0, None)).is_ok()
    );
}

#[test]
fn with_the_option_disabled_nothing_is_checked_and_no_cache_is_counted() {
    let m = qwen3_8b();
    let r = check_startup_memory(
        &KernelConfig::default(),
        &request(&m, Target::Gfx1151, GIB, 0.5, None),
    )
    .unwrap();
    assert!(!r.checked);
    assert!(!r.fits(), "the numbers are still reported");
    assert_eq!(r.dense_cache_bytes, 0);
}

#[test]
fn nonsense_inputs_are_refused() {
    let m = qwen3_8b();
    let enable = KernelConfig::with_prefill_dequant(PrefillDequant::Enable);
    for u in [0.0, -0.5, 1.01, f64::NAN] {
        let e = check_startup_memory(&enable, &request(&m, Target::Sm90, 80 * GIB, u, None))
            .unwrap_err();
        assert!(matches!(e, StartupMemoryError::Utilization(_)), "{u}: {e}");
    }
    let e = check_startup_memory(&enable, &request(&m, Target::Sm90, 80 * GIB, 0.9, Some(0)))
        .unwrap_err();
    assert_eq!(e, StartupMemoryError::MaxModelLen);
}
