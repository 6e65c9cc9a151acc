#pragma once
// JSON allows an object to repeat a key and nlohmann keeps the last value, so
// {"gpus": 8, "gpus": 4} would silently run on 4 GPUs. Parsing through this
// guard makes a repeated key an InputError naming the object's JSON path.
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "tpsim/io/input_error.hpp"

namespace tpsim {

class DuplicateKeyGuard {
 public:
  // Called for every parse event; `key` is the key's text for a key event.
  void on(nlohmann::detail::parse_event_t event, const std::string* key);

 private:
  struct Frame {
    bool array = false;
    std::size_t index = 0;       // next element's index (arrays)
    std::string key;             // the key being read (objects)
    std::unordered_set<std::string> keys;  // keys seen so far (objects)
  };
  std::string path() const;
  void element_done();
  std::vector<Frame> stack_;
};

// J::parse with the guard: a repeated key throws InputError("$.path: duplicate key \"k\"").
template <class J>
J parse_rejecting_duplicate_keys(const std::string& text) {
  DuplicateKeyGuard guard;
  return J::parse(text, [&guard](int, typename J::parse_event_t event, J& parsed) {
    guard.on(event, event == J::parse_event_t::key ? &parsed.template get_ref<const typename J::string_t&>() : nullptr);
    return true;
  });
}

}  // namespace tpsim
