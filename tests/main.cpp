// The test runner's main, for either Catch2 major version (see support/catch.hpp).
#if TPSIM_CATCH_MAJOR >= 3
#include "support/catch.hpp"
int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
