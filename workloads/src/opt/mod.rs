//! OPT-2.7B decode step, paper Table IV (h): LLM inference, one token against a 1K-token KV
//! cache through all 32 decoder layers (hidden 2560, 32 heads of 80, FFN 10240 with ReLU,
//! pre-LayerNorm, Q/K/V/O projections 2560 x 2560 with bias).
//!
//! # The offload
//!
//! One launch per layer (32 launches) of the staged device kernel
//! `firmware::kernels::opt`, decomposed as M²NDP's OPT benchmark is (the paper's Figure 3:
//! LayerNorm0, QKVProj, Attention1, Attention2, OutProj, Residual), one item per M²NDP µthread:
//! LayerNorm0's statistics and normalization, the Q/K/V projection (appending the token's key
//! and value to the layer's cache), Attention1's scores, exponents, weighted values and
//! per-block finalizer, Attention2, the output projection split in 4 parts of its columns (as
//! M²NDP's `OptOutProj`) and the residual, which adds the parts, the output bias and the
//! input. Its result is the attention block's output, `[1, hidden]` `f32` (10 KB per layer at
//! paper scale, 320 items of 32 bytes). The host runs the MLP (LayerNorm1, FC1 + ReLU, FC2,
//! residual); its output is the next layer's input, which the next launch's
//! [`LaunchPlan::inputs`] write into device memory (10 KB); layer 0's input (the token's
//! embedding) is loaded with the data. The kernel's docs compare each stage with M²NDP's
//! kernel and say where and why they differ.
//!
//! The KV cache holds 1023 past tokens per layer, seeded; the kernel appends the current
//! token's key and value at position 1023, so attention covers 1024 tokens. **One seeded set
//! of layer weights is shared by all 32 layers** (distinct weights would take 10 GB); every
//! layer has its own seeded KV cache (671 MB in all, on the device) and its own input, so
//! every layer computes different values. See [`data`].
//!
//! # Host tasks
//!
//! The dependency is the sparse one the paper describes: the MLP needs the whole attention
//! output, so every host task needs the whole result range (10 KB), and there are far fewer
//! host tasks ([`OptShape::mlp_tasks`], 32 at paper scale) than device items (16,001 per
//! layer, 320 of them in the last stage). Each task computes its slice of FC1 units and their
//! partial FC2 contribution; the launch's final step adds the partials in task order, the
//! bias and the residual ([`host`]). Tasks are independent (no chain): with 63 host workers
//! all 32 run at once, and with fewer workers they queue. No task depends on a partial
//! result, so the plan's only rule is that every task waits for the whole result.
//!
//! A task needs 320 ring slots of 32 bytes, 0.64% of the default 50,000: no ring of the
//! paper's 12.5% (6,250 slots) can hold results that no task can consume, and the run does
//! not deadlock there. The paper's Figure 16(h) reports a deadlock at 12.5%; an earlier version
//! of this workload streamed every head's partial output projection (320 KB per layer) so that
//! it would, a shape of our own rather than M²NDP's (see the kernel's docs). This one does not.
//!
//! # Checking
//!
//! [`reference::decode_step`] recomputes the whole step on the host with the same arithmetic
//! helpers; the final hidden state must match bit for bit (a naive `f64` version agrees with
//! the reference to 1e-4 in the tests).
//!
//! # Sharing between runs
//!
//! The runs of one process with the same shape and seed (`axle eval` makes 27) share the
//! weights and the reference ([`crate::shared`]), and the MLP's partials: a task's partial is
//! a pure function of the weights, the task and the layer's attention output, which is the
//! same in every run (the device computes the same values whatever the mode, configuration
//! or timing), and it costs a pass over 6.5 MB of FC1 and FC2 weights. So the first run
//! computes each task's partial of each layer and the later ones take it, after checking that
//! their attention output is the same, bit for bit, as the one it was computed from (a run
//! whose output differs computes its own). The modelled host time does not depend on it.

pub mod data;
pub mod host;
pub mod reference;

use std::fmt;

use host_runtime::app::{
    AppError, AppProblem, Application, BadResult, DeviceInput, DeviceLoader, HostCost, HostTask,
    LaunchPlan, LoadError, Scope, Verification,
};
use shared_abi::params::opt::{cache_bytes, workspace_bytes, OptParameters, PARAMETER_BYTES};
use shared_abi::{CommandDescriptor, DeviceAddress, KernelId};

use crate::shared::Shared;
use crate::{OptionError, Scale, WorkloadError, WorkloadInfo, WorkloadOptions};
use data::{from_le_bytes, kv_cache, to_le_bytes, OptWeights};
use std::sync::Arc;

/// Catalog name.
pub const NAME: &str = "opt-2.7b";

/// Alignment of every device allocation (a 64-byte cache line).
pub const DEVICE_ALIGNMENT: u64 = 64;

