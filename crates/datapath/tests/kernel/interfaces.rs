//! Root: `interfaces()` lists the caller's network namespace, whatever
//! namespace `/sys/class/net` was mounted in (issue 8: the agent run inside
//! another namespace saw none of its taps).

use std::process::Command;

/// On a thread of a fresh network namespace (sysfs left as it is: it still
/// shows the namespace the test started in), with one veth pair added.
#[test]
fn interfaces_lists_the_callers_namespace_not_sysfs() {
    let a = format!("lxa{}", std::process::id());
    let b = format!("lxb{}", std::process::id());
    let names = [a.clone(), b.clone()];
    let (listed, indexes) = std::thread::spawn(move || {
        // SAFETY: moves only this thread into a new network namespace; the
        // namespace and its links die with it.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
        let ok = Command::new("ip")
            .args(["link", "add", &a, "type", "veth", "peer", "name", &b])
            .status()
            .unwrap()
            .success();
        assert!(ok, "ip link add {a}");
        let indexes = [&a, &b].map(|n| lachesis_datapath::ifindex(n).unwrap());
        (lachesis_datapath::interfaces().unwrap(), indexes)
    })
    .join()
    .unwrap();
    let lo = listed.iter().find(|(_, n)| n == "lo").map(|(i, _)| *i);
    let mut want = vec![(lo.expect("lo is listed"), "lo".to_owned())];
    want.extend(indexes.into_iter().zip(names));
    want.sort();
    assert_eq!(listed, want);
}
