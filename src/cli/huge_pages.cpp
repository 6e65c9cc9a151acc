#include "huge_pages.hpp"

#include <cstdlib>

#if defined(__linux__) && defined(__GLIBC__)
#include <unistd.h>
#endif

namespace tpsim::cli {

void restart_with_huge_pages(char** argv) {
#if defined(__linux__) && defined(__GLIBC__)
  if (std::getenv("GLIBC_TUNABLES") != nullptr || std::getenv("TPSIM_NO_RESTART") != nullptr) return;
  // Set before exec; the restarted process sees it set and does not restart again.
  if (setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 0) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GLIBC_TUNABLES");  // exec failed: carry on as we are
#else
  (void)argv;
#endif
}

}  // namespace tpsim::cli