/// The model's shape and the work split of one instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptShape {
    /// Hidden size.
    pub hidden: u32,
    /// Attention heads.
    pub heads: u32,
    /// Dimensions per head.
    pub head_dim: u32,
    /// FFN size.
    pub ffn: u32,
    /// Decoder layers (one launch each).
    pub layers: u32,
    /// Positions each layer's KV cache holds.
    pub capacity: u32,
    /// Past tokens in the cache: the current token's position.
    pub position: u32,
    /// Parts of the output projection's columns (the device's K split).
    pub output_split: u32,
    /// Host MLP tasks per layer (dividing `ffn`).
    pub mlp_tasks: u32,
}

/// Table IV (h): OPT-2.7B, 1K tokens; the output projection split in 4 as M²NDP's `OptOutProj`
/// splits it. Device items per layer, one per M²NDP µthread: 1 (LayerNorm0's statistics), 320
/// (normalize), 960 (QKV: 7680 rows / 8), 3 x 4096 (32 heads x 128 token packets: scores,
/// exponents, weighted values), 512 (32 heads x 16 softmax blocks), 320 (32 heads x 10
/// dimension packets), 1280 (4 parts x 320 row packets), 320 (residual): 16,001. The result:
/// 2560 x 4 B = 10 KB per layer.
pub const PAPER: OptShape = OptShape {
    hidden: 2560,
    heads: 32,
    head_dim: 80,
    ffn: 10240,
    layers: 32,
    capacity: 1024,
    position: 1023,
    output_split: 4,
    mlp_tasks: 32,
};

/// The small scale: the same structure in miniature (hidden 64, 4 heads of 16, FFN 256, 4
/// layers, 32 positions, 8 MLP tasks; 133 items per layer; a 256-byte result). With 64
/// columns the output projection has one block, so its parts 1 to 3 sum nothing.
pub const SMALL: OptShape = OptShape {
    hidden: 64,
    heads: 4,
    head_dim: 16,
    ffn: 256,
    layers: 4,
    capacity: 32,
    position: 31,
    output_split: 4,
    mlp_tasks: 8,
};

impl OptShape {
    /// The shape for `scale`.
    pub fn for_scale(scale: Scale) -> OptShape {
        match scale {
            Scale::Paper => PAPER,
            Scale::Small => SMALL,
        }
    }

    /// Bytes of one hidden-state vector.
    pub fn vector_bytes(&self) -> u64 {
        u64::from(self.hidden) * 4
    }

    /// Bytes of a launch's result: the attention block's output (`hidden` `f32`).
    pub fn result_bytes(&self) -> u64 {
        self.vector_bytes()
    }

    /// Bytes of one layer's key (or value) cache.
    pub fn cache_bytes(&self) -> u64 {
        cache_bytes(self.heads, self.capacity, self.head_dim).unwrap_or(u64::MAX)
    }

    /// Bytes of the kernel's workspace.
    pub fn workspace_bytes(&self) -> u64 {
        workspace_bytes(
            self.hidden,
            self.heads,
            self.head_dim,
            self.capacity,
            self.output_split,
        )
        .unwrap_or(u64::MAX)
    }

    /// Every device allocation's size, in load order: parameters, input, LayerNorm0 gamma and
    /// beta, Q/K/V weight and bias, output weight and bias, workspace, result, then each
    /// layer's key and value caches.
    fn allocation_sizes(&self) -> Vec<u64> {
        let vector = self.vector_bytes();
        let hidden = u64::from(self.hidden);
        let mut sizes = vec![
            PARAMETER_BYTES,
            vector,
            vector,
            vector,
            3 * hidden * vector,
            3 * vector,
            hidden * vector,
            vector,
            self.workspace_bytes(),
            self.result_bytes(),
        ];
        for _ in 0..self.layers {
            sizes.push(self.cache_bytes());
            sizes.push(self.cache_bytes());
        }
        sizes
    }
}

/// The catalog entry with the sizes `options` would use.
pub fn info(options: &WorkloadOptions) -> WorkloadInfo {
    let shape = OptShape::for_scale(options.scale);
    WorkloadInfo {
        name: NAME,
        domain: "LLM Inference",
        application: "OPT 2.7b",
        table_iv: "#Tokens: 1K",
        characteristics: format!(
            "{} scale: hidden {}, {} heads x {}, FFN {}, {} layers (one launch each), KV cache {} past tokens + the current one; seeded weights shared by all layers, a seeded KV cache per layer; one item per M2NDP µthread (32-byte packet) in each of M2NDP's kernels; result per layer: the attention block's output ({} B); {} MLP tasks per layer, each needing all of it",
            options.scale,
            shape.hidden,
            shape.heads,
            shape.head_dim,
            shape.ffn,
            shape.layers,
            shape.position,
            shape.result_bytes(),
            shape.mlp_tasks
        ),
        offloaded:
            "LayerNorm0, QKV projection, Attention1, Attention2, output projection (K split in 4), residual: the attention block's output",
        host_task: "the MLP: LayerNorm1, a slice of FC1 + ReLU and its partial FC2 per task; the FC2 partials, bias and residual summed after the tasks",
    }
}

