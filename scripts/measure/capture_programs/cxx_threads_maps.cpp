// scripts/measure/capture_programs/cxx_threads_maps.cpp -- a threaded C++
// program for scripts/measure/advise_threads.py: 4 threads each build a
// std::map of 200,000 strings (20-219 bytes) and erase every other entry;
// the main thread takes the maps ("built"), clears them ("cleared"), then
// allocates a 64 MiB vector ("big").  Marks through allocsim_mark when
// captured.
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

extern "C" void allocsim_mark(const char *label) __attribute__((weak));

static void mark(const char *label) {
  if (allocsim_mark)
    allocsim_mark(label);
}

int main() {
  mark("begin");
  std::vector<std::thread>                threads;
  std::vector<std::map<int, std::string>> maps(4);
  for (int t = 0; t < 4; t++)
    threads.emplace_back([t, &maps] {
      std::map<int, std::string> m;
      for (int i = 0; i < 200000; i++)
        m[i] = std::string(20 + (i * 7 + t) % 200, 'x');
      for (int i = 0; i < 200000; i += 2)
        m.erase(i);
      maps[t] = std::move(m);
    });
  for (auto &t : threads)
    t.join();
  mark("built");
  for (auto &m : maps)
    m.clear();
  mark("cleared");
  auto big = std::make_unique<std::vector<char>>(64 << 20);
  mark("big");
  std::printf("%zu\n", big->size());
}
