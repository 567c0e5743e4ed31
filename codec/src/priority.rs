//! The priority accumulator: which objects go into the next packet.
//!
//! Every frame each object gets a priority. A positive one is added to the object's accumulator, so an object
//! waits at most as long as its priority says; a negative one (held objects, objects the sender has no business
//! sending) sets the accumulator to -1 and the object is never offered. A packet takes objects in accumulator
//! order until its byte budget is spent; the packet writer reports which ones went in, and those go back to 0.

/// Per-object accumulators for object ids `0..len`.
#[derive(Debug, Clone, Default)]
pub struct PriorityAccumulator {
    accumulators: Vec<f32>,
}

impl PriorityAccumulator {
    /// Accumulators for `objects` objects, all at 0.
    pub fn new(objects: usize) -> Self {
        Self {
            accumulators: vec![0.0; objects],
        }
    }

    /// Number of objects tracked.
    pub fn len(&self) -> usize {
        self.accumulators.len()
    }

    /// True when no objects are tracked.
    pub fn is_empty(&self) -> bool {
        self.accumulators.is_empty()
    }

    /// Applies one frame's priority to object `id`: positive adds, negative (or NaN) sets -1. Unknown ids are
    /// ignored.
    pub fn add(&mut self, id: u16, priority: f32) {
        if let Some(a) = self.accumulators.get_mut(usize::from(id)) {
            if priority >= 0.0 {
                *a = a.max(0.0) + priority;
            } else {
                *a = -1.0;
            }
        }
    }

    /// Applies one frame's priorities to every object (`priorities[id]`).
    pub fn add_all(&mut self, priorities: &[f32]) {
        for (id, &p) in priorities.iter().enumerate().take(self.accumulators.len()) {
            self.add(id as u16, p);
        }
    }

    /// The current accumulator of object `id`.
    pub fn get(&self, id: u16) -> Option<f32> {
        self.accumulators.get(usize::from(id)).copied()
    }

    /// Fills `out` with the ids that may be sent, highest accumulator first (ties by lower id).
    pub fn order_into(&self, out: &mut Vec<u16>) {
        out.clear();
        out.extend(
            self.accumulators
                .iter()
                .enumerate()
                .filter(|(_, a)| **a >= 0.0)
                .map(|(i, _)| i as u16),
        );
        let acc = &self.accumulators;
        out.sort_by(|&a, &b| {
            acc[usize::from(b)]
                .total_cmp(&acc[usize::from(a)])
                .then(a.cmp(&b))
        });
    }

    /// The ids that may be sent, highest accumulator first.
    pub fn order(&self) -> Vec<u16> {
        let mut out = Vec::new();
        self.order_into(&mut out);
        out
    }

    /// Resets the accumulators of the objects a packet carried.
    pub fn mark_sent(&mut self, ids: &[u16]) {
        for &id in ids {
            if let Some(a) = self.accumulators.get_mut(usize::from(id)) {
                *a = 0.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_follows_accumulated_priority() {
        let mut p = PriorityAccumulator::new(4);
        p.add_all(&[1.0, 10.0, -1.0, 1.0]);
        p.add_all(&[1.0, 10.0, 5.0, 1.0]);
        // Object 2 was reset to -1 then gained 5: from -1, a positive priority starts over at 0.
        assert_eq!(p.get(2), Some(5.0));
        assert_eq!(p.order(), vec![1, 2, 0, 3]);
        p.mark_sent(&[1, 2]);
        assert_eq!(p.order(), vec![0, 3, 1, 2]);
    }

    #[test]
    fn negative_priority_is_never_offered() {
        let mut p = PriorityAccumulator::new(3);
        p.add_all(&[1.0, 1_000_000.0, 1.0]);
        p.add(1, -1.0);
        p.add(0, f32::NAN);
        assert_eq!(p.order(), vec![2]);
        assert_eq!(p.get(1), Some(-1.0));
        p.add(9, 1.0);
        assert_eq!(p.len(), 3);
    }

    #[test]
    fn low_priority_objects_still_get_their_turn() {
        let mut p = PriorityAccumulator::new(2);
        let mut sent = [0u32; 2];
        for _ in 0..100 {
            p.add_all(&[1.0, 3.0]);
            let first = p.order()[0];
            sent[usize::from(first)] += 1;
            p.mark_sent(&[first]);
        }
        assert!(sent[0] >= 20 && sent[1] >= 60, "{sent:?}");
    }
}