/// Builds the workload.
pub fn build(options: &WorkloadOptions) -> Result<Box<dyn Application>, WorkloadError> {
    Ok(Box::new(OptApplication::new(options)?))
}

/// Where the model lives in device memory.
#[derive(Clone, Debug, PartialEq, Eq)]
struct DeviceBuffers {
    parameters: DeviceAddress,
    input: DeviceAddress,
    result: DeviceAddress,
    key_caches: Vec<DeviceAddress>,
    value_caches: Vec<DeviceAddress>,
}

/// The weights of the last shape and seed generated, shared by the instances made for them.
static WEIGHTS: Shared<(OptShape, u64), OptWeights> = Shared::new();
/// The reference's hidden states (a pure function of the shape, the seed and hence the
/// weights), computed once for the instances of one shape and seed.
static REFERENCE: Shared<(OptShape, u64), Vec<Vec<f32>>> = Shared::new();

/// Bytes an instance at `scale` holds: its device memory image and the host's weights.
pub(crate) fn resident_input_bytes(scale: Scale) -> u64 {
    let shape = OptShape::for_scale(scale);
    let device = shape
        .allocation_sizes()
        .iter()
        .fold(0, |sum: u64, size| sum.saturating_add(*size));
    let hidden = u64::from(shape.hidden);
    // The host keeps every weight (the MLP runs on the host): Q/K/V, output, FC1 and FC2.
    let host = (4 * hidden * hidden + 2 * u64::from(shape.ffn) * hidden) * 4;
    device.saturating_add(host)
}

/// The MLP partials computed so far for one shape and seed (see "Sharing between runs" in
/// the module docs).
static MLP: Shared<(OptShape, u64), MlpMemo> = Shared::new();

/// Forgets the shared weights, reference and MLP partials ([`crate::shared::release`]).
pub(crate) fn release_shared() {
    WEIGHTS.clear();
    REFERENCE.clear();
    MLP.clear();
}

/// One layer's attention output (as bits) and the partials computed so far from it, by task.
type LayerPartials = (Vec<u32>, Vec<Option<Vec<f32>>>);

/// Per layer, the partials computed so far.
#[derive(Debug)]
struct MlpMemo {
    layers: std::sync::Mutex<Vec<Option<LayerPartials>>>,
    tasks: usize,
}

impl MlpMemo {
    fn new(shape: &OptShape) -> MlpMemo {
        MlpMemo {
            layers: std::sync::Mutex::new(vec![None; shape.layers as usize]),
            tasks: shape.mlp_tasks as usize,
        }
    }

    /// Task `task`'s partial of layer `layer` over `attention_output`: the one kept, if it was
    /// computed from the same attention output bit for bit, otherwise `compute()`'s (kept if
    /// the layer has none from another attention output).
    fn partial(
        &self,
        layer: u32,
        task: u32,
        attention_output: &[f32],
        compute: impl FnOnce() -> Vec<f32>,
    ) -> Vec<f32> {
        let bits: Vec<u32> = attention_output
            .iter()
            .map(|value| value.to_bits())
            .collect();
        let lock = || {
            self.layers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(Some((seen, partials))) = lock().get(layer as usize) {
            if *seen == bits {
                if let Some(Some(partial)) = partials.get(task as usize) {
                    return partial.clone();
                }
            }
        }
        // Computed without the lock held (another run may compute the same partial meanwhile:
        // the same values).
        let partial = compute();
        if let Some(entry) = lock().get_mut(layer as usize) {
            let (seen, partials) =
                entry.get_or_insert_with(|| (bits.clone(), vec![None; self.tasks]));
            if *seen == bits {
                if let Some(slot) = partials.get_mut(task as usize) {
                    *slot = Some(partial.clone());
                }
            }
        }
        partial
    }
}

/// An OPT decode-step instance: weights, plan, host-task state and answer.
pub struct OptApplication {
    shape: OptShape,
    seed: u64,
    /// Shared with every other instance of the same shape and seed ([`crate::shared`]).
    weights: Arc<OptWeights>,
    /// Shared with every other instance of the same shape and seed.
    mlp: Arc<MlpMemo>,
    device: Option<DeviceBuffers>,
    /// The layer whose launch is next or running.
    layer: u32,
    /// Whether that layer's launch was handed out.
    launched: bool,
    /// The current layer's input hidden state.
    hidden_state: Vec<f32>,
    /// The current launch's result (the attention block's output), once a task saw it.
    attention_output: Option<Vec<f32>>,
    partials: Vec<Option<Vec<f32>>>,
    answer: Option<Vec<f32>>,
}

impl fmt::Debug for OptApplication {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OptApplication")
            .field("shape", &self.shape)
            .field("seed", &self.seed)
            .field("device", &self.device)
            .field("layer", &self.layer)
            .field("launched", &self.launched)
            .field("answered", &self.answer.is_some())
            .finish_non_exhaustive()
    }
}

