//! The simulator's own speed (wall time of the host machine, not modelled time), so that a
//! regression shows: one paper-scale SSSP launch and one paper-scale KNN run in AXLE mode, each
//! a whole `axle run` (data generation, the co-simulation, the verification); and the device
//! memory reads the kernels make (a 4-byte word and a 32-byte packet at random 4-byte aligned
//! addresses, as SSSP and PageRank read; a 10 KiB aligned row, as OPT reads its weights).
//!
//! ```text
//! cargo bench --bench simulator
//! ```
//!
//! Criterion keeps the last results in `target/criterion` and reports the change against them.

use axle::config::AxleConfig;
use axle::run::{run, RunRequest};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use emulator::dram::DeviceDram;
use firmware::hal::DeviceMemory;
use host_runtime::Mode;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shared_abi::DeviceAddress;

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

fn device_memory(c: &mut Criterion) {
    const BYTES: u64 = 4 << 20;
    let dram = DeviceDram::new(BYTES);
    // 4096 seeded 4-byte aligned addresses in the first MiB (cache-resident, as SSSP's
    // distances are: the bench times the read path, not the memory).
    let mut rng = SmallRng::seed_from_u64(0x2545_f491_4f6c_dd1d);
    let addresses: Vec<DeviceAddress> = (0..4096)
        .map(|_| DeviceAddress((rng.gen::<u64>() % (1 << 20)) & !3))
        .collect();
    let mut group = c.benchmark_group("device memory");
    group.bench_function("4096 reads of 4 B", |b| {
        let mut word = [0_u8; 4];
        b.iter(|| {
            for address in &addresses {
                dram.read(*address, &mut word).expect("inside");
                black_box(&word);
            }
        })
    });
    group.bench_function("4096 reads of 32 B", |b| {
        let mut packet = [0_u8; 32];
        b.iter(|| {
            for address in &addresses {
                dram.read(*address, &mut packet).expect("inside");
                black_box(&packet);
            }
        })
    });
    group.bench_function("256 aligned reads of 10 KiB", |b| {
        let mut row = vec![0_u8; 10 << 10];
        b.iter(|| {
            for address in addresses.iter().take(256) {
                dram.read(DeviceAddress(address.0 & !63), &mut row)
                    .expect("inside");
                black_box(&row);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, simulator, device_memory);
criterion_main!(benches);
