//! Which objects changed: a sender notes its objects' states once a step, for all its links, and names each
//! object's revision when it writes a section ([`crate::PacketWriter::write_section_revised`]), so an object
//! unchanged since the state its baseline holds is written without a copy of its state or a comparison.

/// Each object's revision, indexed by id: a number that changes whenever the object's state changes (the step of
/// its last change, counted by [`StateRevisions::note`]). Revisions never repeat, so two equal revisions of one
/// object stand for equal states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateRevisions<T> {
    states: Vec<T>,
    revisions: Vec<u64>,
    step: u64,
}

impl<T> Default for StateRevisions<T> {
    fn default() -> Self {
        Self {
            states: Vec::new(),
            revisions: Vec::new(),
            step: 0,
        }
    }
}

impl<T: Copy + PartialEq> StateRevisions<T> {
    /// Nothing noted yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes this step's states, indexed by id, and returns every object's revision. A different number of
    /// objects than the last step's (another scene) counts as a change of every object.
    pub fn note(&mut self, states: &[T]) -> &[u64] {
        self.step += 1;
        if states.len() != self.states.len() {
            self.states.clear();
            self.states.extend_from_slice(states);
            self.revisions.clear();
            self.revisions.resize(states.len(), self.step);
            return &self.revisions;
        }
        for ((kept, revision), now) in self
            .states
            .iter_mut()
            .zip(self.revisions.iter_mut())
            .zip(states)
        {
            if kept != now {
                *kept = *now;
                *revision = self.step;
            }
        }
        &self.revisions
    }

    /// Every object's revision as of the last [`StateRevisions::note`].
    pub fn revisions(&self) -> &[u64] {
        &self.revisions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_moves_with_every_change_and_only_then() {
        let mut r = StateRevisions::new();
        let first = r.note(&[1, 2, 3]).to_vec();
        let second = r.note(&[1, 5, 3]).to_vec();
        assert_eq!(second[0], first[0]);
        assert_ne!(second[1], first[1]);
        assert_eq!(second[2], first[2]);
        // Changed back: the state is the first one again, but the revision does not return to it (a revision
        // names a state only as long as nothing changed since).
        let third = r.note(&[1, 2, 3]).to_vec();
        assert_ne!(third[1], first[1]);
        assert_ne!(third[1], second[1]);
        assert_eq!(third[0], first[0]);
        // Another scene: every object changed.
        let fourth = r.note(&[1, 2]).to_vec();
        assert!(fourth.iter().zip(&third).all(|(a, b)| a != b));
        assert_eq!(r.revisions(), &fourth[..]);
    }
}