impl OptApplication {
    /// An instance with `options` (scale and seed; OPT has no real data).
    pub fn new(options: &WorkloadOptions) -> Result<OptApplication, WorkloadError> {
        Self::with_shape(OptShape::for_scale(options.scale), options)
    }

    /// An instance of an explicit shape (tests).
    pub fn with_shape(
        shape: OptShape,
        options: &WorkloadOptions,
    ) -> Result<OptApplication, WorkloadError> {
        if let Some(path) = &options.data_dir {
            log::info!(
                "opt: no real weights exist; {} is not read, the weights are seeded",
                path.display()
            );
        }
        if shape.mlp_tasks == 0 || shape.ffn % shape.mlp_tasks != 0 {
            return Err(WorkloadError::InvalidOption {
                workload: NAME,
                reason: OptionError::MlpTasks {
                    mlp_tasks: shape.mlp_tasks,
                    ffn: shape.ffn,
                },
            });
        }
        let seed = options.seed;
        let weights = WEIGHTS.get_or_make((shape, seed), || OptWeights::generate(&shape, seed));
        log::info!(
            "opt: hidden {} heads {}x{} ffn {} layers {} position {} tasks {} (seed {})",
            shape.hidden,
            shape.heads,
            shape.head_dim,
            shape.ffn,
            shape.layers,
            shape.position,
            shape.mlp_tasks,
            options.seed
        );
        let mlp = MLP.get_or_make((shape, seed), || MlpMemo::new(&shape));
        Ok(OptApplication {
            hidden_state: weights.input.clone(),
            shape,
            seed: options.seed,
            weights,
            mlp,
            device: None,
            layer: 0,
            launched: false,
            attention_output: None,
            partials: vec![None; shape.mlp_tasks as usize],
            answer: None,
        })
    }

    /// The shape.
    pub fn shape(&self) -> OptShape {
        self.shape
    }

    /// The weights.
    pub fn weights(&self) -> &OptWeights {
        &self.weights
    }

    /// The final hidden state, once the last layer finished.
    pub fn answer(&self) -> Option<&[f32]> {
        self.answer.as_deref()
    }

    /// The host tasks of every launch: each needs the whole result (the attention output).
    pub fn tasks(&self) -> Vec<HostTask> {
        (0..self.shape.mlp_tasks)
            .map(|id| HostTask {
                id,
                needs: 0..self.shape.result_bytes(),
                chain: None,
            })
            .collect()
    }

    /// A host step's failure (logged; the runtime fails the run with it).
    fn fail(&self, problem: AppProblem) -> AppError {
        let error = AppError::new(NAME, Scope::Layer(self.layer), problem);
        log::error!("opt: {error}");
        error
    }
}

impl Application for OptApplication {
    fn name(&self) -> &str {
        NAME
    }

    fn device_bytes(&self) -> u64 {
        self.shape
            .allocation_sizes()
            .iter()
            .map(|size| size.saturating_add(DEVICE_ALIGNMENT))
            .fold(0, u64::saturating_add)
    }

    fn image_key(&self) -> Option<String> {
        // The load writes the weights, a zeroed workspace and result, and the KV caches: all
        // functions of the shape and the seed.
        Some(format!("{:?} seed {}", self.shape, self.seed))
    }

