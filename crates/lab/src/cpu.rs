//! Which CPUs a test thread runs on: a program test-run, and a packet a
//! pinned sender's thread transmits, is counted on the CPU it runs on
//! (`flows` keeps one sub-entry per CPU, DESIGN §4.7), so tests that must
//! exercise several sub-entries pin their senders.

/// The CPUs this process may run on.
#[must_use]
pub fn cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity
    // fills it for the calling thread; CPU_ISSET reads inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let rc = libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut set);
        assert_eq!(
            rc,
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        (0..libc::CPU_SETSIZE as usize)
            .filter(|c| libc::CPU_ISSET(*c, &set))
            .collect()
    }
}

/// Pins the calling thread to `cpu` (a program test-run counts on the CPU
/// it runs on: the (flow key, CPU) sub-entry it writes is that CPU's).
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes
    // inside it; pid 0 affects only the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const set)
    };
    assert_eq!(
        rc,
        0,
        "pin to CPU {cpu}: {} (the test needs two online CPUs)",
        std::io::Error::last_os_error()
    );
}

/// Runs `f` on the calling thread pinned to `cpu` ([`pin_to_cpu`]), then
/// restores the thread's affinity.
pub fn on_cpu<T>(cpu: usize, f: impl FnOnce() -> T) -> T {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `old` is a cpu_set_t of the size passed, written by the call
    // for the calling thread (pid 0).
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut old) };
    assert_eq!(
        rc,
        0,
        "sched_getaffinity: {}",
        std::io::Error::last_os_error()
    );
    pin_to_cpu(cpu);
    let out = f();
    // SAFETY: `old` is the mask read above, passed with its size.
    let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &raw const old) };
    assert_eq!(
        rc,
        0,
        "restore affinity: {}",
        std::io::Error::last_os_error()
    );
    out
}
