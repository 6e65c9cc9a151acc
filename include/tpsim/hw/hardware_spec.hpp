#pragma once
// The physical parameters of one GPU and its node, in simulator units
// (picoseconds, bytes, bytes/ps, FLOP/ps). Loaded from models/*.json, where each
// number carries its unit and source; nothing here has a built-in default.
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tpsim/core/tick.hpp"
#include "tpsim/hw/dtype.hpp"

namespace tpsim {

// What one thread block asks of an SM; a block is placed only where all fit.
struct BlockResources {
  int threads = 0;
  int registers = 0;  // per block (threads x registers per thread)
  int shared_bytes = 0;
  int blocks = 1;  // block slots taken (always 1 for a real block)
};

inline constexpr int kMaxClusterCtas = 16;  // Hopper's largest (non-portable) thread-block cluster

struct SmSpec {
  int count = 0;
  BlockResources capacity;  // per SM: max threads, registers, shared memory, resident blocks
  // [c - 1]: how many thread-block clusters of c CTAs the GPU holds at once when each CTA needs a
  // whole SM (a cluster's CTAs share one GPC, whose SM counts differ); empty where not measured.
  std::vector<int> resident_clusters;
  // The CTAs clusters of c run at once (0: no limit known, or c = 1).
  std::int64_t resident_cluster_ctas(int c) const {
    if (c <= 1 || c > static_cast<int>(resident_clusters.size())) return 0;
    return static_cast<std::int64_t>(resident_clusters[static_cast<std::size_t>(c - 1)]) * c;
  }
};

struct GemmTile {
  int m = 0, n = 0, k = 0;
  double mainloop_efficiency = 0;  // fraction of the dtype's peak the MMAs issue at when operands are waiting
  unsigned dtypes = ~0u;           // bit per Dtype this kernel family serves (tensor-core tiles are not fp32's)
  bool serves(Dtype d) const { return (dtypes >> static_cast<int>(d)) & 1u; }
};

// PyTorch's grouped GEMMs (torch._grouped_mm, bf16: aten/src/ATen/native/cuda/GroupMM.cu;
// torch._scaled_grouped_mm, fp8: ScaledGroupMM.cu): CUTLASS grouped kernels whose tile is
// fixed by the groups' shape, not chosen by a heuristic: small_tile where a group has at
// most `small_dimension` rows or columns; else large_problem_tile where the file gives one
// and at least two of a group's M, N, K reach `large_problem_dimension` (the fp8 kernel's
// "large" groups with fast accumulation); otherwise large_tile. No split-K, every group's
// tiles in one persistent grid.
struct GroupedGemmSpec {
  GemmTile small_tile, large_tile, large_problem_tile;
  std::int64_t small_dimension = 0;
  std::int64_t large_problem_dimension = 0;  // 0: no large-problem tile
  bool present() const { return large_tile.m > 0; }
  bool serves(Dtype d) const { return present() && large_tile.serves(d); }
  const GemmTile& tile_for(std::int64_t m, std::int64_t n, std::int64_t k) const {
    if (m <= small_dimension || n <= small_dimension) return small_tile;
    const std::int64_t d = large_problem_dimension;
    const bool large = d > 0 && ((m >= d && k >= d) || (m >= d && n >= d) || (k >= d && n >= d));
    return large ? large_problem_tile : large_tile;
  }
};

// torch._scaled_mm with rowwise scales where ATen runs its own CUTLASS kernel
// (aten/src/ATen/native/cuda/RowwiseScaledMM.cu, f8f8bf16_rowwise: every rowwise GEMM before
// cuBLAS 12.9, and on Blackwell): two fixed tiles, small_tile while its grid fits one wave of
// the SMs, else large_tile; a thread-block cluster of two along one side, no split-K
// (cost/aten_rowwise_gemm.hpp has the dispatch).
struct RowwiseScaledGemmSpec {
  GemmTile small_tile, large_tile;
  bool present() const { return large_tile.m > 0; }
  bool serves(Dtype d) const { return present() && large_tile.serves(d); }
};

// cuBLAS's kernels for torch._scaled_mm with rowwise scales (cuBLAS 12.9 and later on Hopper:
// outer-vector scaling, nvjet ..._ovscale kernels): the one tile they were seen to run, a
// tile of gemm.tiles (its kernel family's rate), over the whole K. Absent: priced as
// tensor-wise scaled GEMMs.
struct LibraryRowwiseSpec {
  GemmTile tile;
  bool serves(Dtype d) const { return tile.m > 0 && tile.serves(d); }
};

// cuBLAS's own split-K choice, read from the kernels it ran where that was measured. It splits
// K when the problem's output has fewer reference tiles than SMs x (1 - depth / K), into as
// many slices as fill one wave of the candidate tile (each at least min_slice deep), and ranks
// its candidates by their waves of tile math: it does not see HBM, so the split plans it picks
// for GEMMs that stream their weight are not the fastest. Absent (no dtypes): every GEMM takes
// the plan predicted fastest, as an autotuner would.
struct GemmLibrarySplitSpec {
  unsigned dtypes = 0;  // bit per Dtype whose choice was measured
  int reference_m = 128, reference_n = 128;
  double depth = 0;
  long long min_slice = 1;
  bool serves(Dtype d) const { return (dtypes >> static_cast<int>(d)) & 1u; }
};

struct GemmSpec {
  std::vector<GemmTile> tiles;  // candidate set, in the order the heuristic prefers on ties; each dtype has at least one
  BlockResources block;
  Tick block_prologue = 0;  // per block: its own pipeline fill and epilogue
  Tick kernel_ramp = 0;     // per kernel: launch across SMs, first fill, last drain (paid by the first blocks)
  // Operand bytes one SM can stream from L2 into shared memory per ps. A tile loads
  // (m + n) x k elements per m x n x k MMAs, so smaller tiles need more of it per FLOP.
  double l2_load_bytes_per_ps_per_sm = 0;
  int max_split_k = 1;
  long long min_split_k_depth = 0;  // smallest K slice a split may get
  GemmLibrarySplitSpec library_split;
  GroupedGemmSpec grouped;          // torch._grouped_mm's kernel; absent: grouped GEMMs are planned as batched ones
  GroupedGemmSpec scaled_grouped;   // torch._scaled_grouped_mm's (fp8); absent likewise
  RowwiseScaledGemmSpec rowwise_scaled;  // ATen's rowwise-scaled fp8 kernel; absent: priced as cuBLAS's
  LibraryRowwiseSpec library_rowwise;    // cuBLAS's rowwise-scaled fp8 kernels; absent: its tensor-wise ones
  // fp8 main-loop rate when the kernel promotes partial sums to fp32 as it goes (use_fast_accum
  // off), as a fraction of the rate with the tensor cores' own accumulator; the tiles' efficiencies
  // are with it. 1 where the file does not say.
  double slow_accumulation = 1.0;
  // The grouped kernel family serving this dtype, or nullptr.
  const GroupedGemmSpec* grouped_for(Dtype d) const {
    if (grouped.serves(d)) return &grouped;
    if (scaled_grouped.serves(d)) return &scaled_grouped;
    return nullptr;
  }
};

// The L2 a run's first kernel finds (a benchmark's flush before each timed call): as a kernel
// launched right after itself leaves it (what kernel parameters are fitted to), read clean, or
// full of dirty lines (a buffer overwritten) that its misses must first write back to HBM.
enum class L2Start { back_to_back, clean, dirty };

struct MemorySpec {
  double hbm_bytes_per_ps = 0;     // sustained (nominal x efficiency)
  double sm_max_bytes_per_ps = 0;  // one SM cannot draw more than this
  double capacity_bytes = 0;       // HBM a process can allocate; 0 where the file does not say (a training step needs it)
  double framework_reserved_bytes = 0;  // CUDA context, NCCL buffers, allocator slack: never available to tensors
  // The L2's bytes, and how many of them a kernel that wrote more than it leaves dirty: the
  // capacity x the share of its lines still dirty (memory.l2_capacity, l2_dirty_share); 0
  // where the file does not say.
  double l2_capacity_bytes = 0;
  double l2_dirty_bytes = 0;
  L2Start l2_start = L2Start::back_to_back;  // the run's, not the part's: set by run_by or a measurement row
};

struct LaunchSpec {
  Tick host_overhead = 0;   // host time to enqueue one kernel, copy or event call from compiled code
  Tick eager_op_overhead = 0;    // host time of one eager PyTorch op (Python, dispatcher, launch)
  Tick eager_gemm_overhead = 0;  // the same for a matmul (cuBLAS heuristic lookup, workspace, launch)
  Tick device_latency = 0;  // from a kernel's dependencies done to its first block running, for a
                            // kernel after another kernel: every launch of a simulated program
  Tick repeat_latency = 0;  // the same, for the same kernel launched again right after itself (a
                            // benchmark's loop): the measurement rows that time such loops
  Tick graph_device_latency = 0;  // the same for a kernel replayed from a CUDA graph
  Tick cross_stream_latency = 0;  // more, when its stream has just waited on another stream's event
};

struct CopyEngineSpec {
  int count = 0;      // physical engines (reported)
  int p2p_engines = 0;  // engines the driver gives peer copies; copies queue on them in order
  double bytes_per_ps = 0;  // one engine's peak
  Tick latency = 0;         // from a copy's turn to its first byte on the wire
};

struct LinkSpec {
  double bytes_per_ps = 0;  // payload bandwidth per direction (nominal x efficiency)
  Tick latency = 0;         // added to a transfer that crosses this kind of link
  bool present() const { return bytes_per_ps > 0; }
};

struct FabricSpec {
  std::string topology;  // "switch" | "pairs" | "ring" | "multi_node" (see topology.hpp)
  LinkSpec nvlink;       // switch: per GPU port; pairs: the bridge; ring: each neighbour link
  LinkSpec pcie;         // pairs: between GPUs not bridged
  LinkSpec nic;          // multi_node: one per GPU between nodes
  int gpus_per_node = 0; // GPUs in one node; the whole system unless multi_node
};

// The scale-out network between nodes, as a training step across nodes sees it.
struct NetLatency {
  std::string protocol;  // NCCL protocol name
  Tick ring_step = 0;    // per ring step that crosses the network (NCCL tuning.cc hwLat NET, Ring)
  Tick tree_step = 0;    // per tree level across the network (hwLat NET, Tree)
  Tick nvls_tree_step = 0;  // Simple only, with NVLS: per level of the NVLS tree (hwLat NET, NVLSTree)
};

// In-network reduction (NVIDIA SHARP) in the switches between nodes: NCCL's CollNet
// all-reduce sends each GPU's 1/p slice of a node's buffer up the switch tree once and
// gets the reduced slice back, where a ring crosses the network 2(n-1)/n times. NCCL uses
// it only when asked (NCCL_COLLNET_ENABLE, off by default): a scenario's nccl_collnet.
struct SharpSpec {
  Tick latency = 0;       // the switch tree's reduction, up and down (NCCL hwLat NET, CollNetDirect)
  Tick nvls_latency = 0;  // the same under NVLS across nodes (hwLat NET, NVLS); 0 without NVLS
  bool enabled = false;   // NCCL's CollNet switched on
  bool available() const { return latency > 0; }
  bool present() const { return available() && enabled; }
};

struct ClusterSpec {
  LinkSpec nic;                 // one NIC per GPU, per direction, payload rate
  int nodes_per_leaf = 0;       // nodes whose NICs meet in one switch layer (a rail-optimized unit, a fat tree's leaf)
  double oversubscription = 1;  // bandwidth divisor for traffic between such units
  double tree_bandwidth_ratio = 0;  // NCCL's tree all-reduce bus bandwidth relative to a ring's
  std::vector<NetLatency> net_latency;
  SharpSpec sharp;
  bool present() const { return nic.present(); }
  const NetLatency* latency_for(const std::string& protocol) const {
    for (const auto& l : net_latency)
      if (l.protocol == protocol) return &l;
    return nullptr;
  }
};

struct NcclProtocol {
  std::string name;
  Tick base_latency = 0;
  Tick step_latency = 0;      // per ring hop
  double bandwidth_efficiency = 0;  // fraction of the port bandwidth carried as payload
  int threads = 0;            // per channel block
  double channel_threshold = 0;  // bytes per thread per channel before NCCL adds a channel
  // A ring's fixed start on this protocol (kernel start and the protocol's pipeline fill);
  // absent: nccl.ring_startup. Not part of NCCL's estimate, so it never picks the protocol.
  std::optional<Tick> startup;
};

// NVLink SHARP (NVLS): the NVSwitch reduces and multicasts, so an all-reduce inside a
// node moves (n+1)/n of the buffer through each GPU's port instead of a ring's 2(n-1)/n.
// Absent on hardware without it (A100, PCIe) or when the scenario switches it off.
struct NvlsSpec {
  int channels = 0;           // blocks the kernel holds (NCCL nvlsChannels)
  int threads = 0;            // per block
  double efficiency = 0;      // fraction of the port's payload rate multimem traffic reaches
  Tick latency = 0;           // NCCL's fixed latency for the algorithm
  int min_ranks = 0;          // NCCL sets NVLS up only for communicators of this many GPUs or more
  bool present() const { return channels > 0; }
};

// NCCL's send/recv planning (src/graph/paths.cc, src/init.cc, src/enqueue.cc of 2.20-2.21);
// cost/p2p_plan turns it into a message's protocol and its kernel's blocks.
struct P2pSpec {
  int channels = 0;               // p2pnChannels: the channel space (a power of 2)
  int channels_per_peer = 0;      // p2pnChannelsPerPeer inside a node (a power of 2)
  int channels_per_net_peer = 0;  // per network peer, before NCCL halves it for large communicators
  double chunk_bytes = 0;         // p2pChunkSize inside a node
  double net_chunk_bytes = 0;     // p2pChunkSize when the communicator spans nodes
  double ll_threshold_bytes = 0;  // LL at or below, Simple above (send/recv never runs LL128)
  int threads = 0;                // per block, whatever the protocol
  // What one channel's block moves through its send, receive and copy loops, bytes per ps
  // (sends, receives and self copies counted alike); 0: not modelled.
  double channel_bytes_per_ps = 0;
};

struct NcclSpec {
  int max_channels = 0;
  P2pSpec p2p;
  Tick ring_startup = 0;  // from every rank resident to the first byte moving
  int registers_per_thread = 0;
  int shared_bytes = 0;
  std::vector<NcclProtocol> protocols;
  NvlsSpec nvls;  // all-reduce inside one node only
  // What one ring channel's block moves through its copy loop (all-gather stages) and its
  // reduce loop (reduce-scatter stages), bytes of the buffer per ps; 0: not modelled.
  double channel_copy_bytes_per_ps = 0, channel_reduce_bytes_per_ps = 0;
  bool channel_rates_present() const { return channel_copy_bytes_per_ps > 0; }
};

struct BarrierSpec {
  Tick latency = 0;  // from the last rank's arrival to every rank released
  BlockResources block;
};

// Which fused attention kernel runs: the hardware's newest flash kernel (its
// attention.forward/backward_efficiency: FlashAttention-3 on Hopper), FlashAttention-2
// (PyTorch SDPA's flash backend) or cuDNN's fused attention (SDPA's cuDNN backend, which
// recent PyTorch picks on Hopper: cudnn_generated_fort_native_sdpa_sm90_flash_fprop/bprop).
enum class AttentionKernel { newest, flash2, cudnn };

struct AttentionSpec {
  double forward_efficiency = 0;   // fraction of tensor peak a flash-attention forward sustains
  double backward_efficiency = 0;
  std::int64_t block_rows = 0;     // query rows per block
  // FlashAttention-2's, where the figures above are a newer kernel's (0: not given).
  double flash2_forward_efficiency = 0, flash2_backward_efficiency = 0;
  // cuDNN's fused attention (PyTorch SDPA's cuDNN backend; 0: not given).
  double cudnn_forward_efficiency = 0, cudnn_backward_efficiency = 0;
  bool has(AttentionKernel k) const {
    return k == AttentionKernel::newest || (k == AttentionKernel::flash2 ? flash2_forward_efficiency > 0 : cudnn_forward_efficiency > 0);
  }
  double efficiency(AttentionKernel k, bool backward) const {
    switch (k) {
      case AttentionKernel::flash2: return backward ? flash2_backward_efficiency : flash2_forward_efficiency;
      case AttentionKernel::cudnn: return backward ? cudnn_backward_efficiency : cudnn_forward_efficiency;
      case AttentionKernel::newest: break;
    }
    return backward ? backward_efficiency : forward_efficiency;
  }
};

struct ElementwiseSpec {
  BlockResources block;
  int blocks_per_sm = 1;  // grid = SMs x this (grid-stride loop)
  // A streaming kernel's start-up, paid by every placement of its blocks (once when they go out
  // together; once per round where another kernel's blocks leave it few SMs): the first loads'
  // DRAM round trip before bytes flow (behind the dirty lines earlier kernels left in L2), the
  // last stores' drain; its floor: a tiny copy still takes it.
  Tick block_overhead = 0;
  // Elements one SM puts through ATen's unvectorized loops per ps (ElementLoop cast, index,
  // scatter, cat): their instructions per element bound them below HBM's rate. The legacy
  // strided loop's rate is per operand and element (each operand's offset computed), with
  // its unroll: 4 elements a thread for 2-byte outputs, 2 for wider ones ("wide"). 0: not
  // modelled (such kernels stream at the vectorized rate).
  double cast_sm_elements_per_ps = 0;
  double strided_sm_operands_per_ps = 0, strided_wide_sm_operands_per_ps = 0;
  double strided_dimension_cost = 0;  // an offset's extra cost per dimension past two, as a fraction of a 2-D one
  double index_sm_elements_per_ps = 0, scatter_sm_elements_per_ps = 0, cat_sm_elements_per_ps = 0;
  // Inductor's looped row reductions (ElementLoop row_reduction): elements one SM puts through
  // per ps, and the time each row costs its SM besides. 0: they stream.
  double row_reduction_sm_elements_per_ps = 0;
  Tick row_reduction_row_cost = 0;
};

// The kernels that may end a decomposed reduce-scatter (a software choice: see
// the scenario's "software" section), and what one SM processes with each.
enum class ReductionKernel { aten_sum, triton };
constexpr int kReductionKernels = 2;

struct ReductionSpec {
  std::array<double, kReductionKernels> sm_bytes_per_ps{};  // bytes read + written per SM, indexed by ReductionKernel
  // Bytes of the sum one SM writes per ps where the kernel's cost is per output element
  // (its loop, index math and store), whatever the partials; 0 where no such bound is known.
  std::array<double, kReductionKernels> sm_output_bytes_per_ps{};
  // Where the kernel loads the partials in rounds (ATen's reduce: vt0 loads along the reduced
  // axis, then their adds), each round waits on its loads: bytes of the sum one SM writes per
  // ps per round, and how many partials one round loads. 0 where the kernel has no rounds.
  std::array<double, kReductionKernels> sm_round_output_bytes_per_ps{};
  std::array<int, kReductionKernels> loads_per_round{};
  // The kernel's start-up, where it exceeds a streaming kernel's (ATen's reduce kernel: its
  // config and index setup), paid as elementwise.block_overhead is; where none is given,
  // elementwise.block_overhead.
  std::array<Tick, kReductionKernels> block_overhead{};
};

// The board's power limit and how a tensor-core kernel's speed follows the power it may draw.
// The gemm and attention parameters describe tensor-core kernels run back to back at a
// measured draw; a limit below that draw lowers the clock until the kernels draw the limit,
// and their speed follows power as power ~ speed^exponent (fitted to GEMMs given more or less
// power between copies). FFMA (fp32) kernels draw less and keep their rate.
// A short burst after idle (a benchmark's few calls) runs before the limit's power averaging
// reacts, at the clock ceiling: `burst_speed` times the parameters' rate, whatever the limit.
struct PowerSpec {
  double limit_w = 0;               // 0: no power section (tensor rates as the parameters give them)
  double tensor_sustained_w = 0;    // draw of back-to-back tensor-core GEMMs at the parameters' rate
  double speed_power_exponent = 1;  // power ~ speed^exponent where the limit binds
  double burst_speed = 0;           // tensor-core speed at the clock ceiling, relative to the parameters'; 0: not known
  bool burst = false;               // the run is such a burst (a scenario's or measurement's clock), not sustained
  // Speed of tensor-core kernels relative to the parameters' (1 where the limit does not bind).
  double tensor_speed() const {
    if (burst && burst_speed > 0) return burst_speed;
    if (limit_w <= 0 || limit_w >= tensor_sustained_w) return 1.0;
    return std::pow(limit_w / tensor_sustained_w, 1.0 / speed_power_exponent);
  }
};

struct HardwareSpec {
  std::string name;
  std::string description;
  SmSpec sm;
  std::array<double, 4> peak_flops_per_ps{};  // whole GPU, dense, indexed by Dtype
  GemmSpec gemm;
  MemorySpec memory;
  LaunchSpec launch;
  CopyEngineSpec copy_engines;
  FabricSpec fabric;
  ClusterSpec cluster;  // absent (no NIC) where the file describes one node only
  NcclSpec nccl;
  BarrierSpec barrier;
  ElementwiseSpec elementwise;
  ReductionSpec reduction;
  AttentionSpec attention;
  PowerSpec power;

  bool computes(Dtype d) const { return peak_flops_per_ps[static_cast<int>(d)] > 0; }
  // The rate kernels issue at: the nominal peak (MFU's denominator), slowed on tensor cores
  // where the power limit holds the clock below the one the parameters were fitted at.
  double peak_flops_per_sm_per_ps(Dtype d) const {
    const double scale = d == Dtype::fp32 ? 1.0 : power.tensor_speed();
    return peak_flops_per_ps[static_cast<int>(d)] * scale / sm.count;
  }
};

}  // namespace tpsim
