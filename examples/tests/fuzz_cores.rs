//! A short run of the core fuzzer: every core takes hostile input deep in a session without a panic.

#[test]
fn a_short_fuzz_run_of_every_core_does_not_panic() {
    let report = physync_examples::fuzz::run(3, 8_000);
    assert_eq!(report.inputs, 8_000);
    assert_eq!(report.panics, 0, "{report:#?}");
    for (name, core) in &report.cores {
        assert_eq!(core.inputs, 2_000, "{name}");
        assert!(
            core.drops.values().sum::<u64>() > 100,
            "{name} dropped too little: {core:?}"
        );
    }
}
