//! How the perf reports print numbers: 3 significant digits, signed percentages, p-values.

/// `x` to 3 significant digits (33.6, 1370, 0.213); "—" where there is no number.
pub(crate) fn fmt_sig3(x: f64) -> String {
    if !x.is_finite() {
        return "—".into();
    }
    if x == 0.0 {
        return "0".into();
    }
    // Round first, so that 9.996 prints as 10.0 rather than 10.00.
    let magnitude = |v: f64| v.abs().log10().floor() as i32;
    let f = 10f64.powi(2 - magnitude(x));
    let r = (x * f).round() / f;
    let decimals = (2 - magnitude(r)).max(0) as usize;
    format!("{r:.decimals$}")
}

/// A shift as a signed percentage, one decimal: `+20.0 %`.
pub(crate) fn fmt_delta(d: f64) -> String {
    if d.is_finite() {
        format!("{:+.1} %", d * 100.0)
    } else {
        "—".into()
    }
}

/// A p-value: three decimals, scientific below 0.001, `n/a` where no test ran.
pub(crate) fn fmt_p(p: f64) -> String {
    if !p.is_finite() {
        "n/a".into()
    } else if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// `x` through `f`, or "—" where there is no number.
pub(crate) fn opt(x: Option<f64>, f: fn(f64) -> String) -> String {
    x.map_or_else(|| "—".into(), f)
}

/// `1 case`, `2 cases`.
pub(crate) fn plural(n: usize, noun: &str) -> String {
    format!("{n} {noun}{}", if n == 1 { "" } else { "s" })
}
