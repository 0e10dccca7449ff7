//! Test doubles shared by the workloads' unit tests: a fake device (a byte vector with a bump
//! allocator that is both the runtime's loader and the kernels' device memory) and drivers
//! that run launches on it the way the emulator would.
//!
//! The drivers run a launch's kernel stage by stage (the emulator puts a barrier between
//! stages) and, within a stage, items in reverse order; host tasks also run in reverse order.
//! Both stand in for out-of-order completion: nothing may depend on item or task order.

use firmware::hal::{DeviceMemory, MemoryFault};
use firmware::kernels::{ItemSpec, Kernel};
use host_runtime::app::{Application, DeviceLoader, HostCost, HostTask, LaunchPlan, LoadError};
use shared_abi::DeviceAddress;

/// Where [`FakeDevice`] starts allocating: away from address 0, so that a zero address is
/// never valid data.
const FIRST_ADDRESS: u64 = 0x1000;

/// Spare bytes [`FakeDevice::loaded`] adds to an application's [`Application::device_bytes`]
/// (the [`FIRST_ADDRESS`] gap and alignment padding).
const SPARE_BYTES: usize = 0x2000;

/// Device memory as a byte vector with a bump allocator: both the runtime's loader and the
/// firmware's view of memory. Fresh memory holds 0xA5 in every byte, so a result byte no
/// kernel item wrote does not pass for a zero.
pub(crate) struct FakeDevice {
    /// All of device memory; address `a` is `memory[a]`.
    pub(crate) memory: std::cell::RefCell<Vec<u8>>,
    /// The next free address.
    next: u64,
}

impl FakeDevice {
    /// `size` bytes of 0xA5, allocations from address 0x1000.
    pub(crate) fn new(size: usize) -> Self {
        FakeDevice {
            memory: std::cell::RefCell::new(vec![0xA5; size]),
            next: FIRST_ADDRESS,
        }
    }

    /// A fresh device with room for `app`'s data, with `app` loaded onto it.
    pub(crate) fn loaded(app: &mut dyn Application) -> Self {
        let mut device = FakeDevice::new(app.device_bytes() as usize + SPARE_BYTES);
        app.load(&mut device).unwrap();
        device
    }

    /// The indices of `[address, address + length)` in `memory`, if it lies inside.
    fn range(&self, address: DeviceAddress, length: usize) -> Option<std::ops::Range<usize>> {
        let start = usize::try_from(address.0).ok()?;
        let end = start.checked_add(length)?;
        (end <= self.memory.borrow().len()).then_some(start..end)
    }
}

/// The runtime's view: bump allocation and untimed writes.
impl DeviceLoader for FakeDevice {
    /// The next `align`-aligned `length` bytes, or [`LoadError::OutOfMemory`].
    fn allocate(&mut self, length: u64, align: u64) -> Result<DeviceAddress, LoadError> {
        let start = self.next.next_multiple_of(align);
        let end = start + length;
        if end > self.memory.borrow().len() as u64 {
            return Err(LoadError::OutOfMemory {
                requested: length,
                available: (self.memory.borrow().len() as u64).saturating_sub(start),
            });
        }
        self.next = end;
        Ok(DeviceAddress(start))
    }

    /// Copies `bytes` to `address`, or [`LoadError::OutOfRange`] outside memory.
    fn write(&mut self, address: DeviceAddress, bytes: &[u8]) -> Result<(), LoadError> {
        let range = self
            .range(address, bytes.len())
            .ok_or(LoadError::OutOfRange {
                address: address.0,
                length: bytes.len() as u64,
            })?;
        self.memory.get_mut()[range].copy_from_slice(bytes);
        Ok(())
    }
}

/// The kernels' view: plain reads and writes, a [`MemoryFault`] outside memory.
impl DeviceMemory for FakeDevice {
    /// Bytes of memory.
    fn size(&self) -> u64 {
        self.memory.borrow().len() as u64
    }

    /// Copies `[address, address + buffer.len())` into `buffer`.
    fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
        let range = self.range(address, buffer.len()).ok_or(MemoryFault {
            address,
            length: buffer.len() as u64,
        })?;
        buffer.copy_from_slice(&self.memory.borrow()[range]);
        Ok(())
    }

    /// Copies `data` to `address`.
    fn write(&self, address: DeviceAddress, data: &[u8]) -> Result<(), MemoryFault> {
        let range = self.range(address, data.len()).ok_or(MemoryFault {
            address,
            length: data.len() as u64,
        })?;
        self.memory.borrow_mut()[range].copy_from_slice(data);
        Ok(())
    }
}

