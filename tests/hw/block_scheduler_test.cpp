#include "support/catch.hpp"

#include <functional>
#include <vector>

#include "tpsim/hw/block_scheduler.hpp"

using namespace tpsim;

namespace {

SmSpec small_gpu(int sms) { return SmSpec{sms, BlockResources{2048, 65536, 233472, 32}, {}}; }
const BlockResources kGemmBlock{384, 384 * 168, 232448, 1};
const BlockResources kNcclBlock{544, 544 * 96, 81920, 1};

KernelRequest timed(std::int64_t blocks, Tick per_block, Tick* done_at, Simulator& sim) {
  KernelRequest k;
  k.block = kGemmBlock;
  k.blocks = blocks;
  k.block_time = [per_block] { return per_block; };
  k.on_complete = [done_at, &sim] { *done_at = sim.now(); };
  return k;
}

}  // namespace

TEST_CASE("Blocks run in waves over the free SMs: a staircase in the block count", "[hw][scheduler]") {
  for (auto [blocks, waves] : {std::pair{1, 1}, {132, 1}, {133, 2}, {264, 2}, {265, 3}}) {
    Simulator sim;
    BlockScheduler sched(sim, small_gpu(132));
    Tick done = -1;
    sched.launch(timed(blocks, 100, &done, sim));
    sim.run();
    CHECK(done == waves * 100);
  }
}

TEST_CASE("Blocks that start together share one completion event", "[hw][scheduler]") {
  Simulator sim;
  BlockScheduler sched(sim, small_gpu(132));
  Tick done = -1;
  sched.launch(timed(264, 100, &done, sim));
  const auto fired = sim.run();
  CHECK(done == 200);
  CHECK(fired == 2);
  CHECK(sched.blocks_dispatched() == 264);
}

TEST_CASE("A second kernel fills the SMs a partial wave leaves idle", "[hw][scheduler]") {
  Simulator sim;
  BlockScheduler sched(sim, small_gpu(132));
  Tick a_done = -1, b_done = -1;
  sched.launch(timed(200, 100, &a_done, sim));  // 132 + 68: second wave leaves 64 SMs idle
  sched.launch(timed(64, 100, &b_done, sim));
  sim.run();
  CHECK(a_done == 200);
  CHECK(b_done == 200);  // ran beside A's partial wave, not after it
}

TEST_CASE("A kernel limited to fewer resident blocks than SMs runs in more waves, and leaves the rest to another", "[hw][scheduler]") {
  // Clusters of 4 on an H100: 30 fit in its GPCs at once, 120 CTAs of 132 SMs.
  for (auto [blocks, waves] : {std::pair{120, 1}, {121, 2}, {128, 2}, {240, 2}, {241, 3}}) {
    Simulator sim;
    BlockScheduler sched(sim, small_gpu(132));
    Tick done = -1;
    KernelRequest k = timed(blocks, 100, &done, sim);
    k.max_resident_blocks = 120;
    sched.launch(std::move(k));
    sim.run();
    INFO(blocks << " blocks");
    CHECK(done == waves * 100);
  }
  Simulator sim;
  BlockScheduler sched(sim, small_gpu(132));
  Tick a_done = -1, b_done = -1;
  KernelRequest a = timed(240, 100, &a_done, sim);
  a.max_resident_blocks = 120;
  sched.launch(std::move(a));
  sched.launch(timed(24, 100, &b_done, sim));  // the 12 SMs A cannot use, twice
  sim.run();
  CHECK(a_done == 200);
  CHECK(b_done == 200);  // beside A, not after it
}

TEST_CASE("A held communication kernel takes whole SMs from a GEMM until released", "[hw][scheduler]") {
  Simulator sim;
  BlockScheduler sched(sim, small_gpu(132));
  KernelRequest nccl;
  nccl.block = kNcclBlock;
  nccl.blocks = 10;
  nccl.held = true;
  bool resident = false;
  nccl.on_resident = [&] { resident = true; };
  const auto id = sched.launch(std::move(nccl));
  CHECK(resident);
  CHECK(sched.busy_sms() == 10);
  Tick done = -1;
  sched.launch(timed(256, 100, &done, sim));
  sim.schedule_at(1000, [&] { sched.release(id); });
  sim.run();
  // 256 blocks on 122 SMs: 122 + 122 + 12 = three waves.
  CHECK(done == 300);
  CHECK(sched.busy_sms() == 0);
}

