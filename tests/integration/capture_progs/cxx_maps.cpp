// tests/integration/capture_progs/cxx_maps.cpp -- a C++ program whose
// memory comes from operator new and delete: between "begin" and "built",
// a std::map of 20,000 strings of 40 bytes (a node and a string buffer per
// entry: 40,000 new) and one array of 16 over-aligned structs (an aligned
// new[] of 1,024 bytes, alignment 64); everything deleted by "cleared".
#include <map>
#include <memory>
#include <string>

#include "allocsim_mark.h"

struct alignas(64) Line {
  char bytes[64];
};

int main() {
  ALLOCSIM_MARK("begin");
  auto *map = new std::map<int, std::string>;
  for (int i = 0; i < 20000; i++)
    (*map)[i] = std::string(40, static_cast<char>('a' + i % 26));
  auto lines = std::make_unique<Line[]>(16);
  ALLOCSIM_MARK("built");
  delete map;
  lines.reset();
  ALLOCSIM_MARK("cleared");
  return 0;
}
