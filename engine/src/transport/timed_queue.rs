//! A queue of items released at given session times, ties broken by insertion order.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;

#[derive(Debug)]
struct Timed<T> {
    at: Duration,
    order: u64,
    item: T,
}

impl<T> PartialEq for Timed<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.order) == (other.at, other.order)
    }
}

impl<T> Eq for Timed<T> {}

impl<T> PartialOrd for Timed<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Timed<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.order).cmp(&(other.at, other.order))
    }
}

/// Holds datagrams until their time comes: arrivals in the in-memory network, delayed sends in front of a socket.
///
/// Items due at the same time come out in the order they went in, which is what keeps reliable messages with equal
/// arrival times in send order.
#[derive(Debug)]
pub(crate) struct TimedQueue<T> {
    heap: BinaryHeap<Reverse<Timed<T>>>,
    next_order: u64,
}

impl<T> Default for TimedQueue<T> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            next_order: 0,
        }
    }
}

impl<T> TimedQueue<T> {
    /// Queues `item` for release at `at`.
    pub(crate) fn push(&mut self, at: Duration, item: T) {
        self.heap.push(Reverse(Timed {
            at,
            order: self.next_order,
            item,
        }));
        self.next_order += 1;
    }

    /// The earliest release time, if anything is queued.
    pub(crate) fn next_time(&self) -> Option<Duration> {
        self.heap.peek().map(|next| next.0.at)
    }

    /// Removes and returns the earliest item due by `now`.
    pub(crate) fn pop_due(&mut self, now: Duration) -> Option<T> {
        if self.next_time()? > now {
            return None;
        }
        self.heap.pop().map(|next| next.0.item)
    }

    /// Number of queued items.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_by_time_then_insertion_order() {
        let ms = Duration::from_millis;
        let mut queue = TimedQueue::default();
        queue.push(ms(20), "late");
        queue.push(ms(10), "first");
        queue.push(ms(10), "second");
        assert_eq!(queue.len(), 3);
        assert_eq!(queue.next_time(), Some(ms(10)));
        assert_eq!(queue.pop_due(ms(9)), None);
        assert_eq!(queue.pop_due(ms(10)), Some("first"));
        assert_eq!(queue.pop_due(ms(10)), Some("second"));
        assert_eq!(queue.pop_due(ms(19)), None);
        assert_eq!(queue.pop_due(ms(30)), Some("late"));
        assert_eq!(queue.pop_due(ms(30)), None);
        assert_eq!(queue.next_time(), None);
    }
}
