use super::*;

#[test]
fn scenes_by_name_have_their_published_sizes() {
    assert_eq!(
        "table".parse::<SceneKind>().unwrap().spec().objects.len(),
        64
    );
    let katamari = "katamari".parse::<SceneKind>().unwrap().spec();
    assert_eq!(katamari.objects.len(), 901);
    assert_eq!(katamari.player_object, Some(900));
    let tower = SceneKind::Tower.spec();
    assert_eq!(tower.objects.len(), 10 + 14 + 17 + 20);
    assert!("castle".parse::<SceneKind>().is_err());
    for kind in SceneKind::ALL {
        assert_eq!(kind.name().parse::<SceneKind>().unwrap(), kind);
        kind.spec().validate().unwrap();
    }
    SceneSpec::playground().validate().unwrap();
    SceneSpec::pile(30, 1).validate().unwrap();
}

#[test]
fn every_spawn_of_sixteen_faces_the_centre_and_none_coincide() {
    let scene = SceneSpec::table();
    let spawns: Vec<Isometry3<f32>> = (0..MAX_PLAYERS).map(|p| scene.spawn(p)).collect();
    for (i, spawn) in spawns.iter().enumerate() {
        let forward = spawn.rotation * Vector3::z();
        let t = spawn.translation.vector;
        let to_centre = -Vector3::new(t.x, 0.0, t.z);
        assert!(forward.dot(&to_centre) > 0.99 * to_centre.norm());
        for other in &spawns[..i] {
            assert!((other.translation.vector - t).norm() > 1.0);
        }
    }
}

#[test]
fn pile_is_seeded() {
    assert_eq!(SceneSpec::pile(27, 7), SceneSpec::pile(27, 7));
    assert_ne!(SceneSpec::pile(27, 7), SceneSpec::pile(27, 8));
    assert_eq!(SceneSpec::pile(1000, 1).objects.len(), 1000);
}

#[test]
fn playground_holds_every_shape_kind_and_a_mesh_ramp() {
    let scene = SceneSpec::playground();
    let kinds: std::collections::BTreeSet<&str> =
        scene.objects.iter().map(|o| o.shape.kind_name()).collect();
    assert_eq!(kinds.len(), 7, "{kinds:?}");
    assert!(
        scene
            .level
            .iter()
            .any(|l| matches!(l.shape, LevelShape::TriMesh { .. }))
    );
    assert!(
        scene
            .level
            .iter()
            .any(|l| matches!(l.shape, LevelShape::HeightField { .. }))
    );
}

#[test]
fn every_shape_kind_round_trips_through_ron_exactly() {
    let mut scene = SceneSpec::playground();
    scene.quantization.position_steps_per_metre = 1024;
    scene.player_object = Some(3);
    scene.objects[5].pose = Pose::from_isometry(&Isometry3::new(
        Vector3::new(0.1, 1.3, -2.7),
        Vector3::new(0.3, -0.7, 0.11),
    ));
    for text in [scene.to_ron_pretty(), scene.to_ron_compact()] {
        assert_eq!(SceneSpec::from_ron(&text).unwrap(), scene);
    }
}

fn example_scene_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/scenes")
        .join(format!("{name}.ron"))
}

/// The files under examples/scenes/ are the demo scenes; `PHYSYNC_WRITE_SCENES=1` rewrites them from the code.
#[test]
fn example_scene_files_are_the_demo_scenes() {
    let scenes = [
        ("table", SceneSpec::table()),
        ("katamari", SceneSpec::katamari()),
        ("tower", SceneKind::Tower.spec()),
        ("playground", SceneSpec::playground()),
    ];
    for (name, scene) in scenes {
        let path = example_scene_path(name);
        if std::env::var_os("PHYSYNC_WRITE_SCENES").is_some() {
            std::fs::write(&path, scene.to_ron_pretty() + "\n").unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(SceneSpec::from_ron(&text).unwrap(), scene, "{name}");
    }
}

#[test]
fn a_hand_written_file_with_defaults_left_out_loads() {
    let text = r#"(
        name: "tiny",
        level: [(shape: Cuboid(half_extents: (5, 0.5, 5)), pose: (position: (0, -0.5, 0)))],
        objects: [
            (shape: Ball(radius: 0.3), pose: (position: (0, 1, 0)), tag: (kind: 7, colour: Some((255, 0, 0)))),
            (shape: Capsule(half_height: 0.2, radius: 0.1), pose: (position: (1, 1, 0), rotation: (0, 0, 0.7071, 0.7071))),
        ],
    )"#;
    let scene = SceneSpec::from_ron(text).unwrap();
    assert_eq!(scene.objects[0].material, Material::default());
    assert_eq!(scene.objects[0].tag.kind, 7);
    assert_eq!(scene.quantization, Quantization::default());
    assert_eq!(scene.floor_half_extent(), 5.0);
}

#[test]
fn invalid_scenes_are_refused_with_what_is_wrong() {
    let ball = |r| ObjectSpec::new(Shape::ball(r), [0.0, 1.0, 0.0]);
    let err = SceneBuilder::new("x")
        .object(ball(0.2))
        .object(ball(-1.0))
        .build()
        .unwrap_err();
    assert!(err.to_string().starts_with("object 1:"), "{err}");
    let flat_hull = Shape::ConvexHull {
        points: vec![
            [0.0, 0.0, 0.0],
            [1.0, 0.0, 0.0],
            [0.0, 0.0, 1.0],
            [1.0, 0.0, 1.0],
        ],
    };
    assert!(matches!(
        SceneBuilder::new("x")
            .object(ObjectSpec::new(flat_hull, [0.0; 3]))
            .build(),
        Err(SceneError::Object { id: 0, .. })
    ));
    let bad_mesh = LevelSpec::new(
        LevelShape::TriMesh {
            vertices: vec![[0.0; 3], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
            triangles: vec![[0, 1, 3]],
        },
        Pose::default(),
    );
    assert!(matches!(
        SceneBuilder::new("x").level(bad_mesh).build(),
        Err(SceneError::Level { index: 0, .. })
    ));
    let short_field = LevelSpec::new(
        LevelShape::HeightField {
            rows: 3,
            columns: 3,
            heights: vec![0.0; 8],
            size: [1.0; 3],
        },
        Pose::default(),
    );
    assert!(SceneBuilder::new("x").level(short_field).build().is_err());
    let nested = Shape::Compound {
        parts: vec![Part {
            pose: Pose::default(),
            shape: Shape::Compound { parts: vec![] },
        }],
    };
    assert!(
        SceneBuilder::new("x")
            .object(ObjectSpec::new(nested, [0.0; 3]))
            .build()
            .is_err()
    );
    let q = Quantization {
        position_steps_per_metre: 0,
        ..Quantization::default()
    };
    assert!(matches!(
        SceneBuilder::new("x").quantization(q).build(),
        Err(SceneError::Quantization(_))
    ));
    assert!(matches!(
        SceneBuilder::new("x").player_object(0).build(),
        Err(SceneError::PlayerObject(0))
    ));
    assert!(matches!(
        SceneSpec::from_ron("(objects: [("),
        Err(SceneError::Parse(_))
    ));
}