/// What [`launch`] ran.
pub(crate) struct Launched {
    /// The plan's decoded kernel.
    pub(crate) kernel: Kernel,
    /// Every item's stage and spec (read just before the item ran), in the order they ran.
    pub(crate) items: Vec<(u32, ItemSpec)>,
}

/// Writes `plan`'s inputs to `device` and runs every item of its kernel: stage by stage, and
/// within a stage in reverse order.
pub(crate) fn launch(device: &mut FakeDevice, plan: &LaunchPlan) -> Launched {
    for input in &plan.inputs {
        DeviceLoader::write(device, input.address, &input.bytes).unwrap();
    }
    let kernel = Kernel::decode(&plan.command, &*device).unwrap();
    let mut items = Vec::with_capacity(kernel.items() as usize);
    for stage in 0..kernel.stages() {
        for item in kernel.stage_items(stage).rev() {
            items.push((stage, kernel.item(item, &*device).unwrap()));
            kernel.execute(item, &*device).unwrap();
        }
    }
    Launched { kernel, items }
}

/// The result bytes `task` of `plan` needs, as they stand in `device`.
pub(crate) fn result_bytes(device: &FakeDevice, plan: &LaunchPlan, task: &HostTask) -> Vec<u8> {
    let base = plan.command.result_address;
    let start = (base + task.needs.start) as usize;
    let end = (base + task.needs.end) as usize;
    device.memory.borrow()[start..end].to_vec()
}

/// Feeds every task of `plan` its result bytes from `device` (in reverse order), then
/// finishes the launch. Returns the total host cost.
pub(crate) fn run_tasks(
    app: &mut dyn Application,
    device: &FakeDevice,
    plan: &LaunchPlan,
) -> HostCost {
    let mut cost = HostCost::default();
    for task in plan.tasks.iter().rev() {
        cost = cost.plus(
            app.run_task(task, &result_bytes(device, plan, task))
                .unwrap(),
        );
    }
    cost.plus(app.finish_launch().unwrap())
}

/// Runs `app` to the end on a fresh fake device; `corrupt` may change each launch's result
/// bytes (a copy: device memory keeps the kernel's) before the tasks see them. Checks that
/// each launch's items write as many bytes as the result has and that its tasks cover the
/// result exactly once, in order. Returns the launches and the total host cost.
pub(crate) fn run(
    app: &mut dyn Application,
    mut corrupt: impl FnMut(u32, &mut [u8]),
) -> (u32, HostCost) {
    let mut device = FakeDevice::loaded(app);
    let mut launches = 0;
    let mut cost = HostCost::default();
    while let Some(plan) = app.next_launch().unwrap() {
        let launched = launch(&mut device, &plan);
        let covered: u64 = launched
            .items
            .iter()
            .map(|(_, spec)| u64::from(spec.result_length))
            .sum();
        assert_eq!(covered, plan.command.result_length);
        let mut next = 0;
        for (id, task) in plan.tasks.iter().enumerate() {
            assert_eq!((task.id as usize, task.needs.start), (id, next));
            next = task.needs.end;
        }
        assert_eq!(next, plan.command.result_length);
        let base = plan.command.result_address as usize;
        let mut result =
            device.memory.borrow()[base..base + plan.command.result_length as usize].to_vec();
        corrupt(launches, &mut result);
        for task in plan.tasks.iter().rev() {
            let bytes = &result[task.needs.start as usize..task.needs.end as usize];
            cost = cost.plus(app.run_task(task, bytes).unwrap());
        }
        cost = cost.plus(app.finish_launch().unwrap());
        launches += 1;
    }
    (launches, cost)
}

/// A fresh directory under the system temp directory, removed (with its files) on drop: the
/// data-file tests write their crafted files here.
#[derive(Debug)]
pub(crate) struct TempDir(pub(crate) std::path::PathBuf);

impl TempDir {
    pub(crate) fn new(name: &str) -> TempDir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = std::env::temp_dir().join(format!(
            "axle-workloads-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    /// Writes `bytes` to `name` in the directory; its path.
    pub(crate) fn file(&self, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `chunks` concatenated and xz-compressed (a long stream need not be held uncompressed).
pub(crate) fn xz<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = xz2::write::XzEncoder::new(Vec::new(), 1);
    for chunk in chunks {
        encoder.write_all(chunk).unwrap();
    }
    encoder.finish().unwrap()
}

/// A gzip-compressed tarball of `(name, body)` regular files.
pub(crate) fn tar_gz(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut builder = tar::Builder::new(encoder);
    for (name, body) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, name, *body).unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

/// An error and its sources joined by `: `: what the CLI prints (anyhow's `{:#}`), so a test
/// of a message checks the text a user sees.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
