// laneleak's C++ side (built with -DUSE_NEW): allocation through operator new and delete, which
// jemalloc and tcmalloc define themselves (jemalloc 5 inlines its fast path: malloc never runs).
#include <cstddef>

extern "C" void *alloc_new(std::size_t n) { return new char[n]; }
extern "C" void free_delete(void *p) { delete[] static_cast<char *>(p); }
