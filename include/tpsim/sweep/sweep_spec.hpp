#pragma once
// A sweep file: a base scenario and axes over its fields. Points are the cross
// product of the axes in file order (the last axis varies fastest), numbered
// from 0; that numbering is what shards, resumes and merges agree on.
//
//   { "base": "scenarios/quickstart.json" | { ...scenario... },
//     "axes": { "workload.m": {"from": 1024, "to": 65536, "mul": 2},
//               "hardware": ["h100_sxm", "h200"],
//               "gpus": {"from": 2, "to": 8, "step": 2} } }
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpsim/io/json_reader.hpp"
#include "tpsim/workload/scenario.hpp"

namespace tpsim {

// A sweep may not have more points than this (checked before any point is made).
constexpr std::int64_t kMaxSweepPoints = 1'000'000;

struct SweepAxis {
  std::string field;          // dotted scenario path: "workload.m", "hardware", ...
  std::vector<Json> values;
};

struct SweepSpec {
  Json base;                  // the base scenario document
  std::string base_dir;       // where relative hardware paths resolve
  std::vector<SweepAxis> axes;
  std::string fingerprint;    // identifies the sweep's points (for resuming)
  std::string file;           // the sweep file it came from ("" when given as text)

  std::int64_t points() const;
  // The axis values of point i, one per axis.
  std::vector<Json> values_of(std::int64_t point) const;
  // The scenario document of point i.
  Json scenario_of(std::int64_t point) const;
};

// The scenario fields an axis may name.
std::vector<std::string> sweepable_fields();

// `dir`: where a relative base scenario path resolves.
SweepSpec parse_sweep(const std::string& text, const std::string& dir);
SweepSpec load_sweep_file(const std::string& file);

// Text of an axis value for CSV and tables: numbers as written, lists joined by '+'.
std::string value_text(const Json& v);

// 16 hex digits identifying `text` (FNV-1a, the same on every machine).
std::string fingerprint_of(const std::string& text);

}  // namespace tpsim
