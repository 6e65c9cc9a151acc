#pragma once
// The "training_step" workload of a scenario: model, batch, mesh and schedule,
// checked against each other (every problem named by its JSON path).
#include <string>
#include <vector>

#include "tpsim/hw/hardware_spec.hpp"
#include "tpsim/io/json_reader.hpp"
#include "tpsim/workload/training_spec.hpp"

namespace tpsim {

// The workload object's keys besides "op" (io/workload_kinds admits only these).
std::vector<std::string> training_step_keys();
TrainingStepSpec parse_training_step(const ObjectReader& w, std::int64_t gpus);
// "attention" ("flash" | "flash2" | "unfused") and "attention_dropout" of a layer or step workload.
AttentionChoice parse_attention_choice(const ObjectReader& w);
// "flash2" needs the hardware's FlashAttention-2 efficiencies.
void check_attention_hardware(const AttentionChoice& a, const HardwareSpec& hw);
// "tp_weight_grad_input": "regather" (false, Megatron-LM) or "saved" (true, PyTorch TP).
bool parse_tp_weight_grad_input(const ObjectReader& w);
// "activation_layout": "sequence_first" (false, Megatron-LM's [s, b, h]) or "batch_first"
// (true, torchtitan's [b, s, h] sharded along the sequence by DTensor).
bool parse_activation_layout(const ObjectReader& w);
// What the hardware must describe for this mesh: memory capacity, and a cluster
// network when the mesh spans nodes. Returns notes worth a line to the user.
std::vector<std::string> check_training_hardware(const TrainingStepSpec& step, std::int64_t gpus, const HardwareSpec& hw);

}  // namespace tpsim
