// Burns CPU for the given seconds, 3/4 in heavy() and 1/4 in light(), each some calls
// below main, in a crate built without frame pointers: tests/e2e/test_names.py checks
// that `config/unwind auto` gives whole stacks.
use std::time::{Duration, Instant};

// std::hint::black_box is newer than Debian 12's rustc (1.63).
fn black_box<T: Copy>(x: T) -> T {
    unsafe { std::ptr::read_volatile(&x) }
}

#[inline(never)]
fn spin(rounds: u64) -> u64 {
    let mut x = black_box(1u64);
    for i in 0..rounds {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i) ^ (x >> 7);
    }
    x
}

#[inline(never)]
fn heavy() -> u64 {
    // Work after the call: a tail call would leave heavy() off the stack.
    spin(black_box(3_000_000)) ^ black_box(1)
}

#[inline(never)]
fn light() -> u64 {
    spin(black_box(1_000_000)) ^ black_box(1)
}

#[inline(never)]
fn work(until: Instant) -> u64 {
    let mut sum = 0u64;
    while Instant::now() < until {
        sum = sum.wrapping_add(heavy());
        sum = sum.wrapping_add(light());
    }
    sum
}

fn main() {
    let secs: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(5.0);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    println!("{}", black_box(work(until)));
}
