//! Bounds on the HTTP server's connections: a table with a fixed cap that, when full, makes
//! room by closing the connection that has been quiet longest (a client that never finished a
//! request goes before one that did), an IO wrapper that records each connection's activity
//! and closes a connection whose client stops reading a response, and a throttle for the log
//! lines this produces. The policy is plain data, tested without sockets; `server.rs` drives
//! it.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// Milliseconds since the server started (monotonic, tokio's clock, so paused time in tests
/// applies), the unit of every activity stamp.
#[derive(Clone, Copy, Debug)]
pub struct Clock(tokio::time::Instant);

impl Clock {
    pub fn new() -> Clock {
        Clock(tokio::time::Instant::now())
    }

    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.0.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

/// What the table knows about one open connection; shared with the connection's task.
#[derive(Debug, Default)]
pub struct ConnState {
    /// When a byte was last read from or written to the client ([`Clock`] ms).
    last_active_ms: AtomicU64,
    /// The client has sent at least one complete request.
    served: AtomicBool,
    /// Notified when the table evicts the connection: its task drops the socket.
    pub close: Notify,
}

impl ConnState {
    pub fn touch(&self, now_ms: u64) {
        self.last_active_ms.store(now_ms, Ordering::Relaxed);
    }

    pub fn mark_served(&self) {
        self.served.store(true, Ordering::Relaxed);
    }

