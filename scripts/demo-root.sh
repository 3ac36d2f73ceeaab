#!/usr/bin/env bash
# Stages the small fake host root that docs/run.md's "A full report" is taken from (the same staging
# as tests/e2e/deploy.rs::fake_host_root, with hostname worker-1): a quiet 2-CPU node with a
# kubelet directory, conntrack tables in pid 1's network view, and one page allocation
# failure of order 4 in the kernel log an hour before "now" (uptime 86400 s).
#
#   scripts/demo-root.sh /tmp/fakeroot && node-doctor check --host-root /tmp/fakeroot/root
set -euo pipefail
dir="${1:?usage: scripts/demo-root.sh DIR  (the root is staged at DIR/root)}"
root="$dir/root"
rm -rf "$root"
w() { mkdir -p "$(dirname "$root/$1")"; printf '%b' "$2" > "$root/$1"; }
w etc/hostname 'worker-1\n'
w proc/loadavg '0.52 0.41 0.35 2/219 23311\n'
w proc/uptime '86400.00 170000.00\n'
w proc/stat 'cpu  1000 0 500 100000 10 0 5 0 0 0\ncpu0 500 0 250 50000 5 0 3 0 0 0\ncpu1 500 0 250 50000 5 0 2 0 0 0\nctxt 123456\nbtime 1763798400\nprocesses 22000\nprocs_running 1\nprocs_blocked 0\n'
w proc/diskstats '   8       0 sda 1000 0 20000 500 2000 0 40000 1000 0 1500 1500 0 0 0 0 0 0\n'
w sys/devices/system/cpu/online '0-1\n'
w proc/meminfo 'MemTotal:       24684084 kB\nMemFree:        21874744 kB\nMemAvailable:   24117824 kB\n'
w proc/vmstat 'compact_stall 0\ncompact_fail 0\n'
w proc/buddyinfo 'Node 0, zone      DMA      1      1      1      0      2      1      1      0      1      1      3\nNode 0, zone   Normal   1163   1101    932    222     40     10      2      1      0      0      0\n'
w dev/kmsg '4,100,82800000000,-;mysqld: page allocation failure: order:4, mode:0x10c0d0\n'
w proc/1/net/stat/nf_conntrack 'entries  clashres found new invalid ignore delete chainlength insert insert_failed drop early_drop icmp_error  expect_new expect_create expect_delete search_restart\n00000100  00000000 00000010 00000000 00000002 00000000 00000000 00000000 00000000 00000003 00000000 00000000 00000000  00000000 00000000 00000000 00000001\n'
w proc/sys/net/netfilter/nf_conntrack_max '65536\n'
w proc/sys/net/netfilter/nf_conntrack_buckets '16384\n'
w proc/1/net/snmp 'Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\nUdp: 1200 3 17 1300 11 0 0 0 0\n'
w proc/1/net/udp '   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n'
w proc/sys/fs/file-nr '1184\t0\t2470938\n'
w proc/sys/fs/nr_open '1048576\n'
w proc/1/net/stat/arp_cache 'entries  allocs   destroys hash_grows lookups  hits     res_failed rcv_probes_mcast rcv_probes_ucast periodic_gc_runs forced_gc_runs unresolved_discards table_fulls\n00000002 0000007e 00000080 00000000   0000014c 00000000 00000000   00000000         00000000         00000000         00000000       00000000            00000000\n'
w proc/sys/net/ipv4/neigh/default/gc_thresh1 '128\n'
w proc/sys/net/ipv4/neigh/default/gc_thresh2 '512\n'
w proc/sys/net/ipv4/neigh/default/gc_thresh3 '1024\n'
w proc/1/net/sockstat 'sockets: used 11\nTCP: inuse 1 orphan 0 tw 0 alloc 1 mem 102\n'
w proc/sys/net/ipv4/tcp_mem '288459\t384612\t576918\n'
w proc/sys/net/ipv4/tcp_max_orphans '131072\n'
# The net collector's files (this VM's 6.18 softnet lines; only the loopback interface).
w proc/net/softnet_stat '002a31dc 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n002dd379 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000000 00000000\n'
w sys/class/net/lo/type '772\n'
dev=$(stat -c '%d' "$root")
w proc/1/mountinfo "22 1 $((dev >> 8)):$((dev & 0xff)) / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
mkdir -p "$root/var/lib/kubelet/pods"
echo "staged $root"
