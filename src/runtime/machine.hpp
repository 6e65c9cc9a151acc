#pragma once
// Internal to runtime/: the simulated node a DAG runs on. executor.cpp drives
// streams and copies, kernel_launch.cpp turns ops into kernels, group_ops.cpp
// runs what happens once every rank has met (rings, send/recv, fused steps).
#include <memory>
#include <utility>
#include <vector>

#include "tpsim/core/simulator.hpp"
#include "tpsim/cost/elementwise_cost.hpp"
#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/cost/gemm_planner.hpp"
#include "tpsim/cost/l2_writeback.hpp"
#include "tpsim/cost/nccl_cost.hpp"
#include "tpsim/cost/p2p_plan.hpp"
#include "tpsim/dag/dag.hpp"
#include "tpsim/hw/block_scheduler.hpp"
#include "tpsim/hw/copy_engines.hpp"
#include "tpsim/hw/fabric.hpp"
#include "tpsim/runtime/rendezvous.hpp"
#include "tpsim/runtime/timeline.hpp"

namespace tpsim::runtime_detail {

struct StreamState {
  std::vector<OpId> ops;
  std::size_t head = 0;
  bool busy = false;
  Tick prev_end = 0;
  bool joined = false;  // its last op waited on another stream's event: the next kernel starts later
  EventHandle wake;
};

struct RankState {
  double nvlink_bytes_per_ps = 0;  // link traffic in and out: it is read from / written to HBM too
  Tick busy_since = 0;             // last change of the busy-SM count
  int busy = 0;
  std::unique_ptr<BlockScheduler> sms;
  std::unique_ptr<CopyEngines> copies;
  std::vector<StreamState> streams;
  // The L2's dirty bytes, followed from op to op where the run started after a benchmark's
  // flush (Machine::follows_l2).
  double l2_dirty = 0;
};

class Machine {
 public:
  Machine(const Dag& dag, const HardwareSpec& hw, bool detailed);
  Timeline run();

 private:
  // executor.cpp
  StreamState& stream_of(OpId id);
  void issue_programs();
  Tick host_cost(const Op& op, HostIssue how) const;
  void advance(int rank, int stream);
  void complete_now(OpId id);
  void finish(OpId id);
  void start_copy(OpId id, const CopyOp& c);
  void check_finished() const;
  void check_invariants() const;
  double hbm_left(int rank) const;
  void on_busy_change(int rank, Tick t, int busy);

  // kernel_launch.cpp
  void launch_kernel(OpId id);
  void gemm_kernel(OpId id, const GemmOp& g, KernelRequest& req);
  void elementwise_kernel(OpId id, const ElementwiseOp& e, KernelRequest& req);
  // A grid-stride streaming kernel's blocks (an element-wise op, split-K's reduction).
  void streaming_kernel(const ElementwisePlan& plan, const LoopWork& loop, KernelRequest& req) const;
  void reduction_kernel(OpId id, const ReduceOp& r, KernelRequest& req);
  void collective_kernel(OpId id, const CollectiveOp& c, KernelRequest& req);
  void barrier_kernel(OpId id, const BarrierOp& b, KernelRequest& req);
  void sendrecv_kernel(OpId id, const SendRecvOp& s, KernelRequest& req);
  void fused_kernel(OpId id, const FusedRingGemmOp& f, KernelRequest& req);
  void attention_kernel(OpId id, const AttentionOp& a, KernelRequest& req);
  // After a flush, each GEMM, element-wise or reduction kernel on `rank` moves the bytes the
  // dirty lines it finds add or save against its parameters' (l2_extra_bytes). NCCL kernels
  // and copy engines' copies (bound by links) evict and leave dirty lines unpriced; attention
  // and fused ring kernels (bound by their math) are taken to leave the L2 as it was.
  void charge_l2(int rank, const L2Reference& ref, double touched, double written, KernelRequest& req);
  // Kernels launched back to back find what their parameters assume: nothing is followed.
  bool follows_l2() const { return hw_.memory.l2_start != L2Start::back_to_back && hw_.memory.l2_dirty_bytes > 0; }
  void pass_l2(int rank, double touched, double written);
  BlockResources nccl_block(int threads) const;
  P2pPlan p2p_plan_of(OpId id, const SendRecvOp& s) const;
  double ring_link_capacity(const ProcessGroup& pg) const;
  bool in_one_node(const ProcessGroup& pg) const;
  NodeSpread node_spread(const ProcessGroup& pg) const;
  double nic_capacity(const ProcessGroup& pg) const;
  // Per process group, constant for a run: the ring's narrowest hop, whether one NVSwitch
  // holds it, how its ranks sit on nodes and a member's route to another node.
  struct GroupFabric {
    double ring_capacity = 0;
    bool one_node = false;
    NodeSpread spread;
    double nic_capacity = 0;
  };
  const GroupFabric& fabric_of(int group) const { return group_fabric_[static_cast<std::size_t>(dag_.process_group_id_of(group))]; }

  // group_ops.cpp
  void run_collective(const std::vector<OpId>& members, const CollectivePlan& plan);
  void run_ring(const std::vector<OpId>& members, const CollectivePlan& plan);
  void run_nvls(const std::vector<OpId>& members, const CollectivePlan& plan);
  void run_nvls_tree(const std::vector<OpId>& members, const CollectivePlan& plan);
  void run_sendrecv(const std::vector<OpId>& members, const NcclProtocol& proto);
  void run_fused_round(const std::vector<OpId>& members, const GemmPlan& plan, int grid, int round);
  // Starts each transfer, its payload `share` of what it puts on NVLink and on a NIC; calls
  // `done` once every one has landed (at once if none).
  void move_all(std::vector<std::pair<std::pair<int, int>, double>> transfers, PayloadShare share,
                std::function<void()> done);
  void release_all(const std::vector<OpId>& members);

  const Dag& dag_;
  const HardwareSpec& hw_;
  GemmPlanner gemm_plans_;
  Simulator sim_;
  Fabric fabric_;
  Rendezvous rendezvous_;
  std::vector<RankState> ranks_;
  std::vector<BlockScheduler::KernelId> kernel_of_;
  std::vector<std::vector<std::pair<int, int>>> waiters_;
  Timeline tl_;
  std::vector<GroupFabric> group_fabric_;
  Tick device_latency_ = 0;        // per kernel: from a stream or from a replayed graph
  Tick cross_stream_latency_ = 0;  // more after a wait on another stream's event (not measured in graphs: 0)
  // Per send/recv op, its busiest block's time (planned at launch, read when its step meets);
  // sized at the first send/recv.
  std::vector<Tick> sendrecv_processing_;
};

}  // namespace tpsim::runtime_detail
