#pragma once
// std::visit with one lambda per alternative: std::visit(Overloaded{[](const A&) {...}, ...}, v).

namespace tpsim {

template <class... Fs>
struct Overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
Overloaded(Fs...) -> Overloaded<Fs...>;

}  // namespace tpsim
