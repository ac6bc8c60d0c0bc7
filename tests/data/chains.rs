//! Rust test target (built with `rustc -O -g`, so no frame pointers): a named thread
//! runs a closure through a generic function into a generic hot loop.
//! Chain: ... chains::main::{{closure}} -> chains::apply::<..> -> {{closure}} -> chains::hot::<u32>.

use std::hint::black_box;

#[inline(never)]
fn hot<T: Copy + Into<u64>>(x: T) -> u64 {
    let mut s = 0u64;
    for i in 0..200_000u64 {
        s = s.wrapping_add(black_box(i) ^ x.into());
    }
    s
}

#[inline(never)]
fn apply<F: Fn(u64) -> u64>(f: F, v: u64) -> u64 {
    black_box(f(black_box(v)))
}

fn main() {
    std::thread::Builder::new()
        .name("rusty".into())
        .spawn(|| loop {
            black_box(apply(|v| hot::<u32>(v as u32), 3));
        })
        .expect("spawn");
    println!("ready");
    loop {
        std::thread::park();
    }
}
