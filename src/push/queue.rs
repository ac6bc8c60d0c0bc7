//! The windows waiting to be sent, and when to try again: pure, so the rules are
//! tested without a network.
//!
//! The queue is bounded by a number of windows: when the server is down for longer
//! than the buffer holds, the oldest windows go first (the newest are what an
//! operator looks at when it comes back) and are counted. Failed sends wait 0.5 s,
//! then twice as long each time, at most 30 s; a success starts over.

use std::collections::VecDeque;
use std::time::Duration;

/// One encoded window, ready to send: one request per profile (the CPU profile, and
/// with off-CPU intervals the wall-time one), all with the same query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Body {
    /// The requests' query string.
    pub query: String,
    /// Gzipped pprof profiles, sent in order.
    pub parts: Vec<Vec<u8>>,
    /// Parts the server has accepted: a retry resends only the rest.
    pub sent_parts: usize,
    /// CPU samples in the window (for the summary).
    pub samples: u64,
}

impl Body {
    /// The next part to send.
    pub(super) fn next_part(&self) -> Option<&[u8]> {
        self.parts.get(self.sent_parts).map(Vec::as_slice)
    }
}

/// Windows waiting to be sent, oldest first, at most `cap`.
#[derive(Debug)]
pub(crate) struct Queue {
    items: VecDeque<Body>,
    cap: usize,
    /// Windows dropped because the queue was full.
    pub dropped: u64,
}

impl Queue {
    pub(super) fn new(cap: usize) -> Queue {
        Queue {
            items: VecDeque::new(),
            cap: cap.max(1),
            dropped: 0,
        }
    }

    /// Adds a window; when full, the oldest is dropped and counted.
    pub(super) fn push(&mut self, b: Body) {
        if self.items.len() == self.cap {
            self.items.pop_front();
            self.dropped += 1;
        }
        self.items.push_back(b);
    }

    pub(super) fn front(&self) -> Option<&Body> {
        self.items.front()
    }

    pub(super) fn front_mut(&mut self) -> Option<&mut Body> {
        self.items.front_mut()
    }

    pub(super) fn pop(&mut self) -> Option<Body> {
        self.items.pop_front()
    }

    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Exponential backoff between failed attempts.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failures: u32,
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(500);
    const MAX: Duration = Duration::from_secs(30);

    /// The wait after one more failure.
    pub(super) fn next(&mut self) -> Duration {
        let d = Self::FIRST
            .saturating_mul(1u32 << self.failures.min(16))
            .min(Self::MAX);
        self.failures = self.failures.saturating_add(1);
        d
    }

    pub(super) fn reset(&mut self) {
        self.failures = 0;
    }

    /// Whether the last attempt failed.
    pub(super) fn failing(&self) -> bool {
        self.failures > 0
    }
}

/// What to do after a response or a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Accepted.
    Sent,
    /// Try the same window again later: the server or the network failed.
    Retry,
    /// The server refused this request as bad, or its certificate does not verify:
    /// retrying the same body cannot help.
    Reject,
}

/// The outcome of an HTTP status. 408 (timeout) and 429 (too many requests) are
/// transient; other 4xx say the request is wrong (bad auth, bad name, too large).
/// 3xx are refused too: a POST is not followed to another place.
pub(crate) fn outcome(status: u16) -> Outcome {
    match status {
        200..=299 => Outcome::Sent,
        408 | 425 | 429 => Outcome::Retry,
        300..=499 => Outcome::Reject,
        _ => Outcome::Retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(n: u64) -> Body {
        Body {
            query: format!("w{n}"),
            parts: vec![vec![1], vec![2]],
            sent_parts: 0,
            samples: n,
        }
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_counts_them() {
        let mut q = Queue::new(3);
        for n in 0..5 {
            q.push(body(n));
        }
        assert_eq!(q.dropped, 2);
        assert_eq!(q.len(), 3);
        q.front_mut().unwrap().sent_parts = 1;
        assert_eq!(q.front().unwrap().next_part(), Some(&[2u8][..]));
        let left: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|b| b.samples).collect();
        assert_eq!(left, [2, 3, 4]);
    }

    #[test]
    fn backoff_doubles_to_thirty_seconds_and_starts_over_after_a_success() {
        let mut b = Backoff::default();
        let waits: Vec<u64> = (0..9).map(|_| b.next().as_millis() as u64).collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert!(b.failing());
        b.reset();
        assert!(!b.failing());
        assert_eq!(b.next(), Duration::from_millis(500));
        for _ in 0..100 {
            b.next();
        }
        assert_eq!(b.next(), Duration::from_secs(30));
    }

    #[test]
    fn statuses_retry_only_what_can_get_better() {
        for (s, o) in [
            (200, Outcome::Sent),
            (204, Outcome::Sent),
            (301, Outcome::Reject),
            (400, Outcome::Reject),
            (401, Outcome::Reject),
            (413, Outcome::Reject),
            (422, Outcome::Reject),
            (408, Outcome::Retry),
            (429, Outcome::Retry),
            (500, Outcome::Retry),
            (502, Outcome::Retry),
            (503, Outcome::Retry),
        ] {
            assert_eq!(outcome(s), o, "{s}");
        }
    }
}