    fn load(&mut self, device: &mut dyn DeviceLoader) -> Result<(), LoadError> {
        let shape = self.shape;
        let weights = &self.weights;
        // A preloaded device already holds every byte below: only the allocations are made,
        // and the bytes (the KV caches, most of the load's time) are not even generated.
        let preloaded = device.preloaded();
        let mut put = |values: usize, bytes: &dyn Fn() -> Vec<u8>| {
            let address = device.allocate(values as u64 * 4, DEVICE_ALIGNMENT)?;
            if !preloaded {
                device.write(address, &bytes())?;
            }
            Ok::<_, LoadError>(address)
        };
        let input = put(weights.input.len(), &|| to_le_bytes(&weights.input))?;
        let ln_gamma = put(weights.ln0_gamma.len(), &|| to_le_bytes(&weights.ln0_gamma))?;
        let ln_beta = put(weights.ln0_beta.len(), &|| to_le_bytes(&weights.ln0_beta))?;
        let qkv_weight = put(weights.qkv_weight.len(), &|| {
            to_le_bytes(&weights.qkv_weight)
        })?;
        let qkv_bias = put(weights.qkv_bias.len(), &|| to_le_bytes(&weights.qkv_bias))?;
        let output_weight = put(weights.output_weight.len(), &|| {
            to_le_bytes(&weights.output_weight)
        })?;
        let output_bias = put(weights.output_bias.len(), &|| {
            to_le_bytes(&weights.output_bias)
        })?;
        let workspace_values = (shape.workspace_bytes() / 4) as usize;
        let workspace = put(workspace_values, &|| vec![0; workspace_values * 4])?;
        let result_values = (shape.result_bytes() / 4) as usize;
        let result = put(result_values, &|| vec![0; result_values * 4])?;
        let mut key_caches = Vec::new();
        let mut value_caches = Vec::new();
        for layer in 0..shape.layers {
            if preloaded {
                // `kv_cache`'s length, without making it.
                let values =
                    shape.heads as usize * shape.capacity as usize * shape.head_dim as usize;
                key_caches.push(put(values, &Vec::new)?);
                value_caches.push(put(values, &Vec::new)?);
            } else {
                let (keys, values) = kv_cache(&shape, self.seed, layer);
                key_caches.push(put(keys.len(), &|| to_le_bytes(&keys))?);
                value_caches.push(put(values.len(), &|| to_le_bytes(&values))?);
            }
        }
        let parameters = OptParameters {
            hidden: shape.hidden,
            heads: shape.heads,
            head_dim: shape.head_dim,
            capacity: shape.capacity,
            output_split: shape.output_split,
            reserved: [0; 3],
            input: input.0,
            ln_gamma: ln_gamma.0,
            ln_beta: ln_beta.0,
            qkv_weight: qkv_weight.0,
            qkv_bias: qkv_bias.0,
            output_weight: output_weight.0,
            output_bias: output_bias.0,
            workspace: workspace.0,
        };
        let parameter_address = device.allocate(PARAMETER_BYTES, DEVICE_ALIGNMENT)?;
        device.write(parameter_address, parameters.bytes())?;
        log::debug!(
            "opt: loaded {} layers of KV cache ({} B each), parameters at {:#x}",
            shape.layers,
            2 * shape.cache_bytes(),
            parameter_address.0
        );
        self.device = Some(DeviceBuffers {
            parameters: parameter_address,
            input,
            result,
            key_caches,
            value_caches,
        });
        self.layer = 0;
        self.launched = false;
        self.hidden_state = self.weights.input.clone();
        self.attention_output = None;
        self.partials = vec![None; shape.mlp_tasks as usize];
        self.answer = None;
        Ok(())
    }

    fn next_launch(&mut self) -> Result<Option<LaunchPlan>, AppError> {
        if self.layer >= self.shape.layers {
            return Ok(None);
        }
        let Some(buffers) = &self.device else {
            return Err(self.fail(AppProblem::NotLoaded));
        };
        if self.launched {
            return Err(self.fail(AppProblem::LaunchInFlight));
        }
        let layer = self.layer as usize;
        let (Some(keys), Some(values)) = (
            buffers.key_caches.get(layer).copied(),
            buffers.value_caches.get(layer).copied(),
        ) else {
            return Ok(None);
        };
        let inputs = if self.layer == 0 {
            // The token's embedding was loaded with the data.
            Vec::new()
        } else {
            vec![DeviceInput {
                address: buffers.input,
                bytes: to_le_bytes(&self.hidden_state),
            }]
        };
        let command = CommandDescriptor {
            kernel: KernelId::OptAttention as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: buffers.result.0,
            result_length: self.shape.result_bytes(),
            args: [
                buffers.parameters.0,
                keys.0,
                values.0,
                u64::from(self.shape.position),
            ],
        };
        self.launched = true;
        self.attention_output = None;
        self.partials = vec![None; self.shape.mlp_tasks as usize];
        Ok(Some(LaunchPlan {
            inputs,
            command,
            tasks: self.tasks(),
        }))
    }

    fn run_task(&mut self, task: &HostTask, result: &[u8]) -> Result<HostCost, AppError> {
        if task.id >= self.shape.mlp_tasks {
            return Err(self.fail(AppProblem::NoSuchTask {
                task: task.id,
                tasks: self.shape.mlp_tasks as usize,
            }));
        }
        let needs = 0..self.shape.result_bytes();
        if task.needs != needs || result.len() as u64 != self.shape.result_bytes() {
            return Err(self.fail(AppProblem::WrongInput {
                task: task.id,
                needs: task.needs.clone(),
                bytes: result.len(),
                planned: needs,
            }));
        }
        let attention_output = from_le_bytes(result);
        match &self.attention_output {
            None => self.attention_output = Some(attention_output.clone()),
            Some(seen) if *seen != attention_output => {
                return Err(self.fail(AppProblem::BadResult {
                    task: task.id,
                    what: BadResult::DiffersFromAnotherTask,
                }));
            }
            Some(_) => {}
        }
        let partial = self
            .mlp
            .partial(self.layer, task.id, &attention_output, || {
                host::mlp_task(&self.shape, &self.weights, &attention_output, task.id)
            });
        if let Some(slot) = self.partials.get_mut(task.id as usize) {
            *slot = Some(partial);
        }
        log::trace!("opt: layer {} task {} done", self.layer, task.id);
        Ok(host::task_cost(&self.shape))
    }

