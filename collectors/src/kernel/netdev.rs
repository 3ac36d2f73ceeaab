//! A network device that cannot be freed, unchanged in form from 3.10 to 6.x:
//!
//! ```text
//! unregister_netdevice: waiting for lo to become free. Usage count = 1
//! unregister_netdevice: waiting for veth3f2a1b4 to become free. Usage count = 2
//! ```
//!
//! The kernel repeats it every 10 s while the device's references are held (a leaked
//! reference, often of a network namespace a pod left): the namespace is never torn down.

use crate::needle::Needle;

/// One `waiting for <dev> to become free` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    pub device: String,
    pub usage_count: Option<u64>,
}

/// Parses a kernel log message; `None` when it is not such a line.
pub fn parse(message: &str) -> Option<Wait> {
    static WAITING: Needle = Needle::new("unregister_netdevice: waiting for ");
    let rest = WAITING.after(message)?;
    let (device, after) = rest.split_once(" to become free")?;
    // An interface name: at most 15 bytes, no spaces or slashes.
    let ok = !device.is_empty()
        && device.len() <= 15
        && device
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | ':'));
    if !ok {
        return None;
    }
    let usage_count = after.split_once("Usage count = ").and_then(|(_, n)| {
        let d: String = n
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .take(12)
            .collect();
        d.parse().ok()
    });
    Some(Wait {
        device: device.to_string(),
        usage_count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wordings() {
        assert_eq!(
            parse("unregister_netdevice: waiting for lo to become free. Usage count = 1"),
            Some(Wait {
                device: "lo".into(),
                usage_count: Some(1)
            })
        );
        assert_eq!(
            parse("unregister_netdevice: waiting for veth3f2a1b4 to become free. Usage count = 2")
                .map(|w| w.device),
            Some("veth3f2a1b4".to_string())
        );
        assert_eq!(
            parse("unregister_netdevice: waiting for a/b to become free. Usage count = 1"),
            None
        );
        assert_eq!(
            parse("unregister_netdevice: waiting for  to become free."),
            None
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "unregister_netdevice: waiting for \\PC{0,20} to become free\\. Usage count = \\PC{0,12}") {
            let _ = parse(&s);
        }
        /// `unregister_netdevice: waiting for %s to become free. Usage count = %d` as
        /// `netdev_wait_allrefs()` prints it, any valid interface name (`dev_valid_name()`:
        /// at most 15 bytes, no `/`, `:` or space): the device and the count read back.
        #[test]
        fn parses_what_the_kernel_prints(device in "[a-zA-Z0-9_.@-]{1,15}", count in 0u32..=i32::MAX as u32) {
            let line = format!("unregister_netdevice: waiting for {device} to become free. Usage count = {count}");
            proptest::prop_assert_eq!(parse(&line), Some(Wait { device, usage_count: Some(u64::from(count)) }));
        }
    }
}
