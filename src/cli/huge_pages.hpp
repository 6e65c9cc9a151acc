#pragma once
// A large run touches ~100 MB of small heap objects (ops, their edges and names) once;
// on 4 KiB pages that is ~27,000 page faults, about a sixth of the CLI's time on the
// 80-layer Llama3 70B run. glibc backs its heap with transparent huge pages when the
// tunable glibc.malloc.hugetlb=1 is set, and it reads tunables only at start-up, so the
// CLI restarts itself once with it set. It does not when the user set GLIBC_TUNABLES
// (their choice stands) or TPSIM_NO_RESTART, nor where it cannot (not Linux with glibc,
// no /proc/self/exe): then it simply runs on. Output is the same either way.
namespace tpsim::cli {

void restart_with_huge_pages(char** argv);

}  // namespace tpsim::cli
