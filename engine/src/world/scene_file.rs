//! Scene files: a scene as RON text on disk (the format [`SceneSpec`] derives; see `examples/scenes/` for the
//! demo scenes and the playground). Loading parses and validates, and names the file in its errors.

use std::path::{Path, PathBuf};

use super::scene::{SceneError, SceneSpec};

/// A scene file that could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum SceneFileError {
    /// The file could not be read or written.
    #[error("scene file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file holds no valid scene.
    #[error("scene file {path}: {source}")]
    Scene {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: SceneError,
    },
}

/// Reads, parses and validates the scene in `path`.
pub fn load_scene(path: &Path) -> Result<SceneSpec, SceneFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| SceneFileError::Io {
        path: path.to_owned(),
        source,
    })?;
    SceneSpec::from_ron(&text).map_err(|source| SceneFileError::Scene {
        path: path.to_owned(),
        source,
    })
}

/// Writes `scene` to `path` as pretty RON.
pub fn save_scene(scene: &SceneSpec, path: &Path) -> Result<(), SceneFileError> {
    std::fs::write(path, scene.to_ron_pretty() + "\n").map_err(|source| SceneFileError::Io {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let missing = load_scene(Path::new("/nonexistent/scene.ron")).unwrap_err();
        assert!(
            missing
                .to_string()
                .starts_with("scene file /nonexistent/scene.ron:")
        );
        let dir = std::env::temp_dir().join(format!("physync-scene-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.ron");
        std::fs::write(
            &path,
            "(objects: [(shape: Ball(radius: 0), pose: (position: (0, 0, 0)))])",
        )
        .unwrap();
        let err = load_scene(&path).unwrap_err().to_string();
        assert!(
            err.contains("object 0: ball radius must be positive"),
            "{err}"
        );
        let good = dir.join("good.ron");
        save_scene(&SceneSpec::playground(), &good).unwrap();
        assert_eq!(load_scene(&good).unwrap(), SceneSpec::playground());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