    fn finish_launch(&mut self) -> Result<HostCost, AppError> {
        if let Some(problem) = AppProblem::never_ran(self.partials.iter().map(Option::is_some)) {
            return Err(self.fail(problem));
        }
        let Some(attention_output) = self.attention_output.take() else {
            return Err(self.fail(AppProblem::NeverRan {
                missing: self.partials.len(),
                first: 0,
            }));
        };
        let layer = self.layer;
        self.launched = false;
        self.layer += 1;
        let partials: Vec<Vec<f32>> = self.partials.iter_mut().filter_map(Option::take).collect();
        self.hidden_state = host::finish(&self.weights, &attention_output, &partials);
        log::debug!("opt: layer {layer} finished");
        if self.layer == self.shape.layers {
            self.answer = Some(self.hidden_state.clone());
        }
        Ok(host::finish_cost(&self.shape))
    }

    fn verify(&self) -> Verification {
        let fail = |detail: String| Verification {
            passed: false,
            detail: format!("{NAME}: {detail}"),
        };
        let Some(answer) = &self.answer else {
            return fail(format!(
                "the decode step never finished ({} of {} layers)",
                self.layer, self.shape.layers
            ));
        };
        let (shape, seed) = (self.shape, self.seed);
        let states = REFERENCE.get_or_make((shape, seed), || {
            reference::decode_step(&shape, &self.weights, seed)
        });
        let Some(expected) = states.last() else {
            return fail("the model has no layers".into());
        };
        match reference::compare(answer, expected) {
            Ok(()) => {
                let largest = answer.iter().fold(0.0_f32, |m, v| m.max(v.abs()));
                Verification {
                    passed: true,
                    detail: format!(
                        "final hidden state after {} layers ({} values, max |x| {largest:.3}) matches the reference bit for bit (seeded weights, seed {})",
                        self.shape.layers,
                        answer.len(),
                        self.seed
                    ),
                }
            }
            Err(difference) => fail(format!("final hidden state: {difference}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A partial is computed once per layer, task and attention output; an attention output
    /// that differs in one bit gets its own, computed every time and never handed to the
    /// first one's askers.
    #[test]
    fn an_mlp_partial_is_reused_only_for_the_same_attention_output_bit_for_bit() {
        let memo = MlpMemo::new(&SMALL);
        let mut computed = 0;
        let first = [1.0_f32, 2.0];
        let mut compute = |value: f32| {
            computed += 1;
            vec![value]
        };
        assert_eq!(memo.partial(1, 3, &first, || compute(7.0)), vec![7.0]);
        assert_eq!(memo.partial(1, 3, &first, || compute(8.0)), vec![7.0]);
        assert_eq!(memo.partial(1, 4, &first, || compute(9.0)), vec![9.0]);
        let other = [1.0_f32, f32::from_bits(2.0_f32.to_bits() + 1)];
        assert_eq!(memo.partial(1, 3, &other, || compute(5.0)), vec![5.0]);
        assert_eq!(memo.partial(1, 3, &other, || compute(6.0)), vec![6.0]);
        assert_eq!(memo.partial(1, 3, &first, || compute(0.0)), vec![7.0]);
        assert_eq!(memo.partial(2, 3, &first, || compute(4.0)), vec![4.0]);
        assert_eq!(computed, 5);
    }
    use crate::testing::{self, FakeDevice};
    use firmware::hal::{DeviceMemory, MemoryFault};
    use firmware::kernels::Kernel;

    /// Device memory of a given size that holds only a parameter block (reads elsewhere
    /// give zeros; writes are dropped).
    struct SparseMemory {
        size: u64,
        parameters: DeviceAddress,
        block: Vec<u8>,
    }

    impl DeviceMemory for SparseMemory {
        fn size(&self) -> u64 {
            self.size
        }

        fn read(&self, address: DeviceAddress, buffer: &mut [u8]) -> Result<(), MemoryFault> {
            buffer.fill(0);
            for (offset, byte) in buffer.iter_mut().enumerate() {
                let at = address.0 + offset as u64;
                if let Some(index) = at.checked_sub(self.parameters.0) {
                    if let Some(value) = self.block.get(index as usize) {
                        *byte = *value;
                    }
                }
            }
            Ok(())
        }

        fn write(&self, _: DeviceAddress, _: &[u8]) -> Result<(), MemoryFault> {
            Ok(())
        }
    }

    /// Layer 0's command of `shape` with the load's layout (allocations in load order) and a
    /// sparse memory holding its parameter block.
    fn layout_only(shape: &OptShape) -> (CommandDescriptor, SparseMemory) {
        let mut next = 0x1000_u64;
        let addresses: Vec<u64> = shape
            .allocation_sizes()
            .iter()
            .map(|size| {
                let start = next.next_multiple_of(DEVICE_ALIGNMENT);
                next = start + size;
                start
            })
            .collect();
        let parameters = OptParameters {
            hidden: shape.hidden,
            heads: shape.heads,
            head_dim: shape.head_dim,
            capacity: shape.capacity,
            output_split: shape.output_split,
            reserved: [0; 3],
            input: addresses[1],
            ln_gamma: addresses[2],
            ln_beta: addresses[3],
            qkv_weight: addresses[4],
            qkv_bias: addresses[5],
            output_weight: addresses[6],
            output_bias: addresses[7],
            workspace: addresses[8],
        };
        let command = CommandDescriptor {
            kernel: KernelId::OptAttention as u32,
            mode: 0,
            tag: 0,
            flags: 0,
            result_address: addresses[9],
            result_length: shape.result_bytes(),
            args: [
                addresses[0],
                addresses[10],
                addresses[11],
                u64::from(shape.position),
            ],
        };
        let memory = SparseMemory {
            size: next,
            parameters: DeviceAddress(addresses[0]),
            block: parameters.bytes().to_vec(),
        };
        (command, memory)
    }

    fn small() -> WorkloadOptions {
        WorkloadOptions {
            scale: Scale::Small,
            seed: 9,
            ..WorkloadOptions::default()
        }
    }

    /// Runs every launch on the fake device: inputs written, items stage by stage, then the
    /// tasks in reverse order with their bytes, then the final step.
    fn run_all(app: &mut OptApplication, device: &mut FakeDevice) -> usize {
        let mut launches = 0;
        while let Some(plan) = app.next_launch().unwrap() {
            launches += 1;
            let launched = testing::launch(device, &plan);
            assert_eq!(launched.kernel.stages(), 10);
            let mut covered = vec![0_u32; plan.command.result_length as usize];
            for (stage, spec) in &launched.items {
                if *stage < 9 {
                    assert_eq!(spec.result_length, 0);
                }
                for byte in spec.result_offset..spec.result_offset + u64::from(spec.result_length) {
                    covered[byte as usize] += 1;
                }
            }
            assert!(
                covered.iter().all(|c| *c == 1),
                "items cover the result once"
            );
            for task in plan.tasks.iter().rev() {
                let cost = app
                    .run_task(task, &testing::result_bytes(device, &plan, task))
                    .unwrap();
                assert!(cost.operations > 0 && cost.memory_bytes > 0);
            }
            app.finish_launch().unwrap();
        }
        launches
    }

    #[test]
    fn small_decode_step_end_to_end_matches_the_reference_bit_for_bit() {
        let mut app = OptApplication::new(&small()).unwrap();
        let mut device = FakeDevice::loaded(&mut app);
        assert_eq!(run_all(&mut app, &mut device), SMALL.layers as usize);
        let verification = app.verify();
        assert!(verification.passed, "{}", verification.detail);
        assert!(verification.detail.contains("bit for bit"));
        // Loading again starts over and gives the same answer.
        let first = app.answer().unwrap().to_vec();
        let mut device = FakeDevice::loaded(&mut app);
        assert!(app.answer().is_none());
        run_all(&mut app, &mut device);
        assert_eq!(app.answer().unwrap(), first.as_slice());
    }

    #[test]
    fn plan_inputs_and_tasks_cover_the_result() {
        let mut app = OptApplication::new(&small()).unwrap();
        let device = FakeDevice::loaded(&mut app);
        let plan = app.next_launch().unwrap().unwrap();
        assert!(plan.inputs.is_empty(), "layer 0's input is loaded");
        assert_eq!(plan.command.kernel, KernelId::OptAttention as u32);
        assert_eq!(
            (plan.command.mode, plan.command.tag, plan.command.flags),
            (0, 0, 0)
        );
        assert_eq!(plan.command.result_length, 64 * 4);
        assert_eq!(plan.command.args[3], 31);
        assert_eq!(plan.tasks.len(), 8);
        for (id, task) in plan.tasks.iter().enumerate() {
            assert_eq!(task.id as usize, id);
            assert_eq!(task.needs, 0..256);
            assert_eq!(task.chain, None);
        }
        // Finishing the launch by hand (every task on zeros) makes the next plan carry the
        // MLP's output as the device input.
        for task in &plan.tasks {
            app.run_task(task, &[0; 256]).unwrap();
        }
        app.finish_launch().unwrap();
        let next = app.next_launch().unwrap().unwrap();
        assert_eq!(next.inputs.len(), 1);
        assert_eq!(next.inputs[0].bytes.len(), 256);
        assert_ne!(
            next.command.args[1], plan.command.args[1],
            "layer 1's own cache"
        );
        // Item counts, one per M2NDP µthread: statistics 1, normalize 64/8, QKV 192/8, 4 heads
        // x 4 token packets three times, 4 heads x 1 softmax block, 4 heads x 16/8 dimension
        // packets, 4 parts x 8 row packets, residual 8.
        let kernel = Kernel::decode(&next.command, &device).unwrap();
        assert_eq!(kernel.items(), 1 + 8 + 24 + 3 * 16 + 4 + 8 + 32 + 8);
    }

    #[test]
    fn last_stage_items_tile_the_attention_output_a_packet_each() {
        for shape in [SMALL, PAPER] {
            // Only the parameter block matters for the plan: a sparse memory of the layout's
            // size holding just that block is enough to decode (no weights generated).
            let (command, device) = layout_only(&shape);
            let kernel = Kernel::decode(&command, &device).unwrap();
            let stage = kernel.stage_items(9);
            assert_eq!(stage.len() as u32, shape.hidden / 8, "items");
            assert_eq!(stage.end, kernel.items());
            for (packet, item) in stage.enumerate() {
                let spec = kernel.item(item, &device).unwrap();
                assert_eq!(spec.result_offset, 32 * packet as u64);
                assert_eq!(spec.result_length, 32);
            }
            for item in 0..kernel.stage_items(9).start {
                assert_eq!(kernel.item(item, &device).unwrap().result_length, 0);
            }
        }
        // Paper scale: 16,001 items per layer; a 10 KB result, 320 slots of 32 B, far below
        // 12.5% of the default ring (6,250 slots).
        let (command, device) = layout_only(&PAPER);
        assert_eq!(Kernel::decode(&command, &device).unwrap().items(), 16_001);
        assert_eq!(PAPER.result_bytes(), 2560 * 4);
        let slots = PAPER.result_bytes() / 32;
        assert_eq!(slots, 320);
        assert!(slots < 6_250);
    }

    #[test]
    fn paper_scale_layout_fits_the_budget() {
        let app = OptApplication::new(&WorkloadOptions::default()).unwrap();
        // 32 layers x 2 caches x 1024 x 2560 x 4 B plus about 105 MB of attention weights.
        let bytes = app.device_bytes();
        assert!(bytes > 671 << 20 && bytes < 800 << 20, "{bytes}");
        assert_eq!(app.tasks().len(), 32);
        let kernel_items = 16_001;
        assert!(app.tasks().len() * 500 < kernel_items);
    }

    #[test]
    fn a_corrupted_result_fails_verification_and_a_missing_task_fails_at_the_call() {
        let mut app = OptApplication::new(&small()).unwrap();
        let mut device = FakeDevice::loaded(&mut app);
        let plan = app.next_launch().unwrap().unwrap();
        testing::launch(&mut device, &plan);
        let base = plan.command.result_address as usize;
        let mut bytes = device.memory.borrow()[base..base + 256].to_vec();
        // A high mantissa bit of element 0 (a change of a few percent: the lowest bit can be
        // rounded away by the MLP's residual add).
        bytes[2] ^= 0x10;
        for task in &plan.tasks {
            app.run_task(task, &bytes).unwrap();
        }
        app.finish_launch().unwrap();
        run_all(&mut app, &mut device);
        let verification = app.verify();
        assert!(!verification.passed);
        assert!(
            verification.detail.contains("final hidden state"),
            "{}",
            verification.detail
        );

        let mut app = OptApplication::new(&small()).unwrap();
        FakeDevice::loaded(&mut app);
        let plan = app.next_launch().unwrap().unwrap();
        app.run_task(&plan.tasks[0], &[0; 256]).unwrap();
        let error = app.finish_launch().unwrap_err();
        assert_eq!(error.scope, Scope::Layer(0));
        assert!(
            matches!(error.problem, AppProblem::NeverRan { first: 1, .. }),
            "{error}"
        );
        assert!(error.to_string().contains("never ran"), "{error}");
    }

    #[test]
    fn unfinished_run_fails_verification_and_bad_calls_fail_at_the_call() {
        let mut app = OptApplication::new(&small()).unwrap();
        assert!(app.verify().detail.contains("never finished"));
        assert_eq!(
            app.next_launch().unwrap_err().problem,
            AppProblem::NotLoaded,
            "no launch before load"
        );
        let task = HostTask {
            id: 99,
            needs: 0..256,
            chain: None,
        };
        assert!(matches!(
            app.run_task(&task, &[0; 256]).unwrap_err().problem,
            AppProblem::NoSuchTask { task: 99, .. }
        ));
        assert!(!app.verify().passed);
    }

    #[test]
    fn info_names_the_sizes() {
        let info = info(&small());
        assert_eq!(info.name, NAME);
        assert!(
            info.characteristics.contains("hidden 64"),
            "{}",
            info.characteristics
        );
        let paper = super::info(&WorkloadOptions::default());
        assert!(paper.characteristics.contains("hidden 2560"));
        assert!(paper.characteristics.contains("1023 past tokens"));
    }
}
