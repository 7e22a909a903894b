//! `cfg(curve)`: the CURVE keys and endpoint steps, built with either backend that speaks CURVE.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(curve)");
    let speaks_curve = ["CARGO_FEATURE_LIBZMQ", "CARGO_FEATURE_OMQ"]
        .iter()
        .any(|feature| std::env::var_os(feature).is_some());
    if speaks_curve {
        println!("cargo::rustc-cfg=curve");
    }
}
