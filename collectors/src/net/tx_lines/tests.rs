use super::*;

fn line(interface: &str, driver: Option<&str>, queue: Option<u32>, kind: TxKind) -> TxLine {
    TxLine {
        interface: interface.into(),
        driver: driver.map(Into::into),
        queue,
        kind,
    }
}

/// 3.x–6.1: `NETDEV WATCHDOG: <dev> (<driver>): transmit queue N timed out`, inside the WARNING
/// block (5.10.17, Raspberry Pi 4: raspberrypi/linux#4485; 4.13.16, OpenBMC: openbmc#3192).
#[test]
fn the_wording_of_3_x_to_6_1() {
    assert_eq!(
        parse("NETDEV WATCHDOG: eth0 (bcmgenet): transmit queue 3 timed out"),
        Some(line("eth0", Some("bcmgenet"), Some(3), TxKind::Watchdog))
    );
    assert_eq!(
        parse("NETDEV WATCHDOG: eth0 (ftgmac100): transmit queue 0 timed out"),
        Some(line("eth0", Some("ftgmac100"), Some(0), TxKind::Watchdog))
    );
}

/// 6.2–6.7 add the time the queue stood still (r8169 on 6.5, netdev list, "Re: r8169 link up
/// but no traffic, and watchdog error", 25 Sep 2023).
#[test]
fn the_wording_of_6_2_with_milliseconds() {
    assert_eq!(
        parse("NETDEV WATCHDOG: enp3s0 (r8169): transmit queue 0 timed out 5368 ms"),
        Some(line("enp3s0", Some("r8169"), Some(0), TxKind::Watchdog))
    );
}

/// 6.8+: `netdev_crit`, the device first and the CPU named, no WARNING (OpenWrt 6.6 backport,
/// r8125: csrutil/OpenWrt-NIC-Drivers#11); a device without a parent has no driver prefix.
#[test]
fn the_wording_of_6_8_with_the_device_first() {
    assert_eq!(
        parse(
            "r8125 0000:22:04.0 eth4: NETDEV WATCHDOG: CPU: 3: transmit queue 0 timed out 5010 ms"
        ),
        Some(line("eth4", Some("r8125"), Some(0), TxKind::Watchdog))
    );
    assert_eq!(
        parse("eth1: NETDEV WATCHDOG: CPU: 0: transmit queue 2 timed out 5160 ms"),
        Some(line("eth1", None, Some(2), TxKind::Watchdog))
    );
}

/// ENA (Amazon Linux 2, 4.14: awslabs/amazon-eks-ami#454).
#[test]
fn the_ena_missing_completion() {
    assert_eq!(
        parse("ena 0000:00:05.0 eth0: Found a Tx that wasn't completed on time, qid 5, index 475."),
        Some(line("eth0", Some("ena"), Some(5), TxKind::EnaMissing))
    );
}

/// The lines around a hang, and hostile names, are not hangs.
#[test]
fn other_lines_and_bad_names_are_not_hangs() {
    for m in [
        "------------[ cut here ]------------",
        "WARNING: CPU: 0 PID: 7 at /kernel-source//net/sched/sch_generic.c:316 dev_watchdog+0x22c/0x244",
        "r8125 0000:22:04.0 eth4: rtl_rxtx_empty_cond == 0 (loop: 42, delay: 100).",
        "r8169 0000:03:00.0 enp3s0: Link is Down",
        "NETDEV WATCHDOG: eth0 (e1000e): transmit queue 0",
        "NETDEV WATCHDOG: a/b (x): transmit queue 0 timed out",
        "NETDEV WATCHDOG: averyveryverylongname (x): transmit queue 0 timed out",
        "NETDEV WATCHDOG: eth\u{1b}[2J (x): transmit queue 0 timed out",
        "",
    ] {
        assert_eq!(parse(m), None, "{m:?}");
    }
}

proptest::proptest! {
    #[test]
    fn never_panics(s in "\\PC{0,200}") {
        let _ = parse(&s);
    }

    /// Any valid name and queue printed in each wording comes back.
    #[test]
    fn gives_back_what_was_printed(name in "[a-z][a-z0-9._-]{0,14}", q in 0u32..4096) {
        for m in [
            format!("NETDEV WATCHDOG: {name} (igb): transmit queue {q} timed out"),
            format!("igb 0000:01:00.0 {name}: NETDEV WATCHDOG: CPU: 1: transmit queue {q} timed out 5000 ms"),
        ] {
            let got = parse(&m);
            proptest::prop_assert_eq!(got, Some(line(&name, Some("igb"), Some(q), TxKind::Watchdog)));
        }
    }
}
