#pragma once
#include <stdexcept>
#include <string>

namespace tpsim {

// Bad user input: a scenario, hardware file or measurement. The CLI prints
// what() on one line and exits 2. The message starts with the JSON path.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tpsim
