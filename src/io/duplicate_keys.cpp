#include "tpsim/io/duplicate_keys.hpp"

#include <fmt/format.h>

namespace tpsim {

using Event = nlohmann::detail::parse_event_t;

std::string DuplicateKeyGuard::path() const {
  std::string p = "$";
  for (std::size_t i = 1; i < stack_.size(); ++i) {
    const Frame& parent = stack_[i - 1];
    p += parent.array ? fmt::format("[{}]", parent.index) : "." + parent.key;
  }
  return p;
}

void DuplicateKeyGuard::element_done() {
  if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
}

void DuplicateKeyGuard::on(Event event, const std::string* key) {
  switch (event) {
    case Event::object_start: stack_.emplace_back(); break;
    case Event::array_start:
      stack_.emplace_back();
      stack_.back().array = true;
      break;
    case Event::key: {
      Frame& f = stack_.back();
      if (!f.keys.insert(*key).second)
        throw InputError(fmt::format("{}: duplicate key \"{}\" (JSON readers disagree on which value wins)", path(), *key));
      f.key = *key;
      break;
    }
    case Event::object_end:
    case Event::array_end:
      stack_.pop_back();
      element_done();
      break;
    case Event::value: element_done(); break;
  }
}

}  // namespace tpsim
