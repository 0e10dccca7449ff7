//! Hands the linker script to the linker (an absolute path: cargo runs the linker elsewhere).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| String::from("."));
    println!("cargo:rerun-if-changed=link.x");
    println!("cargo:rustc-link-arg=-T{dir}/link.x");
}