TEST_CASE("Small blocks share an SM while resources last", "[hw][scheduler]") {
  Simulator sim;
  BlockScheduler sched(sim, small_gpu(1));
  KernelRequest k;
  k.block = BlockResources{512, 512 * 32, 0, 1};  // 4 fit by threads (2048)
  k.blocks = 8;
  k.block_time = [] { return Tick{50}; };
  Tick done = -1;
  k.on_complete = [&] { done = sim.now(); };
  sched.launch(std::move(k));
  sim.run();
  CHECK(done == 100);
}

TEST_CASE("Memory-drawing blocks share the HBM pool: alone they take their prologue plus their bytes at their cap", "[hw][scheduler]") {
  Simulator sim;
  // 1 byte/ps of HBM; 140 blocks of 1e6 bytes each, 10 ps prologue, at most 0.1 byte/ps per block.
  BlockScheduler sched(sim, small_gpu(132), 1.0);
  Tick done = 0;
  KernelRequest k;
  k.block = kGemmBlock;
  k.blocks = 140;
  k.draws_memory = true;
  k.block_work = [] { return BlockWork{.fixed = 10, .bytes = 1e6, .max_bytes_per_ps = 0.1}; };
  k.on_complete = [&] { done = sim.now(); };
  sched.launch(std::move(k));
  sim.run();
  // First wave: 132 blocks share 1 byte/ps (each 1/132 of it, below its 0.1 cap): 132e6 ps, the
  // prologue hidden in the loads. Then 8 blocks with room to spare: 10 ps + 1e6 bytes at 0.1.
  CHECK(done == Approx(132e6 + 10 + 1e7).epsilon(1e-6));
}

namespace {

// Blocks whose work differs, handed out in launch order: block i does `work(i)` of pure math.
Tick list_scheduled(int sms, std::int64_t blocks, const std::function<Tick(std::int64_t)>& work, std::vector<std::int64_t>* order = nullptr) {
  Simulator sim;
  BlockScheduler sched(sim, small_gpu(sms));
  Tick done = -1;
  KernelRequest k;
  k.block = kGemmBlock;
  k.blocks = blocks;
  k.draws_memory = true;
  k.block_work_at = [&, order](std::int64_t i) {
    if (order) order->push_back(i);
    return BlockWork{.compute = work(i)};
  };
  k.on_complete = [&] { done = sim.now(); };
  sched.launch(std::move(k));
  sim.run();
  return done;
}

}  // namespace

TEST_CASE("Blocks of different work are handed out in launch order: the tail emerges, heavy-first ends sooner", "[hw][scheduler]") {
  // 4 SMs, 8 blocks of work 1..8 (x100): light first, blocks 5-8 start at 100-400 as 1-4 end
  // and the last ends at 400 + 800; heaviest first, every SM ends at 900 = 36 / 4, the bound.
  std::vector<std::int64_t> order;
  const Tick light_first = list_scheduled(4, 8, [](std::int64_t i) { return 100 * (i + 1); }, &order);
  const Tick heavy_first = list_scheduled(4, 8, [](std::int64_t i) { return 100 * (8 - i); });
  CHECK(light_first == 1200);
  CHECK(heavy_first == 900);
  CHECK(heavy_first < light_first);
  // Every block asked once, in launch order.
  REQUIRE(order.size() == 8);
  for (std::size_t i = 0; i < order.size(); ++i) CHECK(order[i] == static_cast<std::int64_t>(i));
  // Identical work gives the plain staircase, as grouped blocks do.
  CHECK(list_scheduled(4, 8, [](std::int64_t) { return 100; }) == 200);
}
