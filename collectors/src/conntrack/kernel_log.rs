//! The kernel-log seam of the conntrack collector.
//!
//! When the table is full the kernel drops the packet that needed a new entry and logs
//! `nf_conntrack: table full, dropping packet` (rate limited). Some kernels print the module
//! prefix twice (`nf_conntrack: nf_conntrack: table full, dropping packet`); 2.6-era kernels
//! with the old `ip_conntrack` module print `ip_conntrack: table full, dropping packet`.
//!
//! Reading the kernel log is the job of the shared reader (`kmsg.rs`); this module only counts
//! matching messages in whatever message strings that reader yields, so the rule can be tested
//! on plain strings. The count enters the judge as `Sample::table_full_messages`.

/// The text every variant of the message contains.
const TABLE_FULL: &str = "conntrack: table full, dropping packet";

/// True when one kernel message is a conntrack "table full" message.
pub fn is_table_full(message: &str) -> bool {
    message.contains(TABLE_FULL)
}

/// Counts conntrack "table full, dropping packet" messages (every variant, each message once).
pub fn count_table_full<I, S>(messages: I) -> u64
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    messages
        .into_iter()
        .filter(|m| is_table_full(m.as_ref()))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_both_variants_and_skips_others() {
        let messages = [
            // /dev/kmsg record as the shared reader may hand it over (prefix kept).
            "4,10231,91234567,-;nf_conntrack: table full, dropping packet",
            // dmesg-style text with the doubled module prefix.
            "[ 9123.456789] nf_conntrack: nf_conntrack: table full, dropping packet",
            // The message alone.
            "nf_conntrack: table full, dropping packet",
            // 2.6-era module name.
            "ip_conntrack: table full, dropping packet.",
            // Not ours: the rate limiter's summary and unrelated conntrack messages.
            "net_ratelimit: 1234 callbacks suppressed",
            "nf_conntrack: default automatic helper assignment has been turned off for security reasons",
            "nf_conntrack version 0.5.0 (65536 buckets, 262144 max)",
            "",
        ];
        assert_eq!(count_table_full(messages), 4);
        assert_eq!(count_table_full(Vec::<String>::new()), 0);
        assert_eq!(
            count_table_full(vec![
                "nf_conntrack: table full, dropping packet".to_string();
                3
            ]),
            3
        );
    }

    proptest! {
        #[test]
        fn never_panics_and_never_exceeds_message_count(msgs in proptest::collection::vec("\\PC*", 0..20)) {
            let n = count_table_full(&msgs);
            prop_assert!(n <= msgs.len() as u64);
        }
    }
}
