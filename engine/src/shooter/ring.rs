//! A ring buffer keyed by tick: slot `tick % capacity`, each slot remembering which tick it holds, so a stale
//! entry from a lap ago is never mistaken for the tick asked for.

use super::Tick;

/// Fixed-capacity storage of one value per tick for the most recent `capacity` ticks.
#[derive(Debug, Clone, PartialEq)]
pub struct TickRing<T> {
    slots: Vec<Option<(Tick, T)>>,
}

impl<T> TickRing<T> {
    /// An empty ring holding at most `capacity` ticks (at least one).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            slots: (0..capacity).map(|_| None).collect(),
        }
    }

    /// How many ticks the ring can hold.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn index(&self, tick: Tick) -> usize {
        (tick as usize) % self.slots.len()
    }

    /// Stores `value` for `tick`, replacing whatever occupied its slot (the same tick, or one a lap older).
    pub fn insert(&mut self, tick: Tick, value: T) {
        let index = self.index(tick);
        self.slots[index] = Some((tick, value));
    }

    /// The value stored for exactly `tick`, if it is still in the ring.
    pub fn get(&self, tick: Tick) -> Option<&T> {
        match &self.slots[self.index(tick)] {
            Some((stored, value)) if *stored == tick => Some(value),
            _ => None,
        }
    }

    /// Mutable access to the value stored for exactly `tick`.
    pub fn get_mut(&mut self, tick: Tick) -> Option<&mut T> {
        let index = self.index(tick);
        match &mut self.slots[index] {
            Some((stored, value)) if *stored == tick => Some(value),
            _ => None,
        }
    }

    /// True when the ring holds a value for exactly `tick`.
    pub fn contains(&self, tick: Tick) -> bool {
        self.get(tick).is_some()
    }

    /// Removes and returns the value for exactly `tick`.
    pub fn remove(&mut self, tick: Tick) -> Option<T> {
        let index = self.index(tick);
        match self.slots[index].take() {
            Some((stored, value)) if stored == tick => Some(value),
            other => {
                self.slots[index] = other;
                None
            }
        }
    }

    /// Empties every slot.
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|slot| *slot = None);
    }

    /// The stored `(tick, value)` pairs in slot order (not tick order).
    pub fn iter(&self) -> impl Iterator<Item = (Tick, &T)> {
        self.slots
            .iter()
            .filter_map(|slot| slot.as_ref().map(|(tick, value)| (*tick, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lapped_slot_does_not_answer_for_the_old_tick() {
        let mut ring = TickRing::new(4);
        ring.insert(3, "three");
        assert_eq!(ring.get(3), Some(&"three"));
        ring.insert(7, "seven");
        assert_eq!(ring.get(3), None);
        assert_eq!(ring.get(7), Some(&"seven"));
        assert_eq!(ring.remove(3), None);
        assert_eq!(ring.remove(7), Some("seven"));
        assert!(!ring.contains(7));
    }
}
