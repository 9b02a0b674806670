//! glibc `malloc` tuning for a process whose memory is mostly long-lived cache entries.
//!
//! glibc serves a large request (a page of a list response, a watch event of a big object) from
//! `mmap` and returns it to the kernel on free, until the first such free: from then on its
//! *dynamic* threshold rises to that size (up to 32 MiB) and large buffers come from the heap,
//! where the cache entries allocated around them keep the freed space from ever being returned.
//! Pinning the threshold (which also stops the dynamic adjustment) and the trim threshold at
//! 128 KiB keeps transient buffers out of the heap. Measured with `make bench-propagation`
//! (2,000 templates × 3 members): peak RSS of the restarted process 154.6 → 149.8 MiB, of the
//! burst 139.5 → 137.5 MiB (docs/benchmarks-history.md, round 5).
//!
//! Other C libraries (musl) and other systems are left alone.

/// The threshold in bytes: glibc's own default before its dynamic adjustment kicks in.
const THRESHOLD: i32 = 128 * 1024;

/// Applies the tuning; returns whether the C library accepted it (always `false` off glibc).
/// Call before the async runtime starts its threads.
pub fn tune() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallopt` only sets malloc's parameters (plain integers, no pointers) and is
        // thread-safe; an unknown parameter or value is refused with 0, not undefined behaviour.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, THRESHOLD) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, THRESHOLD) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn glibc_accepts_the_thresholds() {
        assert!(super::tune());
    }
}
