#pragma once
// A measurement row's GEMM: read from the row's keys and written back to them.
#include <cstdint>
#include <string>

#include "tpsim/cost/gemm_cost.hpp"
#include "tpsim/io/json_reader.hpp"

namespace tpsim {

// The row's "dtype"; one of its dimensions, bounded as every GEMM operand's is.
Dtype parse_dtype_at(const ObjectReader& r);
std::int64_t row_dimension(const ObjectReader& r, const std::string& key);

// m, n, k and dtype, and how the GEMM ran: a batch, PyTorch's grouped kernel and its groups,
// torch._scaled_mm's scales and accumulation, the library plan, heuristic rank and cluster.
// Strict: every problem is an InputError naming the JSON path (`path`: the row's).
GemmProblem parse_gemm_row(const ObjectReader& r, const std::string& path);
// The same keys from a problem: parse_gemm_row reads them back as it.
void write_gemm_row(const GemmProblem& g, Json& j);

}  // namespace tpsim
