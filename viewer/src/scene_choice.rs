//! The scenes a host can start, as offered on the start screen.

use std::fmt;
use std::str::FromStr;

/// A scene a session can be hosted with; the engine builds the actual world for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum SceneChoice {
    /// 64 cubes laid out on a table, as in the VR sample.
    #[default]
    Table,
    /// A rolling ball that picks up the cubes it touches.
    Katamari,
    /// A tall stack of cubes that must stand still on every peer.
    Tower,
}

impl SceneChoice {
    /// Every scene, in the order the UI offers them.
    pub const ALL: [SceneChoice; 3] = [
        SceneChoice::Table,
        SceneChoice::Katamari,
        SceneChoice::Tower,
    ];

    /// Lower-case name as shown in the UI and accepted on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SceneChoice::Table => "table",
            SceneChoice::Katamari => "katamari",
            SceneChoice::Tower => "tower",
        }
    }
}

impl fmt::Display for SceneChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The text did not name a scene.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown scene '{0}': choose table, katamari or tower")]
pub struct UnknownScene(pub String);

impl FromStr for SceneChoice {
    type Err = UnknownScene;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownScene(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for scene in SceneChoice::ALL {
            assert_eq!(scene.name().parse::<SceneChoice>(), Ok(scene));
        }
        assert_eq!(
            "moon".parse::<SceneChoice>(),
            Err(UnknownScene("moon".into()))
        );
    }
}
