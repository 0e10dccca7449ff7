//! The simulator's own speed (wall time of the host machine, not modelled time), so that a
//! regression shows: one paper-scale SSSP launch and one paper-scale KNN run in AXLE mode, each
//! a whole `axle run` (data generation, the co-simulation, the verification).
//!
//! ```text
//! cargo bench --bench simulator
//! ```
//!
//! Criterion keeps the last results in `target/criterion` and reports the change against them.

use axle::config::AxleConfig;
use axle::run::{run, RunRequest};
use criterion::{criterion_group, criterion_main, Criterion};
use host_runtime::Mode;

fn request(workload: &str, configure: impl FnOnce(&mut AxleConfig)) -> RunRequest {
    let mut config = AxleConfig::default();
    configure(&mut config);
    RunRequest {
        workload: workload.into(),
        mode: Mode::Axle,
        config,
        data: None,
        wall_limit: None,
    }
}

fn simulator(c: &mut Criterion) {
    let mut group = c.benchmark_group("simulator");
    group.sample_size(10);
    let sssp = request("sssp", |config| config.workload.iterations = 1);
    group.bench_function("sssp one launch, paper scale, axle", |b| {
        b.iter(|| {
            let report = run(&sssp).expect("the SSSP launch runs");
            assert!(report.verified);
        })
    });
    let knn = request("knn-c", |_| {});
    group.bench_function("knn-c, paper scale, axle", |b| {
        b.iter(|| {
            let report = run(&knn).expect("the KNN run runs");
            assert!(report.verified);
        })
    });
    group.finish();
}

criterion_group!(benches, simulator);
criterion_main!(benches);
