//! `/proc/sys/kernel/tainted`: the kernel's taint bits (`Documentation/admin-guide/
//! tainted-kernels.rst`). node-doctor names the bits that say something about the machine or
//! the kernel's health, and leaves out those a healthy GPU or storage node carries by design:
//! P (0, proprietary module), O (12, out-of-tree module), E (13, unsigned module).

/// The bits that matter here: (bit, flag letter, what it means).
pub const FLAGS: &[(u32, char, &str)] = &[
    (4, 'M', "machine check"),
    (5, 'B', "bad page"),
    (7, 'D', "kernel died (oops or BUG)"),
    (9, 'W', "kernel warning"),
    (14, 'L', "soft lockup"),
];

/// The file's text: one decimal number.
pub fn parse(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// The flags of [`FLAGS`] set in `value`, in bit order.
pub fn flags(value: u64) -> Vec<char> {
    FLAGS
        .iter()
        .filter(|(bit, _, _)| value & (1u64 << bit) != 0)
        .map(|(_, c, _)| *c)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_only_the_bits_that_matter() {
        // P + O + E: a GPU node with nvidia.ko.
        assert_eq!(flags(1 | (1 << 12) | (1 << 13)), Vec::<char>::new());
        // D + W + M.
        assert_eq!(flags((1 << 7) | (1 << 9) | (1 << 4)), vec!['M', 'D', 'W']);
        assert_eq!(parse("4096\n"), Some(4096));
        assert_eq!(parse("x"), None);
    }
}