    /// Eviction order: smallest first.
    fn eviction_key(&self) -> (bool, u64) {
        (
            self.served.load(Ordering::Relaxed),
            self.last_active_ms.load(Ordering::Relaxed),
        )
    }
}

/// The open connections, at most `cap` of them.
#[derive(Debug)]
pub struct ConnTable {
    cap: usize,
    next_id: u64,
    open: HashMap<u64, Arc<ConnState>>,
}

/// A connection the table has taken in.
pub struct Admitted {
    pub id: u64,
    pub state: Arc<ConnState>,
    /// The connection closed to make room for this one (already removed and notified).
    pub evicted: Option<Arc<ConnState>>,
}

impl ConnTable {
    pub fn new(cap: usize) -> ConnTable {
        ConnTable {
            cap: cap.max(1),
            next_id: 0,
            open: HashMap::with_capacity(cap.max(1)),
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Takes in a new connection. At the cap, first evicts the connection that has been
    /// quiet longest, preferring one that has not yet completed a request: an idle flood
    /// then pushes out its own oldest members, while a client that just connected (its stamp
    /// is the newest) has time to send its request, and a client that was answered keeps
    /// its keep-alive connection longest.
    pub fn admit(&mut self, now_ms: u64) -> Admitted {
        let evicted = if self.open.len() >= self.cap {
            self.victim()
                .and_then(|id| self.open.remove(&id))
                .inspect(|v| v.close.notify_one())
        } else {
            None
        };
        let id = self.next_id;
        self.next_id += 1;
        let state = Arc::new(ConnState::default());
        state.touch(now_ms);
        self.open.insert(id, Arc::clone(&state));
        Admitted { id, state, evicted }
    }

    /// Forgets a connection that ended (a no-op for one already evicted).
    pub fn remove(&mut self, id: u64) {
        self.open.remove(&id);
    }

    /// The connection to close first: not yet served before served, then quiet longest,
    /// then oldest. A scan: the table is small (the cap) and this runs only when it is full.
    fn victim(&self) -> Option<u64> {
        self.open
            .iter()
            .min_by_key(|(id, s)| (s.eviction_key(), **id))
            .map(|(id, _)| *id)
    }
}

/// Removes its connection from the table when the connection's task ends, however it ends.
pub struct Registration {
    table: Arc<Mutex<ConnTable>>,
    id: u64,
}

impl Registration {
    pub fn new(table: Arc<Mutex<ConnTable>>, id: u64) -> Registration {
        Registration { table, id }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(self.id);
    }
}

/// Lets an event through at most once per period and counts the ones held back, so a
/// flood is logged as one line a minute with a count, never a line per connection.
#[derive(Debug)]
pub struct Throttle {
    period_ms: u64,
    last_ms: Option<u64>,
    held_back: u64,
}

impl Throttle {
    pub fn new(period: Duration) -> Throttle {
        Throttle {
            period_ms: u64::try_from(period.as_millis()).unwrap_or(u64::MAX),
            last_ms: None,
            held_back: 0,
        }
    }

    /// Records one event; `Some(n)` when it should be logged, `n` counting it and the events
    /// held back since the last logged one.
    pub fn hit(&mut self, now_ms: u64) -> Option<u64> {
        self.held_back += 1;
        match self.last_ms {
            Some(last) if now_ms.saturating_sub(last) < self.period_ms => None,
            _ => {
                self.last_ms = Some(now_ms);
                Some(std::mem::take(&mut self.held_back))
            }
        }
    }
}

/// A socket that stamps its connection's activity on every byte moved, and fails a write
/// that makes no progress for `write_stall` (a client that requested a body and stopped
/// reading it would otherwise hold the connection, and the response, forever: hyper has
/// no write timeout).
pub struct Tracked<T> {
    io: T,
    state: Arc<ConnState>,
    clock: Clock,
    write_stall: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> Tracked<T> {
    pub fn new(io: T, state: Arc<ConnState>, clock: Clock, write_stall: Duration) -> Tracked<T> {
        Tracked {
            io,
            state,
            clock,
            write_stall,
            stalled: None,
        }
    }

    fn progressed(&mut self) {
        self.stalled = None;
        self.state.touch(self.clock.now_ms());
    }

    /// Called when the socket would block a write: pending until the stall timer fires.
    fn poll_stall(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let limit = self.write_stall;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing for {} s; closing",
                    limit.as_secs_f64()
                ),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Pending => self.poll_stall(cx),
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.progressed();
                }
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Tracked<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            let now = self.clock.now_ms();
            self.state.touch(now);
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Tracked<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write(cx, data);
        self.after_write(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.after_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Connections the server closed on its own since it started, by reason (`/metrics`:
/// `node_doctor_http_connections_shed_total{reason}`): `limit`, the longest-idle connection
/// closed to admit a new one at the server's `MAX_CONNECTIONS`; `no_request`, a connection that sent
/// nothing within its `HEADER_READ_TIMEOUT`.
pub struct Shed {
    pub limit: std::sync::atomic::AtomicU64,
    pub no_request: std::sync::atomic::AtomicU64,
}

pub static SHED: Shed = Shed {
    limit: std::sync::atomic::AtomicU64::new(0),
    no_request: std::sync::atomic::AtomicU64::new(0),
};

impl Shed {
    /// `(reason, count)` of every reason.
    pub fn counts(&self) -> [(&'static str, u64); 2] {
        use std::sync::atomic::Ordering::Relaxed;
        [
            ("limit", self.limit.load(Relaxed)),
            ("no_request", self.no_request.load(Relaxed)),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(t: &ConnTable) -> Vec<u64> {
        let mut v: Vec<u64> = t.open.keys().copied().collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn below_the_cap_nothing_is_evicted() {
        let mut t = ConnTable::new(3);
        for now in 0..3 {
            assert!(t.admit(now).evicted.is_none());
        }
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn at_the_cap_the_longest_quiet_connection_goes_first() {
        let mut t = ConnTable::new(3);
        let a = t.admit(0);
        let b = t.admit(10);
        let c = t.admit(20);
        // a spoke most recently; b has been quiet longest.
        a.state.touch(30);
        let d = t.admit(40);
        let gone = d.evicted.expect("an eviction at the cap");
        assert!(Arc::ptr_eq(&gone, &b.state));
        assert_eq!(ids(&t), vec![a.id, c.id, d.id]);
    }

    #[test]
    fn a_client_that_was_answered_outlasts_an_idle_flood() {
        let mut t = ConnTable::new(4);
        let scraper = t.admit(0);
        scraper.state.mark_served();
        // A flood of connections that never complete a request: each new one pushes out the
        // oldest of the flood, never the scraper, however long the scraper has been quiet.
        let mut flood = Vec::new();
        for now in 1..=100 {
            let a = t.admit(now);
            if let Some(v) = &a.evicted {
                assert!(!Arc::ptr_eq(v, &scraper.state), "scraper evicted at {now}");
            }
            flood.push(a);
        }
        assert_eq!(t.len(), 4);
        let kept = ids(&t);
        assert!(kept.contains(&scraper.id));
        // The newest three of the flood stay: a client that connects during the flood is
        // the newest and is not the next to go.
        assert_eq!(&kept[1..], &[flood[97].id, flood[98].id, flood[99].id]);
        // Once only served connections are left, the quietest of them goes.
        for f in &flood[97..] {
            f.state.mark_served();
        }
        flood[97].state.touch(200);
        flood[98].state.touch(201);
        flood[99].state.touch(202);
        let next = t.admit(203);
        assert!(Arc::ptr_eq(next.evicted.as_ref().unwrap(), &scraper.state));
    }

    #[test]
    fn ties_go_to_the_oldest_connection() {
        let mut t = ConnTable::new(2);
        let a = t.admit(5);
        let _b = t.admit(5);
        let c = t.admit(5);
        assert!(Arc::ptr_eq(c.evicted.as_ref().unwrap(), &a.state));
    }

    #[test]
    fn ended_connections_leave_room() {
        let table = Arc::new(Mutex::new(ConnTable::new(2)));
        let a = table.lock().unwrap().admit(0);
        let b = table.lock().unwrap().admit(1);
        drop(Registration::new(Arc::clone(&table), a.id));
        let c = table.lock().unwrap().admit(2);
        assert!(c.evicted.is_none());
        // Removing an evicted id twice is harmless.
        let d = table.lock().unwrap().admit(3);
        assert!(Arc::ptr_eq(d.evicted.as_ref().unwrap(), &b.state));
        drop(Registration::new(Arc::clone(&table), b.id));
        assert_eq!(table.lock().unwrap().len(), 2);
    }

    #[test]
    fn a_cap_of_zero_still_admits_one() {
        let mut t = ConnTable::new(0);
        let a = t.admit(0);
        let b = t.admit(1);
        assert!(Arc::ptr_eq(b.evicted.as_ref().unwrap(), &a.state));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn the_throttle_logs_once_per_period_with_the_count() {
        let mut th = Throttle::new(Duration::from_secs(60));
        assert_eq!(th.hit(1_000), Some(1));
        for now in 1_001..1_500 {
            assert_eq!(th.hit(now), None);
        }
        assert_eq!(th.hit(60_999), None);
        // 499 held back plus this one.
        assert_eq!(th.hit(61_000), Some(501));
        assert_eq!(th.hit(61_001), None);
        assert_eq!(th.hit(200_000), Some(2));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_evicted_connection_is_woken_even_if_it_was_not_waiting_yet() {
        let mut t = ConnTable::new(1);
        let a = t.admit(0);
        let _b = t.admit(1);
        // The permit is stored until the connection's task waits for it.
        tokio::time::timeout(Duration::from_secs(1), a.state.close.notified())
            .await
            .expect("woken");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_write_the_client_never_reads_fails_after_the_stall_limit() {
        use tokio::io::AsyncWriteExt;
        // A pipe whose far end is never read: writes block once its buffer is full.
        let (near, _far) = tokio::io::duplex(64);
        let state = Arc::new(ConnState::default());
        let mut io = Tracked::new(
            near,
            Arc::clone(&state),
            Clock::new(),
            Duration::from_secs(10),
        );
        let started = tokio::time::Instant::now();
        let err = io
            .write_all(&[b'x'; 1024])
            .await
            .expect_err("the write must fail");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_slow_reader_that_keeps_reading_is_not_cut_off() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (near, mut far) = tokio::io::duplex(64);
        let state = Arc::new(ConnState::default());
        let clock = Clock::new();
        let mut io = Tracked::new(near, Arc::clone(&state), clock, Duration::from_secs(10));
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0u8; 64];
            // Reads 64 bytes every 5 s: slower than the writer, never quiet for 10 s.
            while got < 1024 {
                tokio::time::sleep(Duration::from_secs(5)).await;
                got += far.read(&mut buf).await.unwrap();
            }
            got
        });
        io.write_all(&[b'x'; 1024])
            .await
            .expect("progress resets the stall timer");
        assert_eq!(reader.await.unwrap(), 1024);
        // 1024 bytes at 64 per 5 s: the last write landed about 75 s in.
        let stamp = state.eviction_key().1;
        assert!((70_000..=80_000).contains(&stamp), "{stamp}");
    }
}
